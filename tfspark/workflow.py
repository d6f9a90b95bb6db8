"""write_tfrecords(): DataFrame -> parquet backup -> TFRecords + manifest, with one row count
checked at every step.

The backup is written first and the TFRecords are written from the files of that backup, so
both copies hold the same rows even when the DataFrame is not deterministic. Facts the spec
needs (fixed array lengths, vector sizes, null counts, row count) are observed during the
backup write itself, not in a second pass.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import posixpath
import re
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow.fs as pafs
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from tfspark import errors, observe
from tfspark import manifest as mf
from tfspark.datasource import _PARTITION_TYPES, WriteConflictError, register
from tfspark.encode import NULL_ELEMENT_POLICIES, BatchEncoder
from tfspark.errors import OptionError, TfsparkError
from tfspark.framing import normalize_compression
from tfspark.fs import locate
from tfspark.options import WRITE_MODES
from tfspark.spec import FeatureSpec, infer_spec

log = logging.getLogger("tfspark")
SPLIT_COLUMN = "__tfspark_split__"
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_SAMPLE_ROWS = 2000
_SAMPLE_BYTES = 64 * 2**20  # at most this much sample data pulled into the driver
_BATCH_BYTES = 64 * 2**20  # aim for parquet and Arrow batches of at most this size


class CountMismatchError(TfsparkError, RuntimeError):
    """Source, backup and TFRecord row counts disagree."""


@dataclass(frozen=True)
class WriteResult:
    """What write_tfrecords did: path, spec, rows, files and bytes written, rows per split, the
    backup and the row counts of source and backup, timings; skipped for mode='ignore'.
    """

    path: str
    spec: FeatureSpec | None
    rows: int
    files: int
    bytes: int
    splits: dict[str, dict[str, int]] = field(default_factory=dict)
    backup: str = ""
    source_rows: int = 0
    backup_rows: int = 0
    compression: str | None = None
    skipped: bool = False
    seconds: dict[str, float] = field(default_factory=dict)  # backup, tfrecords

    def summary(self) -> str:
        """A few lines for the terminal: counts (source = backup = tfrecords), splits, timings."""
        if self.skipped:
            return f"tfspark: {self.path} exists; mode 'ignore' wrote nothing"
        lines = [f"tfspark wrote {self.rows:,} rows to {self.path} "
                 f"({self.files} files, {self.bytes / 2**20:,.1f} MiB, "
                 f"compression={self.compression or 'none'})",
                 f"  rows: source {self.source_rows:,} = backup {self.backup_rows:,} = "
                 f"tfrecords {self.rows:,}",
                 f"  backup: {self.backup}"]
        if self.seconds:
            lines.append("  time: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.seconds.items()))
        for name, s in self.splits.items():
            lines.append(f"  split {name}: {s['rows']:,} rows, {s['files']} files, "
                         f"{s['bytes'] / 2**20:,.1f} MiB")
        if self.spec is not None:
            labels = ", ".join(self.spec.label_names) or "none"
            lines.append(f"  features: {len(self.spec.features)} (labels: {labels}); spec in "
                         f"{mf.NAME}")
        return "\n".join(lines)


# A tfspark error raised in a Spark task or in the data source on the driver reaches the caller
# inside a Spark exception, as the line "tfspark.<module>.<Class>: <message>" of its text.
_WRAPPED_ERROR = re.compile(r"^tfspark\.[\w.]*?(\w+Error): (.+)$", re.MULTILINE)


def _unwrapped(e: BaseException) -> BaseException:
    """The tfspark error inside a Spark exception, as its own class; else `e` itself."""
    if isinstance(e, TfsparkError):
        return e
    found = _WRAPPED_ERROR.findall(str(e))
    classes = {c.__name__: c for c in (errors.SchemaError, errors.EncodeError, errors.OptionError,
                                       errors.CorruptRecordError, mf.ManifestError,
                                       WriteConflictError)}
    if not found or found[-1][0] not in classes:
        return e
    name, message = found[-1]
    return classes[name](message.strip())


@dataclass
class _Before:
    """A path as it was before write_tfrecords: its files and directories, and its manifest."""

    path: str
    existed: bool
    entries: set[str]
    manifest: bytes | None

    @classmethod
    def take(cls, path: Any, mode: str) -> _Before | None:
        """None when a failure must leave the path alone (overwrite of data) or it is unusable."""
        try:
            loc = locate(path)
            if not loc.exists():
                return cls(path, False, set(), None)
            if mode == "overwrite" and not loc.is_empty():
                return None
            infos = loc.fs.get_file_info(pafs.FileSelector(loc.base, recursive=True))
            manifest = loc.read_bytes(mf.NAME) if loc.exists(mf.NAME) else None
            return cls(path, True, {posixpath.relpath(i.path, loc.base) for i in infos},
                       manifest)
        except (OSError, ValueError):  # a file, a bad URI: the write itself will say so
            return None

    def put_back(self) -> None:
        """Remove what the failed write added (not after it committed a manifest to old data)."""
        loc = locate(self.path)
        if not self.existed:
            loc.delete_all()
            return
        if (loc.read_bytes(mf.NAME) if loc.exists(mf.NAME) else None) != self.manifest:
            return
        infos = loc.fs.get_file_info(pafs.FileSelector(loc.base, recursive=True))
        new = [i for i in infos if posixpath.relpath(i.path, loc.base) not in self.entries]
        for i in sorted(new, key=lambda i: i.path.count("/"), reverse=True):
            if i.type == pafs.FileType.File:
                loc.fs.delete_file(i.path)
            elif not loc.fs.get_file_info(pafs.FileSelector(i.path)):
                loc.fs.delete_dir(i.path)


def _undo_on_failure(fn: Callable[..., WriteResult]) -> Callable[..., WriteResult]:
    """A failed write_tfrecords leaves nothing half-written: the output path and a backup_path
    are put back as they were (new ones removed, files added to old ones removed; an overwrite
    of existing data is left as the failure left it), a new backup_table is dropped. A tfspark
    error raised in a Spark task is raised again as its own class."""

    @functools.wraps(fn)
    def write(df: DataFrame, path: str, **kw: Any) -> WriteResult:
        mode = str(kw.get("mode", "errorifexists")).lower()
        befores = [_Before.take(p, mode) for p in (path, kw.get("backup_path")) if p]
        table = kw.get("backup_table")
        spark = df.sparkSession
        new_table = isinstance(table, str) and bool(table) and not spark.catalog.tableExists(table)
        try:
            return fn(df, path, **kw)
        except BaseException as e:
            try:
                for b in befores:
                    if b is not None:
                        b.put_back()
                if new_table and isinstance(table, str) and spark.catalog.tableExists(table):
                    spark.sql(f"DROP TABLE IF EXISTS {table}")
            except Exception as cleanup:  # noqa: BLE001 - report the write's own error
                log.warning("tfspark: could not remove what the failed write left at %s: %s",
                            path, cleanup)
            err = _unwrapped(e)
            if err is e:
                raise
            raise err from e

    return write


@_undo_on_failure
def write_tfrecords(df: DataFrame, path: str, *, label_cols: Iterable[str] = (),
                    compression: str | None = None, gzip_level: int = 6,
                    mode: str = "errorifexists",
                    backup_table: str | None = None, backup_path: str | None = None,
                    split: Mapping[str, float] | None = None, split_key: str | None = None,
                    seed: int = 0, shuffle: bool = False, target_file_bytes: int = 128 * 2**20,
                    max_records_per_file: int | None = None, partition_by: Iterable[str] = (),
                    shapes: Mapping[str, Iterable[int]] | None = None,
                    defaults: Mapping[str, Any] | None = None,
                    null_elements: str = "error",
                    detect_fixed_lengths: bool = True) -> WriteResult:
    """Write `df` as a parquet backup, then as TFRecords of tf.train.Example with a manifest.

    mode: errorifexists | overwrite | append | ignore, applied to `path` and to the backup.
    gzip_level: 1..9 when compression="gzip"; 1 is ~2.7x faster and ~20% larger than 6.
    split: {"train": 0.8, ...}; rows are assigned by a hash of `split_key` (reproducible) or
    by a seeded random draw. detect_fixed_lengths: arrays and vectors whose rows all have the
    same length are stored FixedLen([n]). Returns a WriteResult; the manifest holds the same
    counts. Raises OptionError for bad options or an existing path under errorifexists,
    SchemaError for columns that cannot be stored, CountMismatchError when the row counts of
    source, backup and TFRecords disagree.
    """
    spark = df.sparkSession
    mode = _check_mode(mode)
    compression = normalize_compression(compression)
    label_cols = _column_names("label_cols", label_cols)
    partition_by = _column_names("partition_by", partition_by)
    splits = _check_split(split, split_key, df.columns)
    if backup_table and backup_path:
        raise OptionError(f"give backup_table ({backup_table!r}) or backup_path "
                          f"({backup_path!r}), not both: the parquet copy goes to one place")
    if gzip_level not in range(1, 10):
        raise OptionError(f"gzip_level must be an integer from 1 to 9, got {gzip_level!r}")
    if not _is_int(target_file_bytes) or target_file_bytes <= 0:
        raise OptionError(f"target_file_bytes must be a positive int, got {target_file_bytes!r}")
    if max_records_per_file is not None and (not _is_int(max_records_per_file)
                                             or max_records_per_file <= 0):
        raise OptionError(f"max_records_per_file must be a positive int or None, got "
                          f"{max_records_per_file!r}")
    if null_elements not in NULL_ELEMENT_POLICIES:
        raise OptionError(f"null_elements={null_elements!r} is not valid; use one of "
                          f"{list(NULL_ELEMENT_POLICIES)}")
    for col in partition_by:
        if col not in df.columns:
            raise OptionError(f"partition_by column {col!r} is not in the DataFrame; columns "
                              f"are {df.columns}")
        tname = df.schema[col].dataType.simpleString()
        if tname not in _PARTITION_TYPES:
            raise OptionError(f"cannot partition by column {col!r} of type {tname}; use a "
                              f"string, integer, boolean or date column")
    data_cols = [c for c in df.columns if c not in partition_by]
    # Refuse unsupported types and missing labels before anything is written.
    base_spec = infer_spec(df.select(*[F.col(f"`{c}`") for c in data_cols]).schema,
                           label_cols=label_cols, shapes=shapes, defaults=defaults)
    loc = locate(path)
    if not loc.is_empty():
        if mode == "errorifexists":
            raise OptionError(f"output path {path!r} already exists; use mode='overwrite' to "
                              f"replace it, mode='append' to add to it, or another path")
        if mode == "ignore":
            return WriteResult(path, None, 0, 0, 0, skipped=True)
    loc.check_writable()
    default_backup = loc.join("_backup") if loc.is_local else f"{path.rstrip('/')}/_backup"
    backup_target = backup_table or backup_path or default_backup
    if backup_table and mode == "errorifexists" and spark.catalog.tableExists(backup_table):
        raise OptionError(f"backup table {backup_table!r} already exists; use mode='overwrite' "
                          f"or 'append', or another backup_table")
    register(spark)

    started = time.perf_counter()
    obs = Observation("tfspark")
    observed = df.observe(obs, *observe.metrics(df.schema, base_spec))
    new_files = _write_backup(spark, observed, backup_table, backup_target, mode)
    backup_df = _read_back(spark, df.schema, new_files)
    facts = observe.facts(obs.get, base_spec, detect_fixed_lengths)
    backup_rows = backup_df.count()
    if facts["rows"] != backup_rows:
        raise CountMismatchError(f"source produced {facts['rows']} rows but the backup "
                                 f"{backup_target} holds {backup_rows}; nothing was exported")
    spec = infer_spec(df.select(*[F.col(f"`{c}`") for c in data_cols]).schema,
                      label_cols=label_cols, shapes={**facts["shapes"], **dict(shapes or {})},
                      defaults=defaults)
    backup_done = time.perf_counter()
    wide = _parquet_row_bytes(new_files)
    with _batch_rows(spark, wide):
        row_bytes = (_row_bytes(backup_df, spec, compression, null_elements, wide)
                     if backup_rows else None)
        out_df, split_col, per_file = _arrange(backup_df, splits, split_key, seed, shuffle,
                                               backup_rows, row_bytes, target_file_bytes,
                                               max_records_per_file)
        stats = {"rows": {"source": facts["rows"], "backup": backup_rows},
                 "null_counts": facts["null_counts"], "backup": backup_target,
                 "backup_files": len(new_files)}
        writer = (out_df.write.format("tfspark")
                  .mode("append" if mode == "append" else "overwrite")
                  .option("spec", spec.to_json(indent=None))
                  .option("nullElements", null_elements)
                  .option("stats", json.dumps(stats)))
        if compression:
            writer = (writer.option("compression", compression)
                      .option("gzipLevel", str(gzip_level)))
        if per_file:
            writer = writer.option("maxRecordsPerFile", str(per_file))
        if partition_by:
            writer = writer.option("partitionBy", ",".join(partition_by))
        if split_col:
            writer = writer.option("splitColumn", split_col)
        writer.save(path)
    result = _result(path, spec, mf.read_manifest(loc), backup_target, facts["rows"],
                     backup_rows, compression)
    result = replace(result, seconds={"backup": round(backup_done - started, 2),
                                      "tfrecords": round(time.perf_counter() - backup_done, 2)})
    log.info("%s", result.summary())
    return result


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _column_names(arg: str, value: Any) -> list[str]:
    """A column name or an iterable of them, as a list; OptionError otherwise."""
    if isinstance(value, str):
        return [value]
    try:
        names = list(value)
    except TypeError:
        names = None
    if names is None or not all(isinstance(n, str) for n in names):
        raise OptionError(f"{arg} must be a column name or a list of column names, got "
                          f"{value!r}")
    return names


def _check_mode(mode: str) -> str:
    m = str(mode).lower()
    m = {"error": "errorifexists", "default": "errorifexists"}.get(m, m)
    if m not in WRITE_MODES:
        raise OptionError(f"mode {mode!r} is not valid; use one of {list(WRITE_MODES)}")
    return m


def _check_split(split: Mapping[str, float] | None, split_key: str | None,
                 columns: list[str]) -> dict[str, float]:
    if split is None:
        if split_key is not None:
            raise OptionError("split_key is given but split is not; pass split={'train': 0.8, "
                              "'validation': 0.2} or drop split_key")
        return {}
    if not isinstance(split, Mapping) or not split:
        raise OptionError(f"split must be a non-empty dict of name -> fraction, got {split!r}")
    for name, frac in split.items():
        if not isinstance(name, str) or not _SPLIT_NAME.match(name):
            raise OptionError(f"split name {name!r} must use letters, digits, '_' or '-' (it "
                              f"becomes a directory name)")
        if not isinstance(frac, (int, float)) or isinstance(frac, bool) or not 0 < frac <= 1:
            raise OptionError(f"split fraction for {name!r} must be in (0, 1], got {frac!r}")
    total = sum(split.values())
    if abs(total - 1.0) > 1e-6:
        raise OptionError(f"split fractions must sum to 1, got {total:g} for {dict(split)}")
    if split_key is not None and split_key not in columns:
        raise OptionError(f"split_key column {split_key!r} is not in the DataFrame; columns "
                          f"are {columns}")
    return dict(split)


def _write_backup(spark: Any, df: DataFrame, table: str | None, target: str,
                  mode: str) -> list[str]:
    """Write the backup; return the files this write added (the rows to export)."""
    # "error", not "errorifexists": Spark Connect's writer knows only the short name.
    bmode = {"ignore": "error", "errorifexists": "error"}.get(mode, mode)
    before = set(_input_files(spark, table, target))
    writer = df.write.mode(bmode).format("parquet")
    if table:
        writer.saveAsTable(table)
    else:
        writer.save(target)
    after = _input_files(spark, table, target)
    return [f for f in after if f not in before] if mode == "append" else after


def _input_files(spark: Any, table: str | None, target: str) -> list[str]:
    try:
        if table:
            if not spark.catalog.tableExists(table):
                return []
            spark.catalog.refreshTable(table)
            return list(spark.table(table).inputFiles())
        if not [r for r in locate(target).list_files()
                if not any(p.startswith(("_", ".")) for p in r.split("/"))]:
            return []  # empty, or only what a write that never committed left (_temporary/)
        return list(spark.read.parquet(target).inputFiles())
    except TfsparkError:
        raise
    except Exception as e:  # an unreadable existing backup: say which
        raise OptionError(f"cannot read the existing backup {table or target!r}: "
                          f"{str(e).splitlines()[0]}") from None


def _read_back(spark: Any, schema: Any, files: list[str]) -> DataFrame:
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


def _row_bytes(df: DataFrame, spec: FeatureSpec, compression: str | None,
               null_elements: str, wide: float | None = None) -> float | None:
    """Bytes per record on disk, from encoding a small sample (no second pass); None if unknown.
    wide: bytes per row when known (from the backup's footers); it bounds the sample in bytes,
    so rows of huge values (tens of MB each) do not pull gigabytes into the driver.
    """
    vectors = {f.path[0] for f in spec.features if f.encoding == "vector"}
    cols = list(dict.fromkeys(f.path[0] for f in spec.features))
    if vectors:  # toArrow() trips over null ml Vectors; their array form encodes the same
        from pyspark.ml.functions import vector_to_array

        def col(c: str) -> Any:
            v = F.col(f"`{c}`")
            return F.when(v.isNotNull(), vector_to_array(v)).alias(c) if c in vectors else v

        df = df.select(*[col(c) for c in cols])
    try:
        rows = _SAMPLE_ROWS if not wide else max(1, min(_SAMPLE_ROWS, int(_SAMPLE_BYTES // wide)))
        sample = df.limit(rows).toArrow().select(cols)
        buf, _ = BatchEncoder(spec, null_elements=null_elements).encode(sample, framed=True)
    except Exception as e:  # noqa: BLE001 - sizing is a guess; the real write reports errors
        log.warning("tfspark: could not size files from a sample (%s); one file per task",
                    str(e).splitlines()[0])
        return None
    if sample.num_rows == 0:
        return None
    size = len(buf) if compression != "gzip" else len(zlib.compress(buf.tobytes(), 6))
    return size / sample.num_rows


def _parquet_row_bytes(files: list[str]) -> float | None:
    """Largest uncompressed bytes per row of any row group, from the footers of up to 16 of the
    backup's files (no data read); None when they cannot be read from here."""
    import pyarrow.parquet as pq

    worst = 0.0
    try:
        for path in files[:16]:
            loc = locate(re.sub(r"^file:(//)?", "", path))
            with loc.fs.open_input_file(loc.base) as f:
                meta = pq.ParquetFile(f).metadata
            for i in range(meta.num_row_groups):
                group = meta.row_group(i)
                if group.num_rows:
                    worst = max(worst, group.total_byte_size / group.num_rows)
    except Exception as e:  # noqa: BLE001 - only a guide to batch sizes
        log.info("tfspark: could not read backup footers (%s)", e)
        return None
    return worst or None


@contextlib.contextmanager
def _batch_rows(spark: Any, row_bytes: float | None) -> Iterator[None]:
    """Smaller batches for rows of huge values, restored afterwards. Spark reads parquet in
    columnar batches of 4,096 rows and sends the data source's writer Arrow batches of 10,000:
    with 50 MB strings either is gigabytes and executors die of OutOfMemoryError. Both are
    lowered so a batch holds about _BATCH_BYTES."""
    keys = {"spark.sql.parquet.columnarReaderBatchSize": 4096,
            "spark.sql.execution.arrow.maxRecordsPerBatch": 10000}
    want = max(1, int(_BATCH_BYTES // row_bytes)) if row_bytes else None
    changed: dict[str, str] = {}
    for key, default in keys.items():
        current = spark.conf.get(key, str(default)) or str(default)
        if want is not None and 0 < want < int(current):
            changed[key] = current
            spark.conf.set(key, str(want))
    if changed:
        log.info("tfspark: batches of %d rows for rows of ~%.0f bytes", want, row_bytes)
    try:
        yield
    finally:
        for key, value in changed.items():
            spark.conf.set(key, value)


def _partitions(df: DataFrame) -> int | None:
    try:
        return df.rdd.getNumPartitions()
    except Exception:  # noqa: BLE001 - Spark Connect has no RDDs
        return None


def _arrange(df: DataFrame, splits: dict[str, float], split_key: str | None, seed: int,
             shuffle: bool, rows: int, row_bytes: float | None, target: int,
             max_records: int | None) -> tuple[DataFrame, str | None, int | None]:
    """Add the split column and lay rows out so files come out near `target` bytes.

    No shuffle unless asked: tasks roll files at target / row_bytes records, and partitions
    much smaller than the target are coalesced first.
    """
    per_file = max(1, int(target / row_bytes)) if row_bytes else None
    if max_records:
        per_file = min(per_file, max_records) if per_file else max_records
    n_files = max(1, math.ceil(rows / per_file)) if per_file and rows else 1
    if shuffle:
        df = df.repartition(n_files, F.rand(seed)).sortWithinPartitions(F.rand(seed + 1))
    else:
        have = _partitions(df)
        if have is not None and have > n_files:
            df = df.coalesce(n_files)
    if not splits:
        return df, None, per_file
    if split_key is not None:  # a hash of the key in [0, 1): the same row, the same split
        u = F.pmod(F.xxhash64(F.col(f"`{split_key}`"), F.lit(seed)), F.lit(1 << 30)) / (1 << 30)
    else:
        u = F.rand(seed)
    bound = 0.0
    expr = None
    names = list(splits)
    for name in names[:-1]:
        bound += splits[name]
        expr = (F.when(u < bound, name) if expr is None else expr.when(u < bound, name))
    expr = F.lit(names[-1]) if expr is None else expr.otherwise(names[-1])
    return df.withColumn(SPLIT_COLUMN, expr), SPLIT_COLUMN, per_file


def _result(path: str, spec: FeatureSpec, manifest: dict[str, Any], backup: str,
            source_rows: int, backup_rows: int, compression: str | None) -> WriteResult:
    write_id = manifest["writes"][-1]["write_id"]
    files = [f for f in manifest["files"] if f.get("write_id") == write_id]
    rows = sum(f["records"] for f in files)
    if rows != backup_rows:
        raise CountMismatchError(f"the TFRecords at {path} hold {rows} rows but the backup "
                                 f"{backup} holds {backup_rows}; the data set is inconsistent: "
                                 f"rewrite it with mode='overwrite'")
    splits: dict[str, dict[str, int]] = {}
    for f in files:
        if f.get("split"):
            s = splits.setdefault(f["split"], {"rows": 0, "files": 0, "bytes": 0})
            s["rows"] += f["records"]
            s["files"] += 1
            s["bytes"] += f["bytes"]
    return WriteResult(path, spec, rows, len(files), sum(f["bytes"] for f in files),
                       dict(sorted(splits.items())), backup, source_rows, backup_rows,
                       compression)
