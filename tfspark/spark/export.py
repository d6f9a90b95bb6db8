"""write_tfrecords(): DataFrame -> TFRecords + their parquet copy (the backup) + manifest, with
one row count checked at every step.

Stages: validate (arguments into WriteOptions, the schema into a spec, the paths) -> write ->
publish the staged backup -> result (counts of source, backup and TFRecords must agree). The
write takes one of two ways, and the result says which:

- One pass (the default): each task encodes its rows into TFRecords, sketches their statistics
  and writes the same Arrow batches to its parquet file of the staged backup, so the copy and
  the TFRecords of a task attempt hold the same rows by construction (a DataFrame that is not
  deterministic too), and Spark counts one attempt of each task (the driver keeps the files of
  those only). The tasks count the rows and the nulls; the manifest's commit is the commit of
  the whole write.
- Two passes, where one pass cannot keep a promise (`two_passes_why` says which and why): the
  backup is staged first (spark.backup; spark.observe gathers row count, nulls and array
  lengths while it is written), then the TFRecords are written from the staged rows.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import time
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import DataFrame, Observation

from tfspark import paths, progress
from tfspark.errors import CountMismatchError, OptionError, TfsparkError, scrubbed
from tfspark.spark import columns, observe, sizing
from tfspark.spark import stats as spark_stats
from tfspark.spark.backup import StagedBackup, publish, roll_forward, sweep_dead, sweep_dead_tables
from tfspark.spark.hadoop_stores import hadoop_store
from tfspark.spark.meanwhile import Meanwhile
from tfspark.spark.source import register_meanwhile
from tfspark.spark.stats import GROUP_COLUMN, Observed
from tfspark.spark.tasks import check_sendable, write_through_tasks
from tfspark.spark.versions import HAS_DATA_SOURCE, check_supported
from tfspark.spark.write import Workflow, check_append
from tfspark.spec import FeatureSpec, infer_spec
from tfspark.store import manifest as mf
from tfspark.store.backup import check_backup_path
from tfspark.store.commit import StartedFrom, existing_manifest, last_write, new_write_id
from tfspark.store.fs import Location, locate
from tfspark.store.options import (
    WriteOptions,
    fill_doc,
    workflow_doc,
    workflow_signature,
    write_settings,
)
from tfspark.store.placement import check_placement
from tfspark.store.uris import error_line, redact
from tfspark.store.write import PriorState, RowFacts, WriteResult, undo_on_failure, write_result

log = logging.getLogger("tfspark")
REPORTS_BYTES = 128 * 2**20  # the tasks' statistics the driver takes in at most (about)


@scrubbed
def write_tfrecords(df: DataFrame, path: str, filesystem: Any = None,
                    **settings: Any) -> WriteResult:
    """Write a Spark DataFrame as a data set: TFRecords, their manifest and statistics, and
    a parquet copy of the same rows.

    The settings are the write options' table (tfspark.store.options.WriteOptions): the export
    config's keys and the data source's options are the same settings. mode applies to `path`
    and to the parquet copy. record_type "SequenceExample": array<array<T>> columns become
    feature lists (one Feature per step), every other column a context feature, as the JVM
    connectors write them. split: rows are assigned by a hash of `split_key` (reproducible) or
    by a seeded random draw; a split of fraction 0 is still a split (it reads as empty).
    Registers the data source in df's session (spark.read.format("tfrecord") works after).

    Args:
        df: the DataFrame (Spark 3.5 or 4.x; Spark Connect too).
        path: the data set's directory: a local path or a URI (s3://, gs://, abfs://, hdfs://,
            s3a://, ...).
        filesystem: where `path` (and backup_path) are: a pyarrow.fs.FileSystem or an fsspec
            filesystem. Default: from the path (local, or a URI; for an s3a://, abfss:// or
            gs:// path, what Spark's Hadoop settings hold for its store: endpoint, keys,
            tokens). On a store Spark's parquet writer cannot reach (filesystem=, or a URI with
            pyarrow's query options) tfspark's tasks write and read the copy through pyarrow.
{settings}

    Returns:
        A WriteResult: rows, files and bytes, per split too; the manifest holds the same counts.

    Raises:
        OptionError: bad settings, or an existing path under errorifexists (TypeError: an
            unknown keyword).
        SchemaError: columns that cannot be stored.
        WriteConflictError: another write committed to the path while this one ran.
        CountMismatchError: the row counts of source, parquet copy and TFRecords disagree.

    Examples:
        >>> df = spark.range(100).selectExpr("id", "CAST(id % 2 AS INT) AS label")
        >>> result = tfspark.write_tfrecords(df, "out", label_cols="label")
        >>> result.rows, tfspark.read_manifest("out").spec.label_names
        (100, ['label'])
    """
    if not hasattr(df, "sparkSession") or not hasattr(df, "mapInArrow"):
        raise OptionError(f"write_tfrecords needs a Spark DataFrame, got {type(df).__name__}"
                          + ("; make one with spark.createDataFrame(pandas_df)"
                             if type(df).__module__.startswith("pandas") else ""))
    check_supported()
    if filesystem is None:  # s3a://, abfss://, gs://: with Spark's own Hadoop settings
        path, filesystem, settings = hadoop_store(df.sparkSession, path, settings)
    opts = WriteOptions.from_arguments(path, in_filesystem=filesystem is not None,
                                       **{**_DEFAULTS, **settings})
    if not HAS_DATA_SOURCE:
        return export(df, opts, filesystem)
    registered = register_meanwhile(df.sparkSession)  # spark.read.format("tfrecord") after
    try:
        result = export(df, opts, filesystem)
    except BaseException:
        with contextlib.suppress(Exception):  # the write's error is the one to see
            registered()
        raise
    registered()
    return result


_DEFAULTS = {t.name: t.default for t in write_settings() if t.workflow}
fill_doc(write_tfrecords, "{settings}", workflow_doc())
write_tfrecords.__signature__ = workflow_signature(  # type: ignore[attr-defined]
    [inspect.Parameter("df", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("path", inspect.Parameter.POSITIONAL_OR_KEYWORD),
     inspect.Parameter("filesystem", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)])


def export(df: DataFrame, opts: WriteOptions, filesystem: Any = None) -> WriteResult:
    """The stages of write_tfrecords for checked options (see the module docstring). The write
    commits against the version of the path it found when it began, or fails with
    WriteConflictError; what a failure leaves of this write is removed (undo_on_failure)."""
    spark = df.sparkSession
    data_cols, base_spec = columns.check_columns(df, opts)
    if opts.stats and not opts.stats_exact:  # the tasks' sketches: missing here, say so now
        import tfspark.store.stats.sketch  # noqa: F401
    loc = locate(opts.path, filesystem)
    if filesystem is not None:
        check_sendable(loc.fs)
    # A store Spark's parquet writer cannot reach (a filesystem= object, or pyarrow's URI
    # options): tfspark's tasks write and read the backup through pyarrow.
    by_tasks = not loc.is_local and (filesystem is not None or
                                     bool(paths.split_query(opts.path)[1]))
    backup_loc = loc.resolve(opts.backup_path) if opts.backup_path else loc.child("_backup")
    check_placement(loc, str(opts.mode))
    check_backup_path(opts.backup_path, loc, backup_loc)
    if opts.mode in ("errorifexists", "ignore") and not loc.is_empty():
        if opts.mode == "errorifexists":
            raise OptionError(f"output path {loc.uri!r} already exists; use mode='overwrite' "
                              f"to replace it, mode='append' to add to it, or another path")
        return WriteResult(loc.uri, None, 0, 0, 0, skipped=True)
    before = PriorState.take(loc)  # what undo keeps, and what later steps need not ask again
    write_id = new_write_id()
    with undo_on_failure(loc, write_id, before):
        loc.check_writable()
        old = existing_manifest(loc, str(opts.mode))
        if roll_forward(spark, loc, old):  # a committed write's backup a kill left staged
            old = existing_manifest(loc, str(opts.mode))
        started_from = StartedFrom(last_write(old))  # what this write commits against
        previous = old if opts.mode == "append" else None
        if previous is not None:  # columns and options that cannot append: before the backup
            check_append(opts, previous, base_spec)
        why = two_passes_why(spark, df, opts, base_spec, previous)
        backup = StagedBackup.plan(spark, opts.backup_table, backup_loc, mode=str(opts.mode),
                                   write_id=write_id, by_tasks=by_tasks or not why,
                                   existed=_backup_existed(before, opts))
        if opts.backup_table and opts.mode == "errorifexists" and \
                spark.catalog.tableExists(opts.backup_table):
            raise OptionError(f"backup table {opts.backup_table!r} already exists; use "
                              f"mode='overwrite' or 'append', or another backup_table")
        backup.check_append(spark, df.schema)
        if backup.where is not None:
            sweep_dead(backup.where)
        elif opts.backup_table:
            sweep_dead_tables(spark, opts.backup_table)

        try:
            staged = (_two_passes if why else _one_pass)(
                spark, df, opts, base_spec=base_spec, data_cols=data_cols, backup=backup,
                previous=previous, begun=Workflow(
                    str(opts.mode), started_from, write_id, base_spec, home=loc,
                    created=False if before is not None and before.existed else None))
            spec, manifest, backup_rows = staged.spec, staged.manifest, staged.backup_rows
        except BaseException:
            _discard_unless_committed(spark, loc, backup)
            raise
        try:
            publish(spark, loc, write_id)
        except Exception as e:  # the TFRecords are committed: say so, so no one writes twice
            raise TfsparkError(
                f"write_tfrecords committed this write's {backup_rows:,} rows to {loc.uri!r}, "
                f"but moving its parquet backup into place failed ({e}); the rows are in the "
                f"data set, do not write them again: the next write_tfrecords to this path "
                f"(any mode) finishes the move first") from e
        result = write_result(loc.uri, spec, manifest, write_id=write_id, backup=backup.target,
                              source_rows=staged.facts.rows or 0, backup_rows=backup_rows,
                              compression=opts.compression)
    result = replace(result, seconds=staged.seconds, passes=2 if why else 1,
                     two_passes_why=why or "")
    if opts.dali_index:  # (it reads the records: the kernels, here only then)
        from tfspark.store import dali

        result = replace(result, dali_indexes=dali.after_write(loc, backup_rows,
                                                               "write_tfrecords"))
    log.info("%s", result.summary())
    for line in observe.label_nulls(spec, (manifest.stats or {}).get("null_counts", {}),
                                    backup_rows, opts.defaults):
        log.warning("%s", line)
    return result


def _backup_existed(before: PriorState | None, opts: WriteOptions) -> bool | None:
    """Whether the backup's directory existed, when the output's listing says: the default
    backup is <path>/_backup; None: ask."""
    if before is None or opts.backup_path:
        return None
    return any(e == "_backup" or e.startswith("_backup/") for e in before.entries)


@dataclass(frozen=True)
class Staged:
    """A committed write's spec, manifest and row facts, the rows its backup staged, and the
    seconds of its stages."""

    spec: FeatureSpec
    manifest: mf.Manifest
    facts: RowFacts
    backup_rows: int
    seconds: dict[str, float]


def two_passes_why(spark: Any, df: DataFrame, opts: WriteOptions, base_spec: FeatureSpec,
                   previous: mf.Manifest | None = None) -> str | None:
    """Why this write stages the backup first and writes the TFRecords from it (two passes
    over the rows); None: it takes one pass. previous: the data set an append adds to."""
    if opts.backup_table:
        return ("the parquet copy is a catalog table (backup_table), which Spark's own writer "
                "makes")
    if opts.stats and opts.stats_exact:
        return "stats_exact: Spark's jobs compute the statistics over the staged rows"
    if opts.stats:
        tasks = int(spark.conf.get("spark.sql.shuffle.partitions", "200") or 200) \
            if opts.shuffle else _partitions(df)
        if not _reports_fit(base_spec, opts, tasks, 2**31):
            return (f"the statistics of {tasks:,} tasks would be too large for the driver to "
                    f"take in; Spark's jobs compute them over the staged rows")
    for f in base_spec.features:
        if f.encoding == "vector":
            return f"column {f.name!r} is an ML vector, which Spark's parquet writer stores"
        if f.kind == "varlen" and opts.detect_fixed_lengths:
            return (f"the lengths of array column {f.name!r} decide its shape before its "
                    f"records are written (detect_fixed_lengths; give shapes= or "
                    f"detect_fixed_lengths=False for one pass)")
    stored = {f.name: f for f in previous.spec.features} \
        if previous is not None and previous.spec is not None else {}
    for f in base_spec.features:
        if f.nullable and f.name in stored and not stored[f.name].nullable:
            return (f"an append of nullable column {f.name!r} to a data set that stores it as "
                    f"not nullable: its nulls are counted before any record is written")
    if any(type(field.dataType).__name__.endswith("UDT") or
           hasattr(field.dataType, "sqlType") for field in df.schema.fields):
        return "a column of a user-defined type, which Spark's parquet writer stores"
    if not str(spark.version).split(".")[0].isdigit() or int(spark.version.split(".")[0]) < 4:
        return "Spark 3.5 cannot bound its Arrow batches by bytes (rows of huge values)"
    return None


def _one_pass(spark: Any, df: DataFrame, opts: WriteOptions, *, base_spec: FeatureSpec,
              data_cols: list[str], backup: StagedBackup,
              previous: mf.Manifest | None, begun: Workflow) -> Staged:
    """The TFRecords, their statistics and the backup's staged parquet files from one pass
    over the rows (see the module docstring), and the commit."""
    started = time.perf_counter()
    spec = base_spec  # (nothing observed changes it: two_passes_why)
    staging = backup.staging_location()
    out_df, split_col = sizing.arrange(df, dict(opts.split or {}), opts.split_key, opts.seed,
                                       opts.shuffle, None)
    rows_in = [0]

    def settle(writer: Any, messages: list[Any]) -> None:
        """The backup's files and rows, the facts and the manifest's statistics, before the
        commit: the rows the tasks took in, their parquet files' footers and their TFRecords
        must agree."""
        backup.staged[:] = sorted(m.copy_file for m in messages if m.copy_file)
        rows_in[0] = seen = sum(m.copy_rows for m in messages)
        written = sum(mf.FileEntry(**f).row_count for m in messages for f in m.files)
        read = sizing.footers([staging.child(name) for name in backup.staged])
        backup_rows = read.rows if read is not None else seen
        if not seen == backup_rows == written:
            raise CountMismatchError(
                f"the write's tasks took in {seen:,} rows, but the parquet copy "
                f"{redact(backup.target)} holds {backup_rows:,} and the TFRecords "
                f"{written:,}; nothing was committed: run the write again")
        stats = dict(writer.manifest_stats or {})
        facts = RowFacts(seen, dict(stats.get("null_counts", {})))
        if previous is not None and previous.spec is not None:
            observe.check_append_rows(redact(opts.path), previous.spec, facts)
        stats.update({"rows": {"source": seen, "backup": backup_rows},
                      "backup": backup.target, "backup_files": len(backup.staged)})
        if opts.stats and previous:  # an append: its statistics are of its own rows
            stats["features_scope"] = "last write"
        writer.manifest_stats = stats
        writer.backup_entry = backup.entry(spark, backup_rows, previous)

    task_stats = bool(opts.stats)  # (their reports fit: two_passes_why)
    what = "TFRecords, their parquet copy" + (" and the feature statistics" if task_stats
                                              else "")
    workflow = replace(
        begun, mode="errorifexists" if opts.mode == "ignore" else str(opts.mode), spec=spec,
        manifest_stats={}, splits=tuple(opts.split or ()),
        count_nulls=tuple(f.name for f in spec.features), copy_to=staging,
        split_column=split_col)
    with sizing.one_pass_batches(spark):
        manifest = write_through_tasks(
            out_df, replace(opts, max_bytes_per_file=opts.target_file_bytes,
                            task_stats=task_stats),
            workflow, None, what, before_commit=settle)
    facts = RowFacts(rows_in[0], dict((manifest.stats or {}).get("null_counts", {})))
    backup_rows = int((manifest.stats or {}).get("rows", {}).get("backup", rows_in[0]))
    return Staged(spec, manifest, facts, backup_rows,
                  {"one pass": round(time.perf_counter() - started, 2)})


def _partitions(df: DataFrame) -> int:
    """df's partitions (the write's tasks), or Spark's shuffle partitions where the plan
    cannot be asked (Spark Connect)."""
    try:
        return int(df.rdd.getNumPartitions())
    except Exception:  # noqa: BLE001 - Spark Connect has no RDDs
        return int(df.sparkSession.conf.get("spark.sql.shuffle.partitions", "200") or 200)


def _two_passes(spark: Any, df: DataFrame, opts: WriteOptions, *, base_spec: FeatureSpec,
                     data_cols: list[str], backup: StagedBackup,
                     previous: mf.Manifest | None, begun: Workflow) -> Staged:
    """Stage the backup (observing the facts the spec needs), then write the TFRecords from
    the staged rows, and commit."""
    started = time.perf_counter()
    obs = Observation("tfspark")
    # the scalars' statistics, observed while the backup is written
    observed_stats = Observed.plan(base_spec, opts)
    # scalars only: the facts from the backup's footers, no observed aggregate
    from_footers = observed_stats is None and not opts.partition_by and \
        observe.footers_suffice(base_spec)
    watched = df if from_footers else (
        observed_stats.keyed(df) if observed_stats else df).observe(
        obs, *observe.metrics(base_spec), *(observed_stats.metrics() if observed_stats else []))
    if observed_stats is not None and observed_stats.split is not None:
        watched = watched.drop(GROUP_COLUMN)
    with progress.stage("backup", f"parquet, to {redact(backup.target)}") as done:
        backup_df = backup.stage(spark, watched)
        files = backup.staged_files(spark)
        read = sizing.footers(files)  # the staged rows and their width, without a Spark job
        unknown: list[str] = []  # features whose nulls the TFRecord tasks count
        if from_footers:
            facts, unknown = observe.footer_facts(base_spec, read)
        else:
            facts = observe.facts(obs.get, base_spec, opts.detect_fixed_lengths)
        backup_rows = read.rows if read is not None else backup_df.count()
        if facts.rows is None:
            facts.rows = backup_rows
        done.rows, done.detail = backup_rows, progress.many(len(files), "file")
    if facts.rows != backup_rows:
        raise CountMismatchError(f"source produced {facts.rows} rows but the backup "
                                 f"{backup.target} holds {backup_rows}; nothing was exported")
    if previous is not None and previous.spec is not None:
        observe.check_append_rows(redact(opts.path), previous.spec, facts)
    spec = infer_spec(columns.fields(df, data_cols),
                      label_cols=opts.label_cols,
                      shapes={**facts.shapes, **dict(opts.shapes or {})},
                      defaults=opts.defaults, decimal_as=opts.decimal_as,
                      record_type=opts.record_type)
    backup_done = time.perf_counter()
    scalar_stats = observed_stats.read(obs.get, spec) if observed_stats else None
    manifest_stats = {"rows": {"source": facts.rows, "backup": backup_rows},
                      "null_counts": facts.null_counts, "backup": backup.target,
                      "backup_files": len(files)}
    if opts.stats and previous:  # an append: its statistics are of its own rows
        manifest_stats["features_scope"] = "last write"
    entry = backup.entry(spark, backup_rows, previous)
    workflow = replace(
        begun, mode="errorifexists" if opts.mode == "ignore" else str(opts.mode), spec=spec,
        manifest_stats=manifest_stats, backup_entry=entry, splits=tuple(opts.split or ()),
        count_nulls=tuple(unknown))
    manifest = _write(spark, backup_df, backup_rows, footers=read, opts=opts, workflow=workflow,
                      scalar_stats=scalar_stats)
    return Staged(spec, manifest, facts, backup_rows, {
        "backup": round(backup_done - started, 2),
        "tfrecords": round(time.perf_counter() - backup_done, 2)})


def _discard_unless_committed(spark: Any, loc: Location, backup: StagedBackup) -> None:
    """After a failure: drop the staging, unless the manifest committed it (a failure after
    the commit): then it is published instead, now or by the next write."""
    try:
        manifest = mf.find_manifest(loc)  # (one read: None when there is none)
        if manifest is not None:
            pending = manifest.backup.pending if manifest.backup else None
            if pending is not None and pending.staging == backup.staging:
                return
        backup.discard(spark)
    except Exception as e:  # noqa: BLE001 - report the write's own error
        log.warning("tfspark: could not remove the staged backup %s: %s", backup.staging,
                    error_line(e))


def _write(spark: Any, backup_df: DataFrame, backup_rows: int, *,
           footers: sizing.Footers | None,
           opts: WriteOptions, workflow: Workflow,
           scalar_stats: dict[str, dict[str, Any]] | None = None) -> mf.Manifest:
    """The TFRecords from the backup's rows, as the data source writes them: about as many
    tasks as files of the target size (estimated from the backup's footers), each rolling its
    files at that size on disk; the manifest gets the backup's entry and the statistics:
    sketched by the tasks (their FeatureSketches), or with stats_exact from Spark's jobs beside
    them (scalar_stats: those observed while the backup was written). Returns the committed
    manifest. (An "ignore" write that got here found the path empty.)"""
    spec = workflow.spec
    wide = footers.row_bytes if footers else None
    estimate = sizing.tfrecord_bytes(spec, backup_rows, footers.total_bytes, opts.compression) \
        if footers else opts.target_file_bytes
    n_files = max(1, math.ceil(estimate / opts.target_file_bytes))
    if opts.max_records_per_file:
        n_files = max(n_files, math.ceil(backup_rows / opts.max_records_per_file))
    with sizing.batch_rows(spark, wide):
        out_df, split_col = sizing.arrange(backup_df, dict(opts.split or {}), opts.split_key,
                                           opts.seed, opts.shuffle, n_files)
        statistics: Meanwhile[dict[str, Any]] | None = None
        # each task writes a file per split it meets (and per partition value: unknown here)
        splits = max(1, len(sizing.split_names(dict(opts.split or {}))))
        what = progress.many(n_files, "task") if opts.partition_by else \
            f"about {progress.many(n_files * splits, 'file')}"
        if opts.stats and not opts.stats_exact and \
                _reports_fit(spec, opts, n_files, math.ceil(backup_rows / n_files)):
            opts, what = replace(opts, task_stats=True), what + " and the feature statistics"
        elif opts.stats:  # jobs that run while the TFRecords are written; the commit waits
            def compute() -> dict[str, Any]:
                t = time.perf_counter()
                with progress.stage("statistics", f"{len(spec.features)} features") as done:
                    found = spark_stats.compute(out_df, spec, split_col, opts.stats_top_k,
                                                scalar_stats)
                    done.rows = backup_rows
                return {**found, "stats_seconds": round(time.perf_counter() - t, 3)}

            statistics = Meanwhile(spark, compute, "tfspark-statistics")
        return write_through_tasks(
            out_df, replace(opts, max_bytes_per_file=opts.target_file_bytes),
            replace(workflow, split_column=split_col), statistics, what, backup_rows)


def _reports_fit(spec: FeatureSpec, opts: WriteOptions, tasks: int, rows: int) -> bool:
    """Whether the tasks' statistics stay within REPORTS_BYTES in all (they come back through
    the driver); else Spark's jobs gather them, whose cost hardly grows with the tasks."""
    from tfspark.store.stats.sketch import report_bytes

    groups = max(1, sum(share > 0 for share in dict(opts.split or {}).values()))
    need = tasks * report_bytes(spec, opts.stats_top_k, groups, rows)
    if need <= REPORTS_BYTES:
        return True
    log.info("tfspark: statistics by Spark's jobs (the %d write tasks' own could send the "
             "driver about %.0f MB)", tasks, need / 2**20)
    return False
