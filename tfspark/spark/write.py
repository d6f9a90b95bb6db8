"""A write through the data source: planned on the driver, run by tasks, committed on the driver.

The driver checks options, mode and spec in `plan_write` before any task runs; executors stream
Arrow batches into their own part files (part_files.py); the driver's `commit()` publishes the
manifest and `_SUCCESS` under the commit lock (commit.py), and `abort()` removes the job's files.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from tfspark.errors import ManifestError, OptionError, SchemaError, WriteConflictError
from tfspark.spec import FeatureSpec, infer_spec
from tfspark.spec.layout import check_block_keys, rows_per_record
from tfspark.store import manifest as mf
from tfspark.store.commit import (
    PART_FILE,
    StartedFrom,
    TaskGuard,
    commit_lock,
    conflict_message,
    marker_write_id,
    new_write_id,
    task_markers,
    wait_for_tasks,
    write_id_of,
)
from tfspark.store.fs import Location, locate
from tfspark.store.options import WriteOptions
from tfspark.store.placement import check_placement

log = logging.getLogger("tfspark")
PARTITION_TYPES = ("string", "int", "bigint", "smallint", "tinyint", "boolean", "date")


@dataclass
class TaskCommit(WriterCommitMessage):
    """What one write task sends the driver: the manifest entries of the files it wrote."""

    write_id: str
    task: str
    files: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] | None = None  # featureStats: this task's (stats_partial.py)


def plan_write(opts: WriteOptions, schema: StructType, overwrite: bool, *,
               mode: str | None = None, base: StartedFrom | None = None,
               write_id: str | None = None, splits: tuple[str, ...] = ()) -> TfrecordWriter:
    """Everything that can be checked on the driver, before a task runs.

    The data source passes Spark's save mode (`overwrite`) and the `mode` option; the write
    starts from the data set as it is now. write_tfrecords passes its own `mode`, the `base`
    it checked the path against when it began (the write commits against that version or
    fails with WriteConflictError), its `write_id` and the `splits` it declares (each gets a
    manifest, even one that receives no rows).
    """
    if mode is None:
        mode = "overwrite" if overwrite else (opts.mode or "append")
        if overwrite and opts.mode not in (None, "overwrite"):
            raise OptionError(f"option mode={opts.mode!r} contradicts Spark's "
                              f".mode('overwrite'); drop one of them")
    loc = locate(opts.path)
    skip = False
    old = existing_manifest(loc, mode)
    if base is None:  # the data source: the path as it is now
        if mode == "errorifexists" and not loc.is_empty():
            raise OptionError(f"output path {opts.path!r} already exists and is not empty; use "
                              f"mode 'overwrite' to replace it, 'append' to add to it, or "
                              f"another path")
        skip = mode == "ignore" and not loc.is_empty()
        base = StartedFrom(last_write(old))
    elif base.write_id != last_write(old):  # committed to since the caller looked
        raise WriteConflictError(conflict_message(opts.path, mode))
    if not skip:
        check_placement(loc, mode)
    created = not loc.exists()  # abort removes the directory again when it made it
    names = schema.names
    extra_cols = list(opts.partition_by) + ([opts.split_column] if opts.split_column else [])
    for col in extra_cols:
        if col not in names:
            raise OptionError(f"partition/split column {col!r} is not in the DataFrame; columns "
                              f"are {names}")
        tname = schema[col].dataType.simpleString()
        if tname not in PARTITION_TYPES:
            raise OptionError(f"cannot partition by column {col!r} of type {tname}; use a "
                              f"string, integer, boolean or date column")
    refuse_label_partitions(extra_cols, opts.label_cols, "partitionBy", "labelCols")
    keep = [n for n in names if n not in extra_cols]
    data_schema = StructType([schema[n] for n in keep])
    spec = _spec(opts, data_schema)
    if mode == "append" and old is not None:
        spec = _append_spec(opts, old, spec)
        _check_same_layout(opts, old)
    if spec is not None and opts.rows_per_record > 1:
        check_block_keys(spec.features)
    if not skip:  # last: a refused write leaves no directory behind
        loc.check_writable()
    # The written schema, partition columns included (the reader restores their types).
    written = StructType([f for f in schema.fields if f.name != opts.split_column]).jsonValue()
    # Overwrite replaces the writes whose files are there now (the old data set, leftovers of
    # failed or killed writes), not those of writes that start later.
    listed = loc.list_files()
    replaces = sorted({w for w in map(write_id_of, listed) if w} |
                      {w for w in map(marker_write_id, listed) if w} |
                      {w["write_id"] for w in (old or {}).get("writes", [])}) \
        if mode == "overwrite" else []
    return TfrecordWriter(uri=opts.path, mode=mode, skip=skip,
                          write_id=write_id or new_write_id(), base_write=base.write_id,
                          spec=spec, opts=opts, keep=keep, schema=written,
                          created=created and not skip, replaces=replaces,
                          splits=list(splits))


def refuse_label_partitions(partition_cols: Any, label_cols: Any, partition_name: str,
                            label_name: str) -> None:
    """A label cannot be a partition column: those become directory names, not features."""
    both = sorted(set(partition_cols) & set(label_cols))
    if both:
        raise OptionError(f"column(s) {both} are both labels and partition columns; a partition "
                          f"column becomes directory names, not a feature of the records, so "
                          f"it cannot be a label: drop it from {partition_name} or "
                          f"{label_name}")


def _spec(opts: WriteOptions, data_schema: StructType) -> FeatureSpec | None:
    if opts.record_type == "ByteArray":
        fields = data_schema.fields
        if len(fields) != 1 or fields[0].dataType.simpleString() not in ("binary", "string"):
            raise OptionError(f"recordType ByteArray needs exactly one binary column (besides "
                              f"partition columns); got {data_schema.simpleString()}")
        return None
    if opts.spec_json:
        spec = FeatureSpec.from_json(opts.spec_json)
        missing = sorted({f.path[0] for f in spec.features} - set(data_schema.names))
        if missing:
            raise SchemaError(f"the given spec needs column(s) {missing} that the DataFrame "
                              f"lacks; columns are {data_schema.names}")
        if spec.record_type != opts.record_type:
            raise OptionError(f"the given spec is for {spec.record_type} records but the write "
                              f"has recordType={opts.record_type!r}; pass recordType="
                              f"{spec.record_type!r} (record_type=) or another spec")
        _check_spec_fits(spec, data_schema)
        return spec
    return infer_spec(data_schema, label_cols=opts.label_cols, shapes=opts.shapes,
                      defaults=opts.defaults, decimal_as=opts.decimal_as,
                      record_type=opts.record_type)


def _check_same_layout(opts: WriteOptions, old: dict[str, Any]) -> None:
    """An append keeps the data set's layout: readers take one layout per data set."""
    have = rows_per_record(old, opts.path)
    if have != opts.rows_per_record:
        def what(n: int) -> str:
            return "the row layout (one row per record)" if n == 1 else \
                f"the block layout with rows_per_record={n}"
        raise OptionError(f"{opts.path!r} holds {what(have)}; this append asks for "
                          f"{what(opts.rows_per_record)}. Append with rowsPerRecord={have} "
                          f"(rows_per_record={have}), or overwrite the data set")


