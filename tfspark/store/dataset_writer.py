"""write_dataset(): a data set written from Arrow data in this process, without Spark.

The same data set write_tfrecords writes (TFRecords, manifest, statistics, splits, partitions,
both layouts, the parquet copy), from a pyarrow Table, RecordBatch, RecordBatchReader or
dataset, a pandas DataFrame, or anything that hands Arrow over (`__arrow_c_stream__`: Polars,
DuckDB). Its settings are write_tfrecords' (WriteOptions), checked the same way, and the write
follows the same protocol (tfspark.store.write): it commits whole against the version of the
path it began from, sweeps what killed writes left, and leaves nothing of its own behind when it
fails.

Stages: the rows are staged as the parquet copy while the facts the spec needs are gathered
(rows, nulls, the lengths of arrays: FixedLen([n]) where every row has n values); then the
TFRecords are written from the staged rows, so both hold the same rows even when the input is a
stream that cannot be read twice; the commit; then the copy is published.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfspark import progress
from tfspark.arrow.hashing import fnv, mix
from tfspark.arrow.values import bytes_buffers, column_of
from tfspark.errors import CountMismatchError, OptionError, TfsparkError, scrubbed
from tfspark.spec import FeatureSpec, infer_spec
from tfspark.spec.from_arrow import spark_schema
from tfspark.store import backup as copy
from tfspark.store import dali
from tfspark.store import manifest as mf
from tfspark.store.commit import StartedFrom, existing_manifest, last_write, new_write_id
from tfspark.store.fs import Location, locate
from tfspark.store.options import (
    WriteOptions,
    fill_doc,
    workflow_doc,
    workflow_signature,
    write_settings,
)
from tfspark.store.part_files import parquet_writer
from tfspark.store.placement import check_placement
from tfspark.store.uris import error_line, redact
from tfspark.store.write import (
    DataSetWrite,
    PriorState,
    RowFacts,
    WriteResult,
    check_append,
    check_append_rows,
    label_nulls,
    refuse_label_partitions,
    replaced_writes,
    undo_on_failure,
    write_result,
)

log = logging.getLogger("tfspark")
SPLIT_COLUMN = "__tfspark_split__"
_BATCH_ROWS = 10_000  # rows per batch read back from the staged copy
# Settings that need Spark: said in one line, with what to do instead.
_SPARK_ONLY = {
    "backup_table": "a table in Spark's catalog needs Spark (write_tfrecords); write_dataset "
                    "writes the parquet copy to backup_path (default <path>/_backup)",
    "stats_exact": "exact statistics come from Spark's jobs (write_tfrecords); write_dataset "
                   "gathers the statistics while it encodes the rows, as write_tfrecords does "
                   "by default",
}
_PARTITION_TYPES = ("string", "integer", "boolean", "date")


@scrubbed
def write_dataset(data: Any, path: str, filesystem: Any = None, **settings: Any) -> WriteResult:
    """Write Arrow data as a data set without Spark, as write_tfrecords writes a DataFrame.

    The same files: TFRecords of tf.train.Example with their manifest and statistics, and the
    parquet copy. Columns map to features as the same columns of a Spark DataFrame do
    (infer_spec reads Arrow types as Spark's: int32 -> int, timestamps with a zone ->
    timestamp, a fixed-size list -> FixedLen([n]), dictionaries as their values), so
    spark.read.format("tfrecord") gives the Spark types back. The settings are write_tfrecords'
    table; what needs Spark is refused in one line. split: rows are assigned by a hash of
    `split_key` (the same key, the same split, in every write) or by a draw seeded by `seed`.
    shuffle: the rows are permuted before they are encoded (they are then all held in memory).

    Args:
        data: a pyarrow Table, RecordBatch, RecordBatchReader or dataset (pyarrow.dataset), a
            pandas DataFrame, or any object that exports an Arrow stream
            (`__arrow_c_stream__`: a Polars DataFrame, a DuckDB relation). A stream is read
            once.
        path: the data set's directory: a local path or a URI (s3://, gs://, abfs://, ...).
        filesystem: where `path` (and backup_path) are: a pyarrow.fs.FileSystem or an fsspec
            filesystem. Default: from the path (local, or a URI with pyarrow's query options).
{settings}

    Returns:
        A WriteResult: rows, files and bytes, per split too.

    Raises:
        OptionError: bad settings, or an existing path under errorifexists (TypeError: an
            unknown keyword).
        SchemaError: columns that cannot be stored.
        EncodeError: a value that cannot be stored (naming its column and row).
        WriteConflictError: another write committed to the path while this one ran.

    Examples:
        >>> import pandas as pd, tfspark
        >>> orders = pd.DataFrame({"price": [9.5, 3.0, 7.25], "label": [1, 0, 1]})
        >>> result = tfspark.write_dataset(orders, "orders", label_cols="label")
        >>> result.rows, tfspark.read_manifest("orders").spec.names
        (3, ['label', 'price'])
    """
    for name, why in _SPARK_ONLY.items():
        if settings.get(name):
            raise OptionError(f"{name}: {why}")
    opts = WriteOptions.from_arguments(path, in_filesystem=filesystem is not None,
                                       **{**_DEFAULTS, **settings})
    source = Source.of(data)
    return _write(source, opts, filesystem)


_DEFAULTS = {t.name: t.default for t in write_settings() if t.workflow}
fill_doc(write_dataset, "{settings}", workflow_doc())
write_dataset.__signature__ = workflow_signature(  # type: ignore[attr-defined]
    [inspect.Parameter("data", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("path", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("filesystem", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)])


# ---------------------------------------------------------------- the input

@dataclass
class Source:
    """The input as Arrow: its schema (as written: dictionaries decoded, views and
    fixed-size binaries as plain ones) and its batches, read once."""

    schema: pa.Schema
    batches: Iterator[pa.RecordBatch]

    @classmethod
    def of(cls, data: Any) -> Source:
        """The Source of what write_dataset takes; OptionError names what it does not."""
        kind = type(data).__module__.split(".")[0] + "." + type(data).__name__
        if isinstance(data, pa.RecordBatch):
            return cls.of(pa.Table.from_batches([data]))
        if isinstance(data, pa.Table):
            reader: Any = data.to_reader(max_chunksize=_BATCH_ROWS)
        elif isinstance(data, pa.RecordBatchReader):
            reader = data
        elif type(data).__module__.startswith("pyarrow._dataset") or \
                type(data).__module__.startswith("pyarrow.dataset"):
            reader = data.scanner(batch_size=_BATCH_ROWS).to_reader()
        elif type(data).__module__.startswith("pandas") and hasattr(data, "columns"):
            reader = pa.Table.from_pandas(data).to_reader(max_chunksize=_BATCH_ROWS)
        elif hasattr(data, "__arrow_c_stream__"):
            reader = pa.RecordBatchReader.from_stream(data)
        else:
            raise OptionError(
                f"write_dataset takes a pyarrow Table, RecordBatch, RecordBatchReader or "
                f"dataset, a pandas DataFrame, or an object with __arrow_c_stream__ (Polars, "
                f"DuckDB), got {kind}"
                + ("; for a Spark DataFrame use tfspark.write_tfrecords"
                   if kind.startswith("pyspark") else ""))
        target = pa.schema([f.with_type(_stored_type(f.type)) for f in reader.schema],
                           metadata=reader.schema.metadata)
        if target.equals(reader.schema):
            return cls(target, iter(reader))
        return cls(target, (pa.RecordBatch.from_arrays(
            [b.column(i).cast(target.field(i).type) for i in range(b.num_columns)],
            schema=target) for b in reader))


def _stored_type(t: pa.DataType) -> pa.DataType:
    """The type a column is staged and encoded as (the encoders take these)."""
    if pa.types.is_dictionary(t):
        return _stored_type(t.value_type)
    if pa.types.is_fixed_size_binary(t) or getattr(pa.types, "is_binary_view", bool)(t):
        return pa.binary()
    if getattr(pa.types, "is_string_view", bool)(t):
        return pa.string()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_stored_type(f.type)) for f in t])
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_stored_type(t.value_type)), t.list_size)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or \
            getattr(pa.types, "is_list_view", bool)(t) or \
            getattr(pa.types, "is_large_list_view", bool)(t):
        inner = t.value_field.with_type(_stored_type(t.value_type))
        return pa.large_list(inner) if pa.types.is_large_list(t) else pa.list_(inner)
    return t


# ---------------------------------------------------------------- facts of the rows

@dataclass
class Facts:
    """What the staged rows say that the spec and the manifest need: rows, nulls per feature,
    and the shortest and longest row of each array feature."""

    rows: int = 0
    nulls: dict[str, int] = field(default_factory=dict)
    shortest: dict[str, int] = field(default_factory=dict)
    longest: dict[str, int] = field(default_factory=dict)

    def add(self, batch: pa.RecordBatch, spec: FeatureSpec) -> None:
        """The facts of one more batch."""
        self.rows += batch.num_rows
        for f in spec.features:
            col = column_of(batch, f.path)
            self.nulls[f.name] = self.nulls.get(f.name, 0) + col.null_count
            if (f.kind == "varlen" or f.shape) and col.null_count < len(col):
                lengths = pc.min_max(pc.list_value_length(col))
                lo, hi = lengths["min"].as_py(), lengths["max"].as_py()
                self.shortest[f.name] = min(lo, self.shortest.get(f.name, lo))
                self.longest[f.name] = max(hi, self.longest.get(f.name, hi))

    def shapes(self) -> dict[str, list[int]]:
        """{feature: [n]} of the array features whose every row has n > 0 values."""
        return {name: [lo] for name, lo in self.shortest.items()
                if lo > 0 and self.longest[name] == lo}

    def row_facts(self) -> RowFacts:
        """The facts as an append's check of the rows reads them."""
        return RowFacts(self.rows, dict(self.nulls), self.shapes())


# ---------------------------------------------------------------- splits

def split_of(batch: pa.RecordBatch, splits: dict[str, float], key: str | None, seed: int,
             draws: np.random.Generator) -> pa.Array:
    """Each row's split: by a hash of its `key` value in [0, 1) (the same value, the same
    split), else by a draw from `draws`; bounds as write_tfrecords sets them."""
    names = [n for n in splits if splits[n] > 0]
    if key is not None:
        u = _unit_hash(batch.column(key), seed)
    else:
        u = draws.random(batch.num_rows)
    bounds = np.cumsum([splits[n] for n in names[:-1]])
    which = np.searchsorted(bounds, u, side="right")
    return pa.DictionaryArray.from_arrays(pa.array(which.astype(np.int32)),
                                          pa.array(names)).dictionary_decode()


def _unit_hash(col: pa.Array, seed: int) -> np.ndarray:
    """A hash of each value in [0, 1), stable across processes and runs; nulls hash alike."""
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_binary(t) or pa.types.is_decimal(t):
        blob = (col.cast(pa.string()) if pa.types.is_decimal(t) else col).cast(
            pa.large_binary())
        h = fnv(*bytes_buffers(pc.fill_null(blob, b"")))
    elif pa.types.is_floating(t):
        h = pc.fill_null(col.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False) \
            .view(np.uint64).copy()
    elif pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_temporal(t):
        ints = col.cast(pa.int64()) if not pa.types.is_temporal(t) else \
            col.view(pa.int32() if pa.types.is_date32(t) else pa.int64()).cast(pa.int64())
        h = pc.fill_null(ints, 0).to_numpy(zero_copy_only=False).view(np.uint64).copy()
    else:
        raise OptionError(f"split_key column {col!r} has type {t}; use a column of numbers, "
                          f"strings, binaries or dates")
    return (mix(h ^ np.uint64(seed & (2**64 - 1))) >> np.uint64(11)) * (1.0 / 2**53)


# ---------------------------------------------------------------- the write

def _check_columns(schema: pa.Schema, opts: WriteOptions) -> list[str]:
    """The data columns (not partition columns); OptionError for duplicate names, and for
    partition, split and label columns that are not there or cannot be what they are for."""
    names = schema.names
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise OptionError(f"column {name!r} appears twice; give each column its own name")
        seen.add(name)
    if SPLIT_COLUMN in names:
        raise OptionError(f"column {SPLIT_COLUMN!r} is tfspark's own (the split of each row); "
                          f"rename it")
    refuse_label_partitions(opts.partition_by, opts.label_cols, "partition_by", "label_cols")
    types = {f.name: f.dataType.typeName() for f in spark_schema(schema).fields} \
        if opts.partition_by else {}
    for col in opts.partition_by:
        if col not in names:
            raise OptionError(f"partition_by column {col!r} is not in the data; columns are "
                              f"{names}")
        kind = {"byte": "integer", "short": "integer", "long": "integer"}.get(types[col],
                                                                             types[col])
        if kind not in _PARTITION_TYPES:
            raise OptionError(f"cannot partition by column {col!r} of type "
                              f"{schema.field(col).type}; use a string, integer, boolean or "
                              f"date column")
    if opts.split_key is not None and opts.split_key not in names:
        raise OptionError(f"split_key column {opts.split_key!r} is not in the data; columns "
                          f"are {names}")
    return [n for n in names if n not in opts.partition_by]


def _spec(schema: pa.Schema, data_cols: list[str], opts: WriteOptions,
          shapes: dict[str, list[int]] | None = None) -> FeatureSpec:
    data = pa.schema([schema.field(n) for n in data_cols])
    if opts.spec:
        raise OptionError("spec= is the data source's option; write_dataset infers the spec "
                          "from the data (label_cols=, shapes= and defaults= adjust it)")
    return infer_spec(data, label_cols=opts.label_cols,
                      shapes={**(shapes or {}), **dict(opts.shapes or {})},
                      defaults=opts.defaults, decimal_as=opts.decimal_as,
                      record_type=opts.record_type)


def _write(source: Source, opts: WriteOptions, filesystem: Any) -> WriteResult:
    if opts.record_type == "ByteArray":
        raise OptionError("record_type 'ByteArray' is the data source's (one binary column "
                          "written raw); write_dataset writes Example or SequenceExample records")
    data_cols = _check_columns(source.schema, opts)
    base_spec = _spec(source.schema, data_cols, opts)
    mode = str(opts.mode)
    loc = locate(opts.path, filesystem)
    target = loc.resolve(opts.backup_path) if opts.backup_path else loc.child("_backup")
    check_placement(loc, mode)
    copy.check_backup_path(opts.backup_path, loc, target)
    if mode in ("errorifexists", "ignore") and not loc.is_empty():
        if mode == "errorifexists":
            raise OptionError(f"output path {loc.uri!r} already exists; use mode='overwrite' "
                              f"to replace it, mode='append' to add to it, or another path")
        for _ in source.batches:  # (read, as a skipped Spark write reads its rows)
            pass
        return WriteResult(loc.uri, None, 0, 0, 0, skipped=True)
    before = PriorState.take(loc)
    write_id = new_write_id()
    started = time.perf_counter()
    with undo_on_failure(loc, write_id, before):
        loc.check_writable()
        old = existing_manifest(loc, mode)
        if copy.roll_forward(loc, old):  # a committed write's copy that a kill left staged
            old = existing_manifest(loc, mode)
        started_from = StartedFrom(last_write(old))
        previous = old if mode == "append" else None
        if previous is not None:
            check_append(opts, previous, base_spec)
        created = before is None or not before.existed
        copy.sweep_dead(target)
        staging = target.child(copy.staging_name(write_id))
        target_existed = target.exists()
        try:
            with progress.stage("backup", f"parquet, to {redact(target.uri)}") as done:
                staged, facts = _stage(source, base_spec, staging, opts, write_id)
                done.rows, done.detail = facts.rows, progress.many(len(staged), "file")
            copied = time.perf_counter()
            if previous is not None and previous.spec is not None:
                check_append_rows(redact(opts.path), previous.spec, facts.row_facts())
            spec = _spec(source.schema, data_cols, opts,
                         facts.shapes() if opts.detect_fixed_lengths else None)
            if previous is not None:
                spec = check_append(opts, previous, spec) or spec
            entry = copy.path_entry(target, staging, staged, mode=_publish_mode(mode),
                                    write_rows=facts.rows,
                                    rows_before=lambda: _rows_of(target), previous=previous)
            manifest = _encode_and_commit(
                source.schema, staging, staged, opts=opts, spec=spec, facts=facts, entry=entry,
                previous=previous, mode=mode, loc=loc, write_id=write_id,
                started_from=started_from, replaces=replaced_writes(loc, mode, old, created))
        except BaseException:
            _discard_unless_committed(loc, staging, target, target_existed)
            raise
        encoded = time.perf_counter()
        try:
            copy.publish(loc, write_id)
        except Exception as e:  # the TFRecords are committed: say so, so no one writes twice
            raise TfsparkError(
                f"write_dataset committed this write's {facts.rows:,} rows to {loc.uri!r}, "
                f"but moving its parquet copy into place failed ({error_line(e)}); the rows are in "
                f"the data set, do not write them again: the next write to this path (any "
                f"mode) finishes the move first") from e
        result = write_result(loc.uri, spec, manifest, write_id=write_id, backup=target.uri,
                              source_rows=facts.rows, backup_rows=facts.rows,
                              compression=opts.compression)
    result = replace(result, seconds={"backup": round(copied - started, 2),
                                      "tfrecords": round(encoded - copied, 2)})
    if opts.dali_index:
        result = replace(result, dali_indexes=dali.after_write(loc, facts.rows, "write_dataset"))
    log.info("%s", result.summary())
    for line in label_nulls(spec, facts.nulls, facts.rows, opts.defaults):
        log.warning("%s", line)
    return result


def _publish_mode(mode: str) -> str:
    return "append" if mode == "append" else "overwrite"


def _rows_of(target: Location) -> int:
    """The rows of the parquet files in a backup directory, from their footers."""
    import pyarrow.parquet as pq

    rows = 0
    for rel in copy.data_files(target):
        with target.open_input(rel) as f:
            rows += pq.ParquetFile(f).metadata.num_rows
    return rows


def _stage(source: Source, spec: FeatureSpec, staging: Location, opts: WriteOptions,
           write_id: str) -> tuple[list[str], Facts]:
    """Write the rows as parquet files under `staging`, rolled at about the target file size
    (in memory), gathering their facts; returns the files (relative to `staging`)."""
    facts = Facts()
    files: list[str] = []
    writer: Any = None
    out: Any = None
    held = 0
    try:
        for batch in source.batches:
            if not batch.num_rows:
                continue
            facts.add(batch, spec)
            if writer is None:
                name = f"part-{len(files):05d}-{write_id}.parquet"
                out = staging.open_output(name)
                writer = parquet_writer(out, source.schema)
                files.append(name)
            writer.write_batch(batch)
            held += batch.nbytes
            if held >= opts.target_file_bytes:
                writer.close()
                out.close()
                writer, out, held = None, None, 0
    finally:
        if writer is not None:
            writer.close()
        if out is not None:
            out.close()
    return files, facts


def _staged_batches(schema: pa.Schema, staging: Location, files: list[str],
                    opts: WriteOptions) -> Iterator[pa.RecordBatch]:
    """The staged rows again, in order (shuffle: all of them, permuted), each batch with its
    rows' split when there are splits."""
    import pyarrow.parquet as pq

    def read() -> Iterator[pa.RecordBatch]:
        for name in files:
            with staging.open_input(name) as f:
                for b in pq.ParquetFile(f).iter_batches(batch_size=_BATCH_ROWS):
                    yield b.cast(schema) if not b.schema.equals(schema) else b

    batches: Iterator[pa.RecordBatch] = read()
    if opts.shuffle:
        table = pa.Table.from_batches(list(batches), schema)
        order = np.random.default_rng([opts.seed, 1]).permutation(table.num_rows)
        batches = iter(table.take(order).to_batches(max_chunksize=_BATCH_ROWS))
    splits = dict(opts.split or {})
    draws = np.random.default_rng([opts.seed, 2])
    for b in batches:
        if splits:
            b = b.append_column(SPLIT_COLUMN, split_of(b, splits, opts.split_key, opts.seed,
                                                       draws))
        yield b


def _encode_and_commit(schema: pa.Schema, staging: Location, staged: list[str], *,
                       opts: WriteOptions, spec: FeatureSpec, facts: Facts,
                       entry: mf.BackupEntry, previous: mf.Manifest | None, mode: str,
                       loc: Location, write_id: str, started_from: StartedFrom,
                       replaces: list[str]) -> mf.Manifest:
    """The TFRecords of the staged rows, in one task of this process, then the commit."""
    keep = [n for n in schema.names if n not in opts.partition_by]
    written = spark_schema(schema).jsonValue()
    stats = {"rows": {"source": facts.rows, "backup": facts.rows},
             "null_counts": {f.name: facts.nulls.get(f.name, 0) for f in spec.features},
             "backup": entry.target, "backup_files": len(staged)}
    if opts.stats and previous is not None:  # an append: its statistics are of its own rows
        stats["features_scope"] = "last write"
    write = DataSetWrite(
        uri=opts.path, home=loc, mode="errorifexists" if mode == "ignore" else mode, skip=False,
        write_id=write_id, base_write=started_from.write_id, spec=spec,
        opts=replace(opts, task_stats=opts.stats, max_bytes_per_file=opts.target_file_bytes),
        keep=keep, schema=written, created=False, replaces=replaces,
        split_column=SPLIT_COLUMN if opts.split else None,
        splits=list(opts.split or ()), manifest_stats=stats, backup_entry=entry)
    what = f"the feature statistics{' and splits' if opts.split else ''}" if opts.stats else ""
    try:
        with progress.stage("TFRecords", what) as done:
            report = write.write_task(_staged_batches(schema, staging, staged, opts), "00000-0")
            rows = sum(f.get("rows") or f["records"] for f in report.files)
            done.rows = rows
            done.detail = (f"{progress.many(len(report.files), 'file')}, "
                           f"{sum(f['bytes'] for f in report.files) / 2**20:,.1f} MiB")
        if rows != facts.rows:
            raise CountMismatchError(f"the TFRecords hold {rows} rows but {facts.rows} were "
                                     f"staged; nothing was committed: run the write again")
    except BaseException:
        write.abort_write()
        raise
    with progress.stage("commit"):
        manifest = write.commit_manifest([report])
    assert manifest is not None
    return manifest


def _discard_unless_committed(loc: Location, staging: Location, target: Location,
                              existed: bool) -> None:
    """After a failure: drop the staging, unless the manifest committed it (a failure after
    the commit): then it is published instead, now or by the next write."""
    try:
        manifest = mf.find_manifest(loc)
        if manifest is not None:
            pending = manifest.backup.pending if manifest.backup else None
            if pending is not None and pending.staging == staging.uri:
                return
        staging.delete_all()
        if not existed:  # unless another write's staging is in it meanwhile
            target.remove_if_empty()
    except Exception as e:  # noqa: BLE001 - report the write's own error
        log.warning("tfspark: could not remove the staged parquet copy %s: %s", staging.uri,
                    error_line(e))
