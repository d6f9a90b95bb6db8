"""write_tfrecords' TFRecord stage without Spark's data-source machinery: the data source's own
plan, task writer and commit (write.py), driven from the driver.

Spark runs a Python data source's planning and its commit in Python processes of their own, a
fresh one of each per session: over two seconds on the first write. Here the plan and the
commit run in the driver's process, and the tasks in Spark's ordinary (reused) Python workers
through mapInArrow; each task hands back its TaskCommit as one row. What is written, the
commit protocol (unique names per task attempt, the manifest as the commit, abort and sweep)
and the errors are the data source's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame

from tfspark.options import WriteOptions
from tfspark.spark.write import TaskCommit, plan_write

log = logging.getLogger("tfspark")


def warm_workers(spark: Any) -> threading.Thread:
    """Start Spark's Python workers, with tfspark's encoder and its compiled kernels loaded, in
    a background thread (while the backup is written): the first write then finds them ready.
    A failure here costs nothing: the write starts its workers itself."""
    def warm() -> None:
        from tfspark.arrow.encode import warm_up

        jvm = getattr(spark, "_jsparkSession", None)
        if jvm is not None:  # Spark looks up the session per thread
            spark._jvm.SparkSession.setActiveSession(jvm)
        try:  # one worker: more would take the cores the backup's write is using
            spark.range(0, 1, numPartitions=1).mapInArrow(_load_kernels, "id long").collect()
        except Exception as e:  # noqa: BLE001 - only a head start
            log.debug("tfspark: warming the Python workers failed: %s", e)
        warm_up()  # then the driver's: it encodes a sample to size the files

    thread = threading.Thread(target=warm, name="tfspark-warm-workers", daemon=True)
    thread.start()
    return thread


def _load_kernels(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from tfspark.arrow.encode import warm_up

    warm_up()
    yield from batches


def write_through_tasks(df: DataFrame, opts: WriteOptions, overwrite: bool) -> None:
    """Write df as the data source would with these options (append unless overwrite)."""
    writer = plan_write(opts, df.schema, overwrite)

    names = df.columns

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        done = writer.write(b.rename_columns(names) for b in batches)
        yield pa.RecordBatch.from_pylist([{"commit": json.dumps(dataclasses.asdict(done))}])

    # mapInArrow looks its input columns up by name, and a name like "a.b" is taken for a
    # struct field: plain positional names go in, the task puts the real ones back.
    plain = df.toDF(*[f"_{i}" for i in range(len(names))])
    try:
        rows = plain.mapInArrow(task, "commit string").collect()
        messages: list[Any] = [TaskCommit(**json.loads(r["commit"])) for r in rows]
    except BaseException:
        writer.abort([])
        raise
    writer.commit(messages)
