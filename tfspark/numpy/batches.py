"""read_batches(): tfspark output -> batches of NumPy arrays, for JAX, PyTorch and every Keras 3
backend. Needs neither TensorFlow nor pyspark.

    plan (read_plan.py, as make_dataset) -> per epoch: the shard's files, shuffled -> a pool of
    threads, each streaming whole files (CRCs checked) and decoding chunks of records with the
    compiled kernels (which release the GIL) -> a bounded queue -> window shuffle -> batches

Memory is bounded: at most `2 * num_threads` decoded chunks wait in the queue, plus the shuffle
window. Each file's rows are counted against the manifest at its end.
"""

from __future__ import annotations

import copy
import os
import queue
import threading
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tfspark.errors import CorruptRecordError, OptionError
from tfspark.numpy.columns import Table, concat_tables, num_rows, slice_table, take_table
from tfspark.numpy.decode import STRING_FORMS, NumpyDecoder
from tfspark.spec.model import FeatureSpec
from tfspark.store.fetch import AHEAD, IO_THREADS, Fetcher, FileCache
from tfspark.store.read_plan import ReadPlan, check_io_args, check_read_args, plan_read
from tfspark.store.shards import Shard, split_shard
from tfspark.store.shards import shard as shard_plan
from tfspark.wire.stream import first_damage, stream_framed

_CHUNK_ROWS = 65536  # rows decoded per kernel pass (blocks: at least one block); measured
_DONE = object()


def read_batches(path_or_files: str | os.PathLike | Sequence[str | os.PathLike],
                 batch_size: int, *, split: str | None = None,
                 label_cols: Iterable[str] | str | None = None,
                 spec: FeatureSpec | str | dict | None = None,
                 shuffle_buffer: int | None = None, seed: int | None = None,
                 epochs: int | None = 1, shard: tuple[int, int] | None = None,
                 even_shards: bool = True, drop_remainder: bool = False,
                 num_threads: int | None = None, shuffle_files: bool = True,
                 compression: str | None = None, strings: str = "object",
                 filesystem: Any = None, io_threads: int | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 columns: Iterable[str] | str | None = None) -> BatchReader:
    """Batches of NumPy arrays read from tfspark output (row or block layout), like make_dataset
    without TensorFlow: the same arguments mean the same (see make_dataset), and

    num_threads: files read and decoded at once (default: the CPU cores, at most 8); 1 with
      shuffle_buffer=0 and shuffle_files=False reads rows in file order, deterministically.
    strings: "object" (default): string features as object arrays of bytes, as tf.string;
      "bytes": each string as its uint8 bytes, a Ragged one level below the feature's shape
      (a scalar string column is Ragged(uint8 values, row_splits)). "bytes" creates no Python
      object per value, so it decodes faster and scales with threads.
    filesystem: where the paths are (a pyarrow.fs.FileSystem, or an fsspec filesystem); default:
      from the path (local, or a URI's scheme and query options).
    io_threads: files streamed at once when they are on an object store (default 16),
      whatever num_threads is: each file is one request, read up to 4 x 8 MiB ahead of its
      decoding, and the next files are opened while one is decoded (store/fetch.py).
    cache_dir: a local directory where remote files, once read whole and checked, are kept
      (per write of the data set, so a rewritten data set is fetched anew); later epochs and
      runs read them from there.
    columns: the features to read (a name or a list; the labels come as well); default: every
      feature of the spec.

    Yields (features, labels) as make_dataset does (features alone without label columns):
    features is {name: column}. A fixed feature is an array [batch] or [batch, n] (strings: an
    object array of bytes; null rows hold the spec's default); a variable-length one is a
    tfspark.numpy.Ragged(values, row_splits) (row i: values[row_splits[i]:row_splits[i+1]]),
    a 2-D ragged one a Ragged whose values are a Ragged. len() is the number of batches when
    the manifest gives the counts and epochs is not None.

    Raises as make_dataset does, before reading; while iterating, CorruptRecordError names the
    file and byte offset of a damaged record, or the file whose count disagrees.
    """
    check_read_args(batch_size, shuffle_buffer, epochs, 1, shard, False, seed)
    if num_threads is not None and (not isinstance(num_threads, int) or
                                    isinstance(num_threads, bool) or num_threads < 1):
        raise OptionError(f"num_threads must be a positive int or None, got {num_threads!r}")
    if strings not in STRING_FORMS:
        raise OptionError(f"strings must be one of {list(STRING_FORMS)}, got {strings!r}")
    check_io_args(io_threads, cache_dir)
    plan = plan_read(path_or_files, split=split, spec=spec, label_cols=label_cols,
                     compression=compression, filesystem=filesystem, columns=columns)
    reader = BatchReader(plan, batch_size, shuffle_buffer=shuffle_buffer, seed=seed,
                         epochs=epochs, shard=shard, even_shards=even_shards,
                         drop_remainder=drop_remainder,
                         num_threads=num_threads or min(8, os.cpu_count() or 1),
                         shuffle_files=shuffle_files, strings=strings,
                         io_threads=io_threads or IO_THREADS,
                         cache_dir=None if cache_dir is None else os.fspath(cache_dir))
    return reader


