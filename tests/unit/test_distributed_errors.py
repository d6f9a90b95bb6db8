"""What train_on_spark's driver says when the barrier stage failed for good: the failed worker's
own lines out of Spark's error text, not the JVM stack trace."""

from __future__ import annotations

from tfspark.spark.distributed import _worker_error

SPARK_TEXT = """An error occurred while calling o123.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 3.0 failed
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/tfspark/spark/distributed.py", line 180, in run
    raise RuntimeError(tail)
RuntimeError: tfspark training worker 1 killed by signal 9; its last output lines:
[tfspark worker 1/2 task 7] started: 2 replicas in sync
Epoch 3/5

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(x)
\tat org.apache.spark.scheduler.Task.run(Task.scala:147)
"""


def test_the_training_workers_lines_without_the_jvm_trace():
    got = _worker_error(SPARK_TEXT)
    assert got.startswith("tfspark training worker 1 killed by signal 9")
    assert got.endswith("Epoch 3/5")
    assert "\tat " not in got


def test_an_error_before_training_gives_the_python_exception_line():
    text = ("An error occurred while calling o9.collectAndServe.\n: ...\n"
            "Traceback (most recent call last):\n  File \"x.py\", line 1, in run\n"
            "ModuleNotFoundError: No module named 'my_notebook_helpers'\n\tat org.apache...\n")
    assert _worker_error(text) == "ModuleNotFoundError: No module named 'my_notebook_helpers'"
    assert _worker_error("") == "unknown error"
    assert _worker_error("something odd\nmore") == "something odd"
