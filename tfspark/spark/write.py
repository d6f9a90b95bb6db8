"""The data source's writer: the write of a data set (tfspark.store.write) run by Spark.

Planned on the driver (spark.write_plan), pickled to the executors, whose tasks stream their Arrow
batches into their own part files; Spark calls commit() on the driver when every task
succeeded, abort() when the job failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from tfspark.errors import scrubbed
from tfspark.spark.versions import DataSourceArrowWriter, WriterCommitMessage
from tfspark.store import write as data_set_write


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
