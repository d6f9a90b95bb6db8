"""Serialized records of a shard's files for tf.data, read through tfspark's own reader instead
of TensorFlow's file systems: any store pyarrow reaches (S3, GCS, ADLS, HDFS, fsspec; stock
TensorFlow has no s3, az or hdfs), with both CRCs of every record checked, remote files read
ahead in concurrent ranges (store.fetch) and optionally kept in a local cache.

make_dataset keeps TensorFlow's native TFRecordDataset for local files of the block layout,
which it reads faster; this is what it reads every other file with, local files of the row
layout included (1.2-1.3x TensorFlow's reader there: docs/benchmarks.md). The records travel as
blocks of up to `per_read` records and are parsed by the same batched tf.io.parse_example as
the native path's: small records (the row layout) as one string cut by tf.strings.substr (a
Python object per record would cost more than the cut), large ones (blocks of rows) as one
bytes object each: one copy fewer, and no block-sized allocations, which page-faulted
(docs/benchmarks.md).

One epoch is one generator fed by threads of our own (RecordSource.epoch), not a generator per
file under tf.data's interleave (where several of TensorFlow's threads ran Python at once): the
reads and CRC checks run in our threads, each with its next files opened ahead (as many as
concurrency.files_ahead gives: more of small files), and TensorFlow's thread only takes finished
blocks. Its rates behind latency: docs/benchmarks.md.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple, cast

import numpy as np
import pyarrow as pa

from tfspark.errors import CorruptRecordError, scrubbed
from tfspark.quiet import quiet_import
from tfspark.store.cache import FileCache
from tfspark.store.concurrency import OpenedAhead, files_ahead
from tfspark.store.fetch import Fetcher, hand_over, reading
from tfspark.store.shards import Shard
from tfspark.wire.stream import stream_framed
from tfspark.wire.tfrecord import HEADER_BYTES, TRAILER_BYTES

QUEUED = 4  # blocks read ahead per thread
ONE_BY_ONE_FROM = 4096  # mean record bytes from which records travel as one object each
_DONE = object()  # a thread's last item: its files are read


class Records(NamedTuple):
    """Records of one read, as TensorFlow takes them with one conversion: either their bytes
    in one string (framing included) with where each starts and how long it is (cut by
    tf.strings.substr: no Python object per record), or (starts and sizes None) an object
    array of one bytes object per record."""

    data: bytes | np.ndarray
    starts: np.ndarray | None
    sizes: np.ndarray | None

    def __len__(self) -> int:
        return len(self.data) if self.starts is None else len(self.starts)

    @staticmethod
    def join(parts: list[Records]) -> Records:
        """The records of several reads as one, in order."""
        if len(parts) == 1:
            return parts[0]
        if parts[0].starts is None:
            return Records(np.concatenate([p.data for p in parts]), None, None)
        starts, sizes, at = [], [], 0
        for p in parts:
            assert p.starts is not None and p.sizes is not None
            starts.append(p.starts + at)
            sizes.append(p.sizes)
            at += len(p.data)
        return Records(b"".join(cast(bytes, p.data) for p in parts), np.concatenate(starts),
                       np.concatenate(sizes))

    def head(self, n: int) -> Records:
        """The first n records."""
        if self.starts is None:
            return Records(self.data[:n], None, None)
        assert self.sizes is not None
        return Records(self.data, self.starts[:n], self.sizes[:n])


class RecordSource:
    """The records of each file of a shard (its stride, and the even-shard cut `counts`), as
    numpy arrays of bytes; an error names the file (and the record's byte offset)."""

    def __init__(self, part: Shard, counts: list[int], per_read: int, io_threads: int,
                 cache_dir: str | None):
        self.part, self.counts, self.per_read = part, counts, per_read
        # the files' records, about (a stride shard counts 1/n of them), against their bytes
        records = sum(c * part.stride(f)[0] for f, c in enumerate(part.records or ()))
        size = sum(part.sizes or ())  # (either 0: not known)
        self.one_by_one = bool(records and size >= ONE_BY_ONE_FROM * records)
        self._fetcher = Fetcher(io_threads, cache=FileCache(cache_dir) if cache_dir else None)

    def _open(self, f: int) -> Any:
        """File f for streaming (remote: its first ranges requested now)."""
        part = self.part
        return self._fetcher.open(part.files[f], part.sizes[f] if part.sizes else None,
                                  part.versions[f] if part.versions else None)

    @scrubbed
    def epoch(self, order: Any, slots: int, deterministic: bool
              ) -> Iterator[tuple[int, int, Records]]:
        """Every block of the files in `order` (file indices) as (file, block index in the
        file, Records). Thread k reads files order[k::slots] one after another, the next
        one opened ahead (files_ahead of them once one flows); deterministic: the threads
        take turns, a block each (so the order is fixed by `order` and `slots`), else
        whichever block is ready comes first."""
        files = [int(f) for f in order]
        slots = max(1, min(slots, len(files)))
        lanes = [files[k::slots] for k in range(slots)]
        if deterministic:
            queues: list[queue.Queue] = [queue.Queue(QUEUED) for _ in lanes]
        else:
            queues = [queue.Queue(QUEUED * slots)] * slots  # one queue all threads share
        stop = threading.Event()

        def put(k: int, item: Any) -> bool:
            return hand_over(queues[k], item, stop)

        ahead = files_ahead(self._fetcher.io_threads, slots, self.part.sizes)

        def run(k: int) -> None:
            opened = OpenedAhead(self._open, lanes[k])
            try:
                for p, f in enumerate(lanes[k]):
                    opened.open_after(p, 1)
                    for i, block in enumerate(self.blocks(f, opened.take(p))):
                        if not put(k, (f, i, block)):
                            return
                        if i == 0:  # the files after the next once this one flows, so
                            opened.open_after(p, ahead)  # they do not delay its first
                put(k, _DONE)
            except BaseException as e:  # noqa: BLE001 - raised in the consumer
                put(k, e)
            finally:
                opened.close()

        threads = [threading.Thread(target=run, args=(k,), daemon=True,
                                    name=f"tfspark-tf-read-{k}") for k in range(slots)]
        for t in threads:
            t.start()
        try:
            live = [True] * slots
            k = 0
            while any(live):
                while deterministic and not live[k]:
                    k = (k + 1) % slots
                item = queues[k].get()
                if item is _DONE:
                    live[k if deterministic else live.index(True)] = False
                    continue
                if isinstance(item, BaseException):
                    raise item
                yield item
                if deterministic:
                    k = (k + 1) % slots
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=10)

    @scrubbed
    def blocks(self, f: Any, opened: Any = None) -> Any:
        """Generator of file f's record blocks, as Records (f: a numpy or Python int; opened:
        the file's stream when it was opened ahead)."""
        f = int(f)
        part = self.part
        loc = part.files[f]
        name = loc.uri
        n, start = part.stride(f)
        want = self.counts[f]  # -1: no manifest count to check against
        limit = want if part.keep is not None else None
        gz = part.compressions[f] == "gzip"
        seen = taken = 0

        one_by_one = self.one_by_one

        def pick(buf: np.ndarray, offsets: np.ndarray, base: int) -> Records:
            nonlocal seen
            idx = np.arange(seen, seen + len(offsets) - 1)
            seen += len(offsets) - 1
            if n > 1 or start:
                idx = idx[(idx >= start) & ((idx - start) % n == 0)]
            rel = idx - (seen - (len(offsets) - 1))
            if one_by_one or (n > 1 and len(rel)):  # (a stride: only its records are kept)
                begin = offsets[rel] + HEADER_BYTES
                size = offsets[rel + 1] - TRAILER_BYTES - begin
                view = buf.data  # a memoryview: slices without copies
                pieces = [view[b:b + k] for b, k in zip(begin.tolist(), size.tolist())]
                if one_by_one:
                    records = np.empty(len(pieces), object)
                    records[:] = [bytes(p) for p in pieces]
                    return Records(records, None, None)
                return Records(b"".join(pieces), np.cumsum(size) - size, size)
            first = int(offsets[0])
            lo = offsets[rel] + HEADER_BYTES - first
            size = offsets[rel + 1] - TRAILER_BYTES - first - lo
            data = buf[first:int(offsets[-1])].tobytes() if len(rel) else b""
            return Records(data, lo, size)

        def whole_blocks(raw: Any) -> Iterator[Records]:
            """per_read records of this reader's stride a block, as TensorFlow's reader batches
            them after its shard (the same blocks, the same interleaved order), however the
            file was read: a block a read ends in is joined to the next read's first records
            (not framed again from one buffer: for blocks of large records that copied most
            of a remote file's ranges once more, into new arrays)."""
            every = self.per_read * n
            parts: list[Records] = []
            for got in stream_framed(raw, name, True, pick, gz, batch_records=every,
                                     first_record=0):
                if len(got):
                    parts.append(got)
                if seen % every == 0 and parts:  # (seen: the file's records so far)
                    yield Records.join(parts)
                    parts = []
            if parts:
                yield Records.join(parts)

        stream = opened if opened is not None else self._open(f)
        with reading(loc, name, gz):
            with stream:
                raw = pa.CompressedInputStream(stream, "gzip") if gz else stream
                for block in whole_blocks(raw):
                    if limit is not None and taken + len(block) >= limit:
                        yield block.head(limit - taken)
                        return  # even shards: the rest of the file is cut (not read)
                    taken += len(block)
                    yield block  # (never empty: whole_blocks joins only reads with records)
                if want >= 0 and taken != want:
                    mine = " for this reader" if n > 1 or start else ""  # a stride of it
                    raise CorruptRecordError(f"{name}: holds {taken} records{mine} but the "
                                             f"manifest lists {want}; the file was changed "
                                             f"after the write: rewrite the data set",
                                             path=name)
                if hasattr(stream, "complete"):
                    stream.complete()


