"""write_tfrecords' TFRecord stage without Spark's data-source machinery: the data source's own
plan, task writer and commit (spark.write), driven from the driver.

Spark runs a Python data source's planning and its commit in Python processes of their own, a
fresh one of each per session: over two seconds on the first write. Here the plan and the
commit run in the driver's process, and the tasks in Spark's ordinary (reused) Python workers
through mapInArrow; each task hands back its TaskCommit as one row. What is written, the
commit protocol (unique names per task attempt, the manifest as the commit, abort and sweep)
and the errors are the data source's.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from tfspark import progress
from tfspark.errors import CountMismatchError, OptionError, scrubbed
from tfspark.spark.meanwhile import Meanwhile
from tfspark.spark.write import Workflow, plan_write
from tfspark.store.manifest import FileEntry, Manifest
from tfspark.store.options import WriteOptions
from tfspark.store.uris import error_line

log = logging.getLogger("tfspark")


def write_through_tasks(df: DataFrame, opts: WriteOptions, workflow: Workflow,
                        statistics: Meanwhile[dict[str, Any]] | None = None,
                        files: str = "", rows: int | None = None,
                        before_commit: Callable[[Any, list[Any]], None] | None = None
                        ) -> Manifest:
    """Write df as the data source would with these options, as write_tfrecords' `workflow`
    says (WriteConflictError if another write committed since it began); returns the committed
    manifest. statistics: waited for once the tasks are done; what it returns joins the
    manifest's statistics, and when it fails nothing is committed (when the tasks fail, its
    jobs are cancelled). The tasks and the commit are progress stages ("TFRecords", saying
    `files`, and "commit"). rows: the rows df holds; when the tasks' reports add up to
    another number (a report lost on its way back), nothing is committed. The nulls the tasks
    counted (workflow.count_nulls) join the manifest's null counts. before_commit(writer,
    reports): called once every task reported, before the commit (it may complete the
    writer's manifest statistics and backup entry); what it raises aborts the write."""
    writer = plan_write(opts, df.schema, workflow.mode == "overwrite", workflow)

    names = df.columns

    @scrubbed
    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        done = writer.write(b.rename_columns(names) for b in batches)
        yield pa.RecordBatch.from_pylist([{"commit": pickle.dumps(done)}])

    # mapInArrow looks its input columns up by name, and a name like "a.b" is taken for a
    # struct field: plain positional names go in, the task puts the real ones back.
    plain = df.toDF(*[f"_{i}" for i in range(len(names))])
    try:
        with progress.stage("TFRecords", files) as done:
            reports = plain.mapInArrow(task, "commit binary").collect()
            messages: list[Any] = [pickle.loads(r["commit"]) for r in reports]
            written = [FileEntry(**f) for m in messages for f in m.files]
            done.rows = sum(f.row_count for f in written)
            done.detail = (f"{progress.many(len(written), 'file')}, "
                           f"{sum(f.bytes for f in written) / 2**20:,.1f} MiB")
            if rows is not None and done.rows != rows:  # e.g. a collect cut short
                raise CountMismatchError(
                    f"the TFRecord tasks reported {done.rows} rows written of the {rows} "
                    f"staged ({len(messages)} task reports came back); nothing was committed: "
                    f"run the write again")
        if workflow.count_nulls:
            _join_nulls(writer, messages)
        if statistics is not None:
            writer.manifest_stats = {**(writer.manifest_stats or {}), **statistics.result()}
        if before_commit is not None:
            before_commit(writer, messages)
    except BaseException:
        if statistics is not None:  # no job of this write outlives it
            statistics.cancel()
        try:
            writer.abort_write()
        except Exception as e:  # noqa: BLE001 - the write's own error is the one to raise
            log.warning("tfspark: could not remove this failed write's files at %s: %s",
                        writer.home.uri, error_line(e))
        raise
    with progress.stage("commit"):
        manifest = writer.commit_manifest(messages)
    assert manifest is not None  # only mode 'ignore' on an existing path commits nothing
    return manifest


def _join_nulls(writer: Any, messages: list[Any]) -> None:
    """The tasks' null counts (summed) into the manifest's, in the spec's order. (A null in a
    feature stored as not nullable the encoder has refused already, naming its row.)"""
    counted = dict.fromkeys(writer.count_nulls, 0)
    for m in messages:
        for name, n in m.nulls.items():
            counted[name] += n
    stats = dict(writer.manifest_stats or {})
    known = {**stats.get("null_counts", {}), **counted}
    stats["null_counts"] = {f.name: known[f.name] for f in writer.spec.features if f.name in known}
    writer.manifest_stats = stats


def check_sendable(filesystem: Any) -> None:
    """OptionError, before anything is written, when `filesystem` cannot travel to Spark's
    executors (the tasks write through it): as Spark sends a task, with its cloudpickle (an
    fsspec class defined in a notebook goes by value, and fails on the lock it holds)."""
    from pyspark import cloudpickle

    try:
        cloudpickle.dumps(filesystem)
    except Exception as e:  # noqa: BLE001 - what pickling raises varies by object
        raise OptionError(
            f"filesystem= cannot be sent to Spark's executors, which write through it "
            f"({type(e).__name__}: {e}): give a pyarrow filesystem (S3FileSystem, "
            f"GcsFileSystem, AzureFileSystem), or an fsspec filesystem whose class the "
            f"executors import from an installed package (not one defined in a notebook or "
            f"a script)") from None
