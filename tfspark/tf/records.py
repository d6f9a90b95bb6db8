"""Serialized records of a shard's files for tf.data, read through tfspark's own reader instead
of TensorFlow's file systems: any store pyarrow reaches (S3, GCS, ADLS, HDFS, fsspec; stock
TensorFlow has no s3, az or hdfs), with both CRCs of every record checked, remote files read
ahead in concurrent ranges (store/fetch.py) and optionally kept in a local cache.

make_dataset keeps TensorFlow's native TFRecordDataset for local files, which it reads as fast
(docs/benchmarks.md); this is what it reads every other file with. The records travel as
blocks (one string tensor of up to `per_read` records) and are parsed by the same batched
tf.io.parse_example as the native path's.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from tfspark.errors import CorruptRecordError
from tfspark.store.fetch import Fetcher, FileCache, reading
from tfspark.store.shards import Shard
from tfspark.wire.stream import stream_framed
from tfspark.wire.tfrecord import HEADER_BYTES, TRAILER_BYTES


class Records(NamedTuple):
    """Records of one read, as TensorFlow takes them with one conversion: their bytes in one
    string (framing included), and where each starts and how long it is. Handed on as one
    scalar string and cut by tf.strings.substr: no Python object per record, one copy."""

    data: bytes
    starts: np.ndarray
    sizes: np.ndarray


class RecordSource:
    """The records of each file of a shard (its stride, and the even-shard cut `counts`), as
    numpy arrays of bytes; an error names the file (and the record's byte offset)."""

    def __init__(self, part: Shard, counts: list[int], per_read: int, io_threads: int,
                 cache_dir: str | None):
        self.part, self.counts, self.per_read = part, counts, per_read
        self._fetcher = Fetcher(io_threads, cache=FileCache(cache_dir) if cache_dir else None)
        self._lock = threading.Lock()

    def blocks(self, f: Any) -> Any:
        """Generator of file f's record blocks, as Records (f: a numpy or Python int)."""
        f = int(f)
        part = self.part
        loc = part.files[f]
        name = loc.uri
        n, start = part.stride(f)
        want = self.counts[f]  # -1: no manifest count to check against
        limit = want if part.keep is not None else None
        gz = part.compressions[f] == "gzip"
        seen = taken = 0

        def pick(buf: np.ndarray, offsets: np.ndarray, base: int) -> Records:
            nonlocal seen
            idx = np.arange(seen, seen + len(offsets) - 1)
            seen += len(offsets) - 1
            if n > 1 or start:
                idx = idx[(idx >= start) & ((idx - start) % n == 0)]
            rel = idx - (seen - (len(offsets) - 1))
            first = int(offsets[0])
            lo = offsets[rel] + HEADER_BYTES - first
            size = offsets[rel + 1] - TRAILER_BYTES - first - lo
            data = buf[first:int(offsets[-1])].tobytes() if len(rel) else b""
            return Records(data, lo, size)

        stream = self._fetcher.open(loc, part.sizes[f] if part.sizes else None,
                                    part.versions[f] if part.versions else None)
        with reading(loc, name, gz):
            with stream:
                raw = pa.CompressedInputStream(stream, "gzip") if gz else stream
                for block in stream_framed(raw, name, True, pick, gz,
                                           batch_records=self.per_read):
                    if limit is not None and taken + len(block.starts) >= limit:
                        cut = limit - taken
                        yield Records(block.data, block.starts[:cut], block.sizes[:cut])
                        return  # even shards: the rest of the file is cut (not read)
                    taken += len(block.starts)
                    if len(block.starts):
                        yield block
                if want >= 0 and taken != want:
                    raise CorruptRecordError(f"{name}: holds {taken} records for this reader "
                                             f"but the manifest lists {want}; the file was "
                                             f"changed after the write: rewrite the data set",
                                             path=name)
                if hasattr(stream, "complete"):
                    stream.complete()


def file_blocks(source: RecordSource, f: Any) -> Any:
    """A tf.data.Dataset of file f's record blocks (1-D tf.string), f a scalar int tensor."""
    import tensorflow as tf

    reads = tf.data.Dataset.from_generator(
        source.blocks, args=(f,), output_signature=(tf.TensorSpec([], tf.string),
                                                    tf.TensorSpec([None], tf.int64),
                                                    tf.TensorSpec([None], tf.int64)))
    return reads.map(lambda data, starts, sizes: tf.strings.substr(data, starts, sizes))
