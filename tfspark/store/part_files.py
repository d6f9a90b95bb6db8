"""One Spark task's output files: Arrow batches in, framed records out, bounded memory.

Each task attempt writes files whose names carry the write id and the attempt id, so retried
and speculative attempts never collide; the driver's commit names the files that count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tfspark.arrow.encode import BatchEncoder
from tfspark.arrow.values import bytes_buffers
from tfspark.errors import EncodeError
from tfspark.store import partitions
from tfspark.store.fs import Location
from tfspark.store.uploads import Uploads
from tfspark.wire.compression import file_suffix
from tfspark.wire.stream import RecordWriter
from tfspark.wire.tfrecord import OVERHEAD, frame_buffer


@dataclass
class _Open:
    rel: str
    stream: Any
    writer: RecordWriter
    split: str | None
    partition: dict[str, Any]
    raw: int = 0  # framed bytes handed to the writer (before gzip)
    rows: int = 0  # rows in its records (= records, but in the block layout)

    def room(self, limit: int) -> float:
        """Framed bytes that still fit under `limit` bytes on disk (gzip: at the ratio the
        file has shown so far)."""
        ratio = self.writer.bytes_written / self.raw if self.raw and \
            self.writer.bytes_written else 1.0
        return (limit - self.writer.bytes_written) / max(ratio, 1e-3)


@dataclass
class TaskFiles:
    """The part files of one write task attempt: one open file per (split, partition) group,
    rolled over at max_records rows or about max_bytes bytes on disk (never inside a record: a
    file holds at least one); names carry the task attempt and write id.

    Block layout (rows_per_record N > 1): rows wait per group until N are there, so every
    block is full but the last of a file (at a roll-over or the task's end).
    """

    loc: Location
    write_id: str
    task: str  # "<partition id>-<task attempt id>"
    compression: str | None
    gzip_level: int
    record_type: str
    max_records: int | None
    encoder: BatchEncoder | None
    max_bytes: int | None = None
    rows_per_record: int = 1
    done: list[dict[str, Any]] = field(default_factory=list)
    _open: dict[tuple, _Open] = field(default_factory=dict)
    _waiting: dict[tuple, tuple[list[pa.RecordBatch], list[np.ndarray]]] = \
        field(default_factory=dict)
    _seq: int = 0
    _uploads: Uploads | None = None  # made with the first file (a task may write none)

    def write_group(self, split: str | None, partition: dict[str, Any],
                    batch: pa.RecordBatch, row_numbers: np.ndarray | None = None) -> None:
        """Append one group's rows (all of one split and partition) to its current file.
        row_numbers: the rows' numbers in the task (what an error names)."""
        key = (split, tuple(partition.items()))
        if self.rows_per_record == 1:
            buf, offsets = self._frame(batch, row_numbers)
            self._put(key, split, partition, buf, offsets, None)
            return
        numbers = row_numbers if row_numbers is not None else np.arange(batch.num_rows)
        batches, nums = self._waiting.setdefault(key, ([], []))
        batches.append(batch)
        nums.append(numbers)
        if sum(b.num_rows for b in batches) >= self.rows_per_record:
            self._blocks(key, split, partition, last=False)

    def _blocks(self, key: tuple, split: str | None, partition: dict[str, Any],
                last: bool) -> None:
        """Write the group's waiting rows as blocks: whole blocks only, unless `last`."""
        batches, nums = self._waiting.pop(key)
        table = pa.Table.from_batches(batches).combine_chunks()
        rows = table.to_batches()[0] if table.num_rows else None
        numbers = np.concatenate(nums)
        n, size, start = len(numbers), self.rows_per_record, 0
        while rows is not None and start < n:
            take = n - start if last else (n - start) // size * size
            f = self._open.get(key)
            if self.max_records is not None:  # a short block ends a full file
                take = min(take, self.max_records - (f.rows if f else 0))
            if take <= 0:
                break
            buf, offsets = self._frame(rows.slice(start, take), numbers[start:start + take])
            counts = np.full(len(offsets) - 1, size, np.int64)
            counts[-1] = take - size * (len(counts) - 1)
            self._put(key, split, partition, buf, offsets, counts)
            start += take
            if take % size and key in self._open:  # a short block is its file's last
                self._close(key)
        if rows is not None and start < n:
            self._waiting[key] = ([rows.slice(start)], [numbers[start:]])

    def _put(self, key: tuple, split: str | None, partition: dict[str, Any], buf: np.ndarray,
             offsets: np.ndarray, counts: np.ndarray | None) -> None:
        """Write framed records to the group's files, rolling over by rows and bytes; counts:
        rows per record (None: one each)."""
        n = len(offsets) - 1
        cum = np.arange(n + 1, dtype=np.int64) if counts is None else \
            np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        start = 0
        while start < n:
            f = self._open.get(key) or self._new_file(key, split, partition)
            room = n - start
            if self.max_records is not None:
                fits = int(np.searchsorted(cum, cum[start] + self.max_records - f.rows,
                                           side="right")) - 1 - start
                room = min(room, max(fits, 0 if f.rows else 1))
            if self.max_bytes is not None:
                fits = int(np.searchsorted(offsets, offsets[start] + f.room(self.max_bytes),
                                           side="right")) - 1 - start
                room = min(room, max(fits, 0 if f.writer.records else 1))
            end = start + room
            if room:
                f.writer.write_framed(buf[offsets[start]:offsets[end]], count=room)
                f.raw += int(offsets[end] - offsets[start])
                f.rows += int(cum[end] - cum[start])
            start = end
            full_bytes = self.max_bytes is not None and (room == 0 or f.room(self.max_bytes) <= 0)
            if full_bytes or room == 0 or (self.max_records is not None and
                                           f.rows >= self.max_records):
                self._close(key)

    def _frame(self, batch: pa.RecordBatch,
               row_numbers: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        where = f"Spark partition {int(self.task.split('-')[0])}"
        if self.encoder is not None:
            return self.encoder.encode(batch, framed=True, row_numbers=row_numbers, where=where)
        col = batch.column(0)
        if col.null_count:
            row = int(np.argmin(col.is_valid().to_numpy(zero_copy_only=False)))
            row = int(row_numbers[row]) if row_numbers is not None else row
            raise EncodeError(f"recordType ByteArray: column {batch.schema.names[0]!r} is null "
                              f"at row {row} (of {where}); filter out null records")
        data, offs = bytes_buffers(col)
        base = offs - offs[0]
        framed = frame_buffer(data[offs[0]:offs[-1]], base)
        return framed, base + OVERHEAD * np.arange(len(base), dtype=np.int64)

    def _new_file(self, key: tuple, split: str | None, partition: dict[str, Any]) -> _Open:
        folder = partitions.directory(split, partition)
        name = (f"part-{self.task}-{self.write_id}-{self._seq:04d}"
                f"{file_suffix(self.compression)}")
        self._seq += 1
        rel = f"{folder}/{name}" if folder else name
        if self._uploads is None:
            self._uploads = Uploads(self.loc)
        stream = self._uploads.open(rel)
        writer = RecordWriter(stream, compression=self.compression, gzip_level=self.gzip_level)
        opened = _Open(rel, stream, writer, split, partition)
        self._open[key] = opened
        return opened

    def _close(self, key: tuple) -> None:
        f = self._open[key]  # (kept there until its close is under way: discard closes it)
        f.writer.close()  # its last bytes (gzip's end) written; the upload ends meanwhile
        assert self._uploads is not None
        self._uploads.close(f.stream)
        del self._open[key]
        self._entry(f)

    def _entry(self, f: _Open) -> None:
        self.done.append({"path": f.rel, "records": f.writer.records,
                          "bytes": f.writer.bytes_written, "split": f.split,
                          "partition": {k: None if v is None else partitions.value_text(v)
                                        for k, v in f.partition.items()},  # JSON: text
                          "write_id": self.write_id,
                          **({"rows": f.rows} if self.rows_per_record > 1 else {})})

    def close(self) -> list[dict[str, Any]]:
        """Write the rows still waiting (short blocks), close every open file; returns the
        manifest entries of all files written."""
        for key in list(self._waiting):
            split, part = key[0], dict(key[1])
            self._blocks(key, split, part, last=True)
        for key in list(self._open):  # (one per partition value: their uploads at once)
            self._close(key)
        if self._uploads is not None:
            self._uploads.finish()  # every file whole on the store, or the first error
        return self.done

    def discard(self) -> None:
        """Remove everything this attempt wrote (on failure; the driver also sweeps)."""
        if self._uploads is not None:  # every request ended: nothing is written after this
            self._uploads.abandon([f.stream for f in self._open.values()])
        self.loc.delete_files([f.rel for f in self._open.values()] +
                          [d["path"] for d in self.done])
        self._open.clear()
        self._waiting.clear()
        self.done.clear()


def batches_by_group(batches: Iterator[pa.RecordBatch], split_col: str | None,
                     part_cols: list[str], keep: list[str]
                     ) -> Iterator[tuple[str | None, dict[str, Any], pa.RecordBatch, np.ndarray]]:
    """(split, {partition column: value}, rows, their numbers in the task) for each group of
    rows of each batch, with only the `keep` columns.
    """
    cols = ([split_col] if split_col else []) + part_cols
    seen = 0
    for batch in batches:
        for key, rows, indices in partitions.group_rows(batch, cols):
            split = key[0] if split_col else None
            values = key[1:] if split_col else key
            yield split, dict(zip(part_cols, values)), rows.select(keep), seen + indices
        seen += batch.num_rows



COPY_GROUP_BYTES = 64 * 2**20  # a row group of the parquet copy: about this much Arrow data


@dataclass
class ParquetCopy:
    """A task attempt's rows as one parquet file of the data set's parquet copy, written from
    the batches the task encodes (write_tfrecords' one pass: the copy and the TFRecords of an
    attempt hold the same rows by construction). Named as a part file of Spark's own: the
    task's partition, the write's id and the attempt (`file_name`), so a retried or
    speculative attempt never overwrites another's file and the driver publishes only the
    files of the attempts Spark counted. Opened with the first batch (a task without rows
    writes no file); row groups of about COPY_GROUP_BYTES, as Spark's writer makes them large.
    """

    loc: Location
    name: str
    drop: tuple[str, ...] = ()  # columns that are not the DataFrame's (the split column)
    rows: int = 0
    _pending: list[pa.RecordBatch] = field(default_factory=list)
    _pending_bytes: int = 0
    _out: Any = None
    _writer: Any = None

    @staticmethod
    def file_name(partition: str, write_id: str, attempt: str) -> str:
        """part-<partition>-<write id>-<attempt>.parquet"""
        return f"part-{partition}-{write_id}-{attempt}.parquet"

    def write(self, batch: pa.RecordBatch) -> None:
        """Add a batch's rows (the dropped columns left out)."""
        if self.drop:
            batch = batch.select([n for n in batch.schema.names if n not in self.drop])
        if self._writer is None:  # the file is there from the first row (a kill leaves it)
            self._out = self.loc.open_output(self.name, bulk=True)
            self._writer = parquet_writer(self._out, batch.schema)
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._pending_bytes >= COPY_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending)
        self._writer.write_table(table, row_group_size=table.num_rows)
        self._pending, self._pending_bytes = [], 0

    def close(self) -> str | None:
        """Finish the file; its name, or None when the task had no rows."""
        self._flush()
        if self._writer is None:
            return None
        self._writer.close()
        self._out.close()
        self._writer = None
        return self.name

    def discard(self) -> None:
        """After a failure: the file closed and removed (as far as it got)."""
        opened = self._writer is not None or self._out is not None
        for thing in (self._writer, self._out):
            try:
                if thing is not None:
                    thing.close()
            except Exception:  # noqa: BLE001, S110 - it is being removed
                pass
        self._writer = self._out = None
        if opened:
            try:
                self.loc.delete_files([self.name])
            except Exception:  # noqa: BLE001, S110 - the write's sweep removes it later
                pass


def parquet_writer(out: Any, schema: pa.Schema) -> Any:
    """A pyarrow ParquetWriter of one file of a parquet copy, on the output stream `out`: snappy
    (Spark's default codec), dictionaries where values repeat (_dictionary_columns) and longs
    as bit-packed differences (_delta_columns). Every writer of a copy makes its files here."""
    import pyarrow.parquet as pq

    return pq.ParquetWriter(out, schema, compression="snappy",
                            use_dictionary=_dictionary_columns(schema),
                            column_encoding=_delta_columns(schema))


def _leaves(field: pa.Field, prefix: str = "") -> list[tuple[str, pa.DataType]]:
    """(path, type) of each parquet leaf column of a field, as pyarrow's writer names them."""
    t, name = field.type, prefix + field.name
    if pa.types.is_struct(t):
        return [x for i in range(t.num_fields) for x in _leaves(t.field(i), name + ".")]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaves(t.value_field.with_name("element"), name + ".list.")
    if pa.types.is_map(t):
        return _leaves(t.key_field, name + ".key_value.") + \
            _leaves(t.item_field, name + ".key_value.")
    return [(name, t)]


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    """The parquet columns worth a dictionary: strings, binary, booleans, integers up to 32
    bits and dates, at any depth (their leaf paths, as pyarrow names them). Doubles, longs and
    timestamps are rarely repeated: trying a dictionary on them cost pyarrow's writer about a
    third of its time before it gave up."""
    small = (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
             pa.types.is_large_binary, pa.types.is_boolean, pa.types.is_int8,
             pa.types.is_int16, pa.types.is_int32, pa.types.is_uint8, pa.types.is_uint16,
             pa.types.is_uint32, pa.types.is_date32, pa.types.is_dictionary)
    return [name for f in schema for name, t in _leaves(f) if any(k(t) for k in small)]


def _delta_columns(schema: pa.Schema) -> dict[str, str]:
    """The 64-bit integer columns, written DELTA_BINARY_PACKED (Parquet's encoding of integers
    as bit-packed differences, which Spark 3.3 and later, pyarrow, DuckDB, Polars and Trino
    read) rather than PLAIN: on random longs of +-1e6 it halved pyarrow's writing time (snappy
    had 8 bytes a value to compress) and the bytes, and pyarrow read them back faster too;
    ids and counters shrink to almost nothing."""
    return {name: "DELTA_BINARY_PACKED" for f in schema for name, t in _leaves(f)
            if pa.types.is_int64(t) or pa.types.is_uint64(t)}