def epoch_blocks(source: RecordSource, order: Any, slots: int, deterministic: bool) -> Any:
    """A tf.data.Dataset of (file, block index in the file, block: 1-D tf.string) of the files
    in `order` (a 1-D int64 tensor), read by RecordSource.epoch."""
    quiet_import("tensorflow")
    import tensorflow as tf

    def blocks(files: Any) -> Any:
        try:
            for f, i, block in source.epoch(files, slots, deterministic):
                yield (f, i, *_parts(block))
        except CorruptRecordError as e:  # TensorFlow makes a ValueError InvalidArgumentError
            raise ValueError(str(e)) from e

    ids = (tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int64))
    reads = tf.data.Dataset.from_generator(blocks, args=(order,),
                                           output_signature=(*ids, *_signature(source)))
    if source.one_by_one:
        return reads
    return reads.map(lambda f, i, data, starts, sizes: (f, i, tf.strings.substr(data, starts,
                                                                                 sizes)),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)


def file_blocks(source: RecordSource, f: Any) -> Any:
    """A tf.data.Dataset of file f's record blocks (1-D tf.string), f a scalar int tensor."""
    quiet_import("tensorflow")
    import tensorflow as tf

    if source.one_by_one:
        return tf.data.Dataset.from_generator(lambda f: (b.data for b in source.blocks(f)),
                                              args=(f,), output_signature=_signature(source)[0])
    reads = tf.data.Dataset.from_generator(lambda f: map(tuple, source.blocks(f)), args=(f,),
                                           output_signature=_signature(source))
    return reads.map(lambda data, starts, sizes: tf.strings.substr(data, starts, sizes))


def _parts(block: Records) -> tuple[Any, ...]:
    """What from_generator hands TensorFlow of a block (_signature)."""
    return (block.data,) if block.starts is None else tuple(block)


def _signature(source: RecordSource) -> tuple[Any, ...]:
    """The TensorSpecs of a source's blocks: records one by one, or one string cut later."""
    quiet_import("tensorflow")
    import tensorflow as tf

    if source.one_by_one:
        return (tf.TensorSpec([None], tf.string),)
    return (tf.TensorSpec([], tf.string), tf.TensorSpec([None], tf.int64),
            tf.TensorSpec([None], tf.int64))
