"""A failed job is aborted while other tasks of it may still be writing: Spark cancels them
without waiting. These tests run the data source's writer and abort (the code Spark calls on
executors and on the driver) in two threads on real files, with the timing a loaded cluster can
produce: the abort lands while a task is between two batches, or just after its last file
closed. Nothing of the failed write may be left."""

from __future__ import annotations

import os
import threading
import time

import pyarrow as pa
import pytest

from tfspark.spark.write import TfrecordWriter, plan_write
from tfspark.store.commit import WriteAborted
from tfspark.store.options import WriteOptions

pytestmark = [pytest.mark.spark]


def _writer(path: str) -> TfrecordWriter:
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField("id", LongType(), False)])
    return plan_write(WriteOptions.from_arguments(path), schema, overwrite=True)


def _batch(lo: int, hi: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": pa.array(range(lo, hi), pa.int64())})


def _files(path: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), path)
                  for d, _, names in os.walk(path) for n in names)


def _aborted(path: str) -> bool:
    return any(n.startswith("_tfspark.aborted-") for n in os.listdir(path))


def test_abort_stops_a_task_between_batches_and_removes_its_files(tmp_path):
    path = str(tmp_path / "out")
    writer = _writer(path)
    outcome: dict[str, object] = {}

    def batches():
        yield _batch(0, 100)
        deadline = time.monotonic() + 30  # the task is mid-write when the job fails
        while not _aborted(path) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.1)  # past the task's check interval: the next check looks again
        yield _batch(100, 200)
        yield _batch(200, 300)

    def task():
        try:
            outcome["result"] = writer.write(batches())
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            outcome["error"] = e

    t = threading.Thread(target=task)
    t.start()
    deadline = time.monotonic() + 30
    while not [n for n in _files(path) if n.startswith("part-")]:
        assert time.monotonic() < deadline, "the task never opened a file"
        time.sleep(0.01)
    writer.abort([None])  # returns only when the task has stopped
    assert not t.is_alive()
    t.join()
    assert isinstance(outcome.get("error"), WriteAborted), outcome
    assert not os.path.exists(path), _files(path)  # it made the directory: gone again


def test_abort_after_a_task_closed_its_files_removes_them(tmp_path):
    """The task finished writing but had not returned when the job failed."""
    path = str(tmp_path / "out")
    os.makedirs(path)
    (tmp_path / "out" / "keep.txt").write_text("not ours")
    writer = _writer(path)
    result = writer.write(iter([_batch(0, 100)]))  # done: deregistered, files closed
    assert [f["records"] for f in result.files] == [100]
    writer.abort([None])
    assert _files(path) == ["keep.txt"]  # the directory was there before: only ours removed


def test_a_task_starting_after_the_abort_marker_writes_nothing(tmp_path):
    path = str(tmp_path / "out")
    os.makedirs(path)
    writer = _writer(path)
    open(os.path.join(path, f"_tfspark.aborted-{writer.write_id}"), "w").close()
    with pytest.raises(WriteAborted):
        writer.write(iter([_batch(0, 100)]))
    assert _files(path) == [f"_tfspark.aborted-{writer.write_id}"]
    writer.abort([None])
    assert _files(path) == []
