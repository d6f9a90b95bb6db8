"""The data source's write: planned on the driver (`plan_write`: everything checked before a
task runs: mode and the version of the path it starts from, placement, partition and split
columns, the spec, and for an append that the rows fit the data set), then the write of a data
set (tfspark.store.write) run by Spark as the TfrecordWriter, pickled to the executors, whose
tasks stream their Arrow batches into their own part files; Spark calls commit() on the driver
when every task succeeded, abort() when the job failed. write_tfrecords plans the same writer
with its Workflow (spark.tasks).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StructType

from tfspark.errors import OptionError, SchemaError, WriteConflictError, scrubbed
from tfspark.spark.versions import DataSourceArrowWriter, WriterCommitMessage
from tfspark.spec import FeatureSpec, infer_spec
from tfspark.spec.layout import check_block_keys
from tfspark.store import write as data_set_write
from tfspark.store.commit import (
    StartedFrom,
    conflict_message,
    existing_manifest,
    last_write,
    new_write_id,
)
from tfspark.store.fs import Location, locate
from tfspark.store.manifest import BackupEntry
from tfspark.store.options import WriteOptions
from tfspark.store.placement import check_placement
from tfspark.store.uris import redact
from tfspark.store.write import check_append, refuse_label_partitions, replaced_writes


@dataclass
class TaskCommit(data_set_write.TaskCommit, WriterCommitMessage):
    """A task's report, as Spark's data source takes it (a WriterCommitMessage)."""


@dataclass
class TfrecordWriter(data_set_write.DataSetWrite, DataSourceArrowWriter):
    """The write, as Spark's data source runs it: each task named by its partition and
    attempt (attempt ids are unique within the Spark application; the write id keeps
    applications apart)."""

    commit_class = TaskCommit

    @scrubbed
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        """On an executor: write_task for this task attempt."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task = f"{ctx.partitionId():05d}-{ctx.taskAttemptId()}" if ctx else "00000-0"
        return self.write_task(iterator, task)  # type: ignore[return-value]

    @scrubbed
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Spark's commit: commit_manifest."""
        self.commit_manifest(messages)

    @scrubbed
    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Spark's abort, after a failed job: abort_write."""
        self.abort_write()


__all__ = ["PARTITION_TYPES", "Workflow", "check_append", "plan_write", "refuse_label_partitions"]

log = logging.getLogger("tfspark")
PARTITION_TYPES = ("string", "int", "bigint", "smallint", "tinyint", "boolean", "date")


@dataclass(frozen=True)
class Workflow:
    """What write_tfrecords hands the writer besides its settings: the save `mode` (all four),
    the version of the path it `started_from` (its commit checks it), its `write_id`, the spec
    it inferred, the column naming each row's split and the `splits` it declares (each gets a
    manifest, rows or not), and the manifest's statistics and backup entry."""

    mode: str
    started_from: StartedFrom
    write_id: str
    spec: FeatureSpec
    split_column: str | None = None
    splits: tuple[str, ...] = ()
    manifest_stats: dict[str, Any] | None = None
    backup_entry: BackupEntry | None = None
    count_nulls: tuple[str, ...] = ()  # features whose nulls the tasks count (see TaskCommit)
    home: Location | None = None  # the output, on its filesystem (write_tfrecords'
    # filesystem=); None: located from the path
    created: bool | None = None  # whether this write made the output's directory; None: look
    copy_to: Location | None = None  # one pass: the tasks write the parquet copy here too


def plan_write(opts: WriteOptions, schema: StructType, overwrite: bool,
               workflow: Workflow | None = None) -> TfrecordWriter:
    """Everything that can be checked on the driver, before a task runs.

    The data source passes Spark's save mode (`overwrite`) and its options (`mode` among
    them); the write starts from the path as it is now. write_tfrecords passes its Workflow.
    """
    if workflow is not None:
        mode, split_column = workflow.mode, workflow.split_column
    else:
        mode, split_column = "overwrite" if overwrite else (opts.mode or "append"), None
        if overwrite and opts.mode not in (None, "overwrite"):
            raise OptionError(f"option mode={opts.mode!r} contradicts Spark's "
                              f".mode('overwrite'); drop one of them")
    loc = workflow.home if workflow is not None and workflow.home is not None else \
        locate(opts.path)
    skip = False
    old = existing_manifest(loc, mode)
    if workflow is None:  # the data source: the path as it is now
        if mode == "errorifexists" and not loc.is_empty():
            raise OptionError(f"output path {redact(opts.path)!r} already exists and is not "
                              f"empty; use mode 'overwrite' to replace it, 'append' to add to "
                              f"it, or another path")
        skip = mode == "ignore" and not loc.is_empty()
        base = StartedFrom(last_write(old))
    elif workflow.started_from.write_id != last_write(old):  # committed to since it began
        raise WriteConflictError(conflict_message(redact(opts.path), mode))
    else:
        base = workflow.started_from
    if not skip and workflow is None:  # (write_tfrecords checked it before the backup)
        check_placement(loc, mode)
    created = workflow.created if workflow is not None and workflow.created is not None \
        else not loc.exists()  # abort removes the directory again when it made it
    names = schema.names
    extra_cols = list(opts.partition_by) + ([split_column] if split_column else [])
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
    spec = workflow.spec if workflow is not None else _spec(opts, data_schema)
    if mode == "append" and old is not None:
        spec = check_append(opts, old, spec)
    if spec is not None and opts.rows_per_record > 1:
        check_block_keys(spec.features)
    if not skip and workflow is None:  # last: a refused write leaves no directory behind
        loc.check_writable()  # (write_tfrecords probed its path before the backup)
    # The written schema, partition columns included (the reader restores their types).
    written = StructType([f for f in schema.fields if f.name != split_column]).jsonValue()
    replaces = [] if skip else replaced_writes(loc, mode, old, created)
    given = workflow or Workflow(mode, base, new_write_id(), spec)  # type: ignore[arg-type]
    return TfrecordWriter(uri=opts.path, home=loc, mode=mode, skip=skip, write_id=given.write_id,
                          base_write=base.write_id, spec=spec, opts=opts, keep=keep,
                          schema=written, created=created and not skip, replaces=replaces,
                          split_column=split_column, splits=list(given.splits),
                          manifest_stats=given.manifest_stats,
                          backup_entry=given.backup_entry, count_nulls=list(given.count_nulls),
                          copy_to=given.copy_to)


def _spec(opts: WriteOptions, data_schema: StructType) -> FeatureSpec | None:
    if opts.record_type == "ByteArray":
        fields = data_schema.fields
        if len(fields) != 1 or fields[0].dataType.simpleString() not in ("binary", "string"):
            raise OptionError(f"recordType ByteArray needs exactly one binary column (besides "
                              f"partition columns); got {data_schema.simpleString()}")
        return None
    if opts.spec:
        spec = FeatureSpec.from_json(opts.spec)
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