def _check_spec_fits(spec: FeatureSpec, data_schema: StructType) -> None:
    """Encode zero rows of the DataFrame's Arrow schema: a given spec that does not fit the
    columns (extra ones, other types, scalar for array) fails on the driver, before any task."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from tfspark.arrow.encode import BatchEncoder
    from tfspark.errors import EncodeError

    try:
        empty = to_arrow_schema(data_schema, timezone="UTC").empty_table()
    except Exception:  # noqa: BLE001 - a type Arrow cannot convert: the tasks will say
        return
    try:
        BatchEncoder(spec).encode(empty)
    except EncodeError as e:
        raise SchemaError(f"the given spec does not fit the DataFrame: {e}") from None


def existing_manifest(loc: Location, mode: str) -> dict[str, Any] | None:
    """The manifest at loc, if any. A damaged one fails every mode but overwrite, which is
    how the data set is repaired."""
    if not loc.exists(mf.NAME):
        return None
    try:
        return mf.read_manifest(loc)
    except ManifestError as e:
        if mode != "overwrite":
            raise
        log.warning("tfspark: overwriting a data set whose manifest is damaged: %s", e)
        return None


def last_write(old: dict[str, Any] | None) -> str | None:
    """The id of the last write a manifest names; None for no manifest (or no write)."""
    return old["writes"][-1]["write_id"] if old and old.get("writes") else None


def _append_spec(opts: WriteOptions, old: dict[str, Any],
                 spec: FeatureSpec | None) -> FeatureSpec | None:
    """The spec an append writes with: the data set's own, when this DataFrame's fits it.

    Fits: the same features, dtypes, encodings and source types. Nullability may differ (the
    stored spec is kept: a null where it has none is refused at its row), and so may a fixed
    length found in the data (fixed [n] stored and variable now: every row must have n values;
    variable stored: kept). Labels and defaults given for this write must match the stored ones.
    """
    checks = [("compression", old.get("compression"), opts.compression),
              ("recordType", old.get("record_type"), opts.record_type),
              ("partitionBy", old.get("partition_by", []), list(opts.partition_by))]
    for name, was, now in checks:
        if was != now:
            raise OptionError(f"cannot append: the data set at {opts.path!r} has {name}={was!r} "
                              f"but this write has {now!r}; use the same {name} or overwrite")
    if spec is None or old.get("spec") is None:
        if (spec is None) != (old.get("spec") is None):
            raise SchemaError(f"cannot append to {opts.path!r}: its feature spec differs from "
                              f"this DataFrame's (the data set has no spec); write to a new path "
                              f"or overwrite")
        return spec
    stored = FeatureSpec.from_dict(old["spec"])
    diff = _spec_diff(stored, spec, labels=bool(opts.label_cols),
                      defaults=set(opts.defaults or {}))
    if diff:
        raise SchemaError(f"cannot append to {opts.path!r}: its feature spec differs from this "
                          f"DataFrame's ({diff}); cast the columns to the data set's types, "
                          f"write to a new path or overwrite")
    return stored


_SAME = ("path", "dtype", "encoding", "source_type")  # must match for an append


def _spec_diff(stored: FeatureSpec, new: FeatureSpec, labels: bool, defaults: set[str]) -> str:
    """What keeps `new` rows from being appended under `stored` ("" when nothing does)."""
    was = {f.name: f for f in stored.features}
    now = {f.name: f for f in new.features}
    parts = []
    if sorted(set(now) - set(was)):
        parts.append(f"new: {sorted(set(now) - set(was))}")
    if sorted(set(was) - set(now)):
        parts.append(f"missing: {sorted(set(was) - set(now))}")
    changed = []
    for name in sorted(set(was) & set(now)):
        a, b = was[name], now[name]
        fields = [k for k in _SAME if getattr(a, k) != getattr(b, k)]
        both_fixed = a.kind == b.kind == "fixed"
        if (a.kind != b.kind and "varlen" not in (a.kind, b.kind)) or \
                (both_fixed and a.shape != b.shape):
            fields.append(f"shape {list(a.shape) if a.kind == 'fixed' else a.kind} -> "
                          f"{list(b.shape) if b.kind == 'fixed' else b.kind}")
        if labels and a.label != b.label:
            fields.append("label")
        if name in defaults and a.default != b.default:
            fields.append("default")
        if fields:
            changed.append(f"{name} ({', '.join(fields)})")
    if changed:
        parts.append(f"changed: {', '.join(changed)}")
    return "; ".join(parts)


@dataclass
class TfrecordWriter(DataSourceArrowWriter):
    """Pickled to executors: only plain data here; files and encoders are made in write()."""

    uri: str
    mode: str
    skip: bool
    write_id: str
    base_write: str | None
    spec: FeatureSpec | None
    opts: WriteOptions
    keep: list[str]
    schema: dict[str, Any] | None = None
    created: bool = False  # the output directory did not exist before this write
    replaces: list[str] = field(default_factory=list)  # overwrite: write ids it sweeps
    splits: list[str] = field(default_factory=list)  # declared: a manifest each, rows or not

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        """On an executor: encode and frame one task's Arrow batches into its own part files.

        Files are named by task attempt and write id, so a retried or failed attempt never clobbers
        another's; on failure this attempt's files are removed before the error propagates.
        """
        from pyspark import TaskContext

        from tfspark.arrow.encode import BatchEncoder
        from tfspark.arrow.encode_block import BlockEncoder
        from tfspark.store.part_files import TaskFiles, batches_by_group

        ctx = TaskContext.get()
        task = f"{ctx.partitionId():05d}-{ctx.taskAttemptId()}" if ctx else "00000-0"
        if self.skip:
            for _ in iterator:
                pass
            return TaskCommit(self.write_id, task)
        block = self.opts.rows_per_record
        encoder = None if self.spec is None else BatchEncoder(
            self.spec, null_elements=self.opts.null_elements) if block == 1 else BlockEncoder(
            self.spec, block, null_elements=self.opts.null_elements)
        loc = locate(self.uri)
        files = TaskFiles(loc, self.write_id, task, self.opts.compression,
                          self.opts.gzip_level, self.opts.record_type,
                          self.opts.max_records_per_file, encoder,
                          max_bytes=self.opts.max_bytes_per_file, rows_per_record=block)
        guard = TaskGuard(loc, self.write_id, task)
        stats = None
        if self.opts.task_stats and self.spec is not None:
            from tfspark.store.stats_partial import PartialStats

            stats = PartialStats(self.spec, self.opts.stats_top_k,
                                 seed=ctx.taskAttemptId() if ctx else 0)
        try:
            guard.start()
            for split, part, batch, numbers in batches_by_group(
                    iterator, self.opts.split_column, list(self.opts.partition_by), self.keep):
                files.write_group(split, part, batch, numbers)
                if stats is not None:
                    stats.add(split, batch)
                guard.check()
            done = files.close()
            guard.finish()
            return TaskCommit(self.write_id, task, done,
                              stats.result() if stats is not None else None)
        except BaseException:
            files.discard()  # before deregistering: abort waits on the registration
            guard.release()
            raise

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Spark's commit: commit_manifest."""
        self.commit_manifest(messages)

    def commit_manifest(self, messages: list[WriterCommitMessage | None]
                        ) -> dict[str, Any] | None:
        """On the driver, after every task succeeded: write the manifest (the commit point), then
        sweep files of failed attempts and, on overwrite, the old data set's. Returns the
        manifest this write committed (None for mode 'ignore' on an existing path).

        Raises WriteConflictError when another write committed to the path since the version
        this write started from (any mode); the check and the manifest write hold the commit
        lock.
        """
        if self.skip:
            log.info("tfspark: %s exists; mode 'ignore' wrote nothing", self.uri)
            return None
        loc = locate(self.uri)
        files = [f for m in messages if isinstance(m, TaskCommit) for f in m.files]
        try:
            with commit_lock(loc, self.write_id):  # check and write as one step
                old = existing_manifest(loc, self.mode)
                if last_write(old) != self.base_write:  # a write committed since planning
                    raise WriteConflictError(conflict_message(self.uri, self.mode))
                manifest = old if (self.mode == "append" and old is not None) else \
                    mf.new_manifest(spec=self.spec.to_dict() if self.spec else None,
                                    compression=self.opts.compression,
                                    record_type=self.opts.record_type,
                                    partition_by=self.opts.partition_by,
                                    rows_per_record=self.opts.rows_per_record)
                manifest["splits"] = sorted(set(manifest["splits"]) | set(self.splits))
                mf.add_files(manifest, sorted(files, key=lambda f: f["path"]), self.write_id)
                if self.schema is not None:
                    manifest["schema"] = self.schema
                if self.opts.stats is not None:
                    manifest["stats"] = dict(self.opts.stats)
                if self.opts.task_stats and self.spec is not None:
                    manifest["stats"] = self._task_stats(messages, appended=old is not None
                                                         and self.mode == "append")
                if self.opts.backup_entry is not None:
                    manifest["backup"] = dict(self.opts.backup_entry)
                elif manifest.get("backup"):  # appended without a backup: it misses rows now
                    manifest["backup"] = dict(manifest["backup"], complete=False)
                mf.write_manifest(loc, manifest)
        except BaseException:
            self._remove_ours(loc)
            raise
        self._sweep(loc, manifest)
        return manifest

    def _task_stats(self, messages: list[WriterCommitMessage | None],
                    appended: bool) -> dict[str, Any]:
        """featureStats: the tasks' statistics merged (of this write's rows only)."""
        from tfspark.store.stats_partial import merge

        assert self.spec is not None
        parts = [m.stats for m in messages if isinstance(m, TaskCommit) and m.stats]
        out = merge(parts, self.spec, self.opts.stats_top_k, self.opts.split_column)
        if appended:
            out["features_scope"] = "last write"
        return out

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """On the driver, after a failed job: stop the tasks still running (Spark does not
        wait for them), then remove every file this write id produced."""
        if self.skip:
            return
        loc = locate(self.uri)
        if loc.exists():
            wait_for_tasks(loc, self.write_id)
        self._remove_ours(loc)

    def _remove_ours(self, loc: Location) -> None:
        left = False
        markers = set(task_markers(loc, self.write_id))
        for rel in loc.list_files():
            if (self.write_id in rel and PART_FILE.search(rel)) or rel in markers:
                loc.delete(rel)
            else:
                left = True
        if self.created and not left:  # nothing else there: take back the directory we made
            loc.delete_all()

    def _sweep(self, loc: Location, manifest: dict[str, Any]) -> None:
        """After commit: drop failed attempts' files, and on overwrite those of the writes it
        replaces (the old data set, leftovers there when it was planned; files of no tfspark
        write too), never those of a write begun since, which commits or cleans up itself."""
        keep = {f["path"] for f in manifest["files"]}
        for rel in loc.list_files(recursive=False):  # tasks killed without deregistering
            wid = marker_write_id(rel)
            if wid == self.write_id or (self.mode == "overwrite" and wid in self.replaces):
                loc.delete(rel)
        for rel in loc.list_files():
            if rel in keep or not PART_FILE.search(rel):
                continue
            wid = write_id_of(rel)
            if self.write_id in rel or (self.mode == "overwrite" and
                                        (wid is None or wid in self.replaces)):
                loc.delete(rel)
        if self.mode == "overwrite":
            splits = set(manifest.get("splits", []))
            for rel in loc.list_files():
                top = rel.split("/")[0]
                if rel.endswith("/" + mf.NAME) and top not in splits and "=" not in top:
                    loc.delete(rel)