class BatchReader:
    """The iterable read_batches returns; each iteration runs all its epochs again."""

    def __init__(self, plan: ReadPlan, batch_size: int, *, shuffle_buffer: int | None,
                 seed: int | None, epochs: int | None, shard: tuple[int, int] | None,
                 even_shards: bool, drop_remainder: bool, num_threads: int,
                 shuffle_files: bool, strings: str = "object", io_threads: int = IO_THREADS,
                 cache_dir: str | None = None):
        self.plan, self.batch_size, self.epochs = plan, batch_size, epochs
        self.part: Shard = shard_plan(plan, shard, even_shards)
        self.buffer = 10 * batch_size if shuffle_buffer is None else shuffle_buffer
        self.seed, self.drop_remainder = seed, drop_remainder
        self.num_threads, self.shuffle_files = num_threads, shuffle_files
        self.labels, self.strings = plan.labels, strings
        self.io_threads, self.cache_dir = io_threads, cache_dir  # for remote files
        self._iterations = 0

    def for_worker(self, workers: int, worker: int) -> BatchReader:
        """This reader's part for one of `workers` loader workers of one process (a PyTorch
        DataLoader's): disjoint parts that together yield each of its rows exactly once per
        epoch (no evening between them: they feed one training rank)."""
        part = copy.copy(self)
        part.part = split_shard(self.part, workers, worker, self.plan.rows_per_record)
        part._iterations = 0
        return part

    def steps_per_epoch(self) -> int | None:
        """Batches per epoch, when the manifest gives the counts (batches run on across epochs,
        as make_dataset's do, unless even shards end them with each epoch)."""
        total = self.part.total
        if total is None:
            return None
        return total // self.batch_size if self.drop_remainder else -(-total // self.batch_size)

    def __len__(self) -> int:
        total = self.part.total
        if total is None or self.epochs is None:
            raise TypeError("the number of batches is unknown: no manifest counts, or "
                            "epochs=None (repeats forever)")
        if self.part.keep is not None:  # batches end with each epoch
            return int(self.steps_per_epoch() or 0) * self.epochs
        rows = total * self.epochs
        return rows // self.batch_size if self.drop_remainder else -(-rows // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        self._iterations += 1
        base = None if self.seed is None else self.seed + 7919 * self._iterations
        rng = np.random.default_rng(base)
        carry: Table | None = None  # fewer than batch_size rows, waiting for more
        epoch = 0
        while self.epochs is None or epoch < self.epochs:
            for rows in self._windows(rng):
                batches, carry = self._cut(carry, rows)
                yield from batches
            epoch += 1
            if self.part.keep is not None:  # even shards: the epoch ends its last batch
                yield from self._rest(carry)
                carry = None
        yield from self._rest(carry)

    def _cut(self, carry: Table | None, rows: Table) -> tuple[list[Any], Table | None]:
        """Full batches from carry + rows (views of rows; only a batch that straddles the two
        is copied), and what is left over."""
        size, n, start, out = self.batch_size, num_rows(rows), 0, []
        if carry is not None:
            need = size - num_rows(carry)
            if n < need:
                return [], concat_tables([carry, rows])
            out.append(self._split(concat_tables([carry, slice_table(rows, 0, need)])))
            start = need
        while n - start >= size:
            out.append(self._split(slice_table(rows, start, start + size)))
            start += size
        return out, (slice_table(rows, start, n) if start < n else None)

    def _rest(self, carry: Table | None) -> Iterator[Any]:
        if carry is not None and num_rows(carry) and not self.drop_remainder:
            yield self._split(carry)

    def _windows(self, rng: np.random.Generator) -> Iterator[Table]:
        """One epoch's rows, a shuffled window at a time (in file order without shuffling)."""
        order = list(range(len(self.part.files)))
        if self.shuffle_files and len(order) > 1:
            order = [int(i) for i in rng.permutation(len(order))]
        pending: list[Table] = []
        have = 0
        chunks = self._chunks(order)
        try:
            for chunk in chunks:
                pending.append(chunk)
                have += num_rows(chunk)
                if have >= self.buffer:
                    yield self._mix(concat_tables(pending), rng)
                    pending, have = [], 0
        finally:
            chunks.close()  # stops the reading threads
        if have:
            yield self._mix(concat_tables(pending), rng)

    def _mix(self, rows: Table, rng: np.random.Generator) -> Table:
        if self.buffer <= 0:
            return rows
        return take_table(rows, rng.permutation(num_rows(rows)))

    def _split(self, batch: Table) -> Any:
        if not self.labels:
            return batch
        ys = {name: batch.pop(name) for name in self.labels}
        return batch, (ys[self.labels[0]] if len(self.labels) == 1 else ys)

    def _chunks(self, order: list[int]) -> Generator[Table, None, None]:
        """Decoded chunks of the files in `order`, from a pool of threads (file order kept
        with one thread)."""
        out: queue.Queue = queue.Queue(maxsize=2 * self.num_threads)
        stop = threading.Event()
        lock = threading.Lock()
        fetcher = Fetcher(self.io_threads, cache=FileCache(self.cache_dir)
                          if self.cache_dir else None)
        # Remote files: the next ones are opened (their first ranges requested) while earlier
        # ones are read, so one file's latency hides behind another's decoding.
        ahead = 0 if all(loc.is_local for loc in self.part.files) else \
            max(1, self.io_threads // AHEAD)
        opened: dict[int, Any] = {}
        cursor = [0]

        def next_file() -> tuple[int, Any] | None:
            with lock:
                if cursor[0] >= len(order):
                    return None
                f = order[cursor[0]]
                cursor[0] += 1
                for g in order[cursor[0]:cursor[0] + ahead]:
                    if g not in opened:
                        opened[g] = self._open(fetcher, g)
                return f, opened.pop(f, None)

        def put(item: Any) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def work() -> None:
            decoder = NumpyDecoder(self.plan.example_spec, self.plan.rows_per_record,
                                   self.strings)
            try:
                while not stop.is_set():
                    picked = next_file()
                    if picked is None:
                        break
                    f, stream = picked
                    for chunk in self._read_file(f, decoder, stream or self._open(fetcher, f)):
                        if not put(chunk):
                            return
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                put(e)
            finally:
                put(_DONE)

        threads = [threading.Thread(target=work, daemon=True, name=f"tfspark-read-{i}")
                   for i in range(min(self.num_threads, max(1, len(order))))]
        for t in threads:
            t.start()
        done = 0
        try:
            while done < len(threads):
                item = out.get()
                if item is _DONE:
                    done += 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=10)
            for stream in opened.values():
                stream.close()
            fetcher.close()

    def _open(self, fetcher: Fetcher, f: int) -> Any:
        """File f of the part, open for streaming (remote: read ahead; cached by its write)."""
        part = self.part
        return fetcher.open(part.files[f], part.sizes[f] if part.sizes else None,
                            part.versions[f] if part.versions else None)

    def _check_count(self, name: str, rows: int, whole: int | None) -> None:
        """A file read to its end holds the rows its manifest entry lists."""
        want = whole if self.part.rows is not None or self.plan.rows_per_record == 1 else None
        if want is not None and rows != want:
            raise CorruptRecordError(f"{name}: holds {rows} rows for this reader but the "
                                     f"manifest lists {want}; the file was changed after the "
                                     f"write: rewrite the data set", path=name)

    def _read_file(self, f: int, decoder: NumpyDecoder, opened: Any) -> Iterator[Table]:
        """A file's rows in decoded chunks (this shard's records of it, the first `keep` rows
        of them with even shards), then its count check."""
        part = self.part
        loc = part.files[f]
        name = loc.uri
        if part.keep is not None and part.keep[f] == 0:
            opened.close()
            return
        n, start = part.stride(f)
        seen_records = rows = 0
        per_chunk = max(1, _CHUNK_ROWS // self.plan.rows_per_record)

        def decode(buf: np.ndarray, offsets: np.ndarray, base: int) -> Table:
            nonlocal seen_records
            table, sizes = decoder.decode(buf, offsets, path=name, offset=base)
            first, seen_records = seen_records, seen_records + len(sizes)
            if n == 1 and start == 0:
                return table
            at = np.arange(first, first + len(sizes))
            keep = (at >= start) & ((at - start) % n == 0)
            row_keep = np.repeat(keep, sizes)
            return take_table(table, np.flatnonzero(row_keep))

        counts = part.file_rows()
        whole = counts[f] if counts is not None else None
        limit = part.keep[f] if part.keep is not None and part.keep[f] != whole else None
        gz = part.compressions[f] == "gzip"  # the manifest's, or sniffed when planning
        try:
            with opened as raw:
                stream = pa.CompressedInputStream(raw, "gzip") if gz else raw
                for table in stream_framed(stream, name, True, decode, gz,
                                           batch_records=per_chunk):
                    if limit is not None and rows + num_rows(table) >= limit:
                        yield slice_table(table, 0, limit - rows)
                        return  # even shards: the rest of the file is cut (not read)
                    rows += num_rows(table)
                    yield table
                self._check_count(name, rows, whole)
                if hasattr(raw, "complete"):  # read whole and checked: a cache may keep it
                    raw.complete()
        except FileNotFoundError:
            raise FileNotFoundError(f"{name}: named for reading but it does not exist; the data "
                                    f"set is incomplete (deleted or moved files?)") from None
        except CorruptRecordError as e:
            if not gz:
                raise
            with loc.open_stream() as again:
                raise (first_damage(again, "gzip", name) or e) from None
