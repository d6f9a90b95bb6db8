"""What train_on_spark's driver says when the barrier stage failed for good: the failed worker's
own lines out of Spark's error text, not the JVM stack trace."""

from __future__ import annotations

import sys

import pytest

from tfspark.spark.distributed import _worker_error

SPARK_TEXT = """An error occurred while calling o123.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 3.0 failed
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/tfspark/spark/distributed.py", line 180, in run
    raise RuntimeError(tail)
RuntimeError: tfspark training worker 1 killed by signal 9
its last output lines:
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


@pytest.mark.parametrize("module", ["tfspark.tf.worker", "tfspark.keras.jax_worker"])
def test_a_training_process_whose_task_is_already_gone_ends_itself(tmp_path, module):
    # The task's process was killed before the training process started its watch: it has
    # another parent already, and must still end (not wait for its peers for ever).
    import os
    import pickle
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    job = tmp_path / "job.pkl"
    job.write_bytes(pickle.dumps({}))
    env = {**os.environ, "TFSPARK_TASK_PID": str(gone.pid)}
    done = subprocess.run([sys.executable, "-m", module, str(job),
                           str(tmp_path / "result.pkl")], env=env, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 70, done.stderr[-2000:]


def test_a_jax_worker_without_jax_says_what_to_install(tmp_path):
    import subprocess
    import sys

    code = ("import sys; sys.modules['jax'] = None; from tfspark.keras import jax_worker; "
            "sys.exit(jax_worker.main(['job.pkl', 'result.pkl']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == ("error: train_on_spark(backend='jax') needs jax, which is not "
                                   "installed: pip install 'pyspark-tfrecord[jax]' on every "
                                   "executor")


def test_the_relayed_lines_say_which_worker_wrote_them(tmp_path, capfd):
    """Every worker writes to the executor's stderr (in local mode, the one terminal): lines
    without tfspark's own tag get the worker's; the worker's log file keeps them as written."""
    import sys

    from tfspark.spark.distributed import _run_worker

    script = "print('[tfspark worker 1/2 task 7] started'); print('Epoch 1/2')"
    assert _run_worker([sys.executable, "-c", script], {}, str(tmp_path), 1) is None
    assert capfd.readouterr().err.splitlines() == ["[tfspark worker 1/2 task 7] started",
                                                    "[tfspark worker 1] Epoch 1/2"]
    assert (tmp_path / "logs" / "worker-1.log").read_text().splitlines() == [
        "[tfspark worker 1/2 task 7] started", "Epoch 1/2"]


def test_a_failed_worker_names_its_exception_on_the_first_line(tmp_path, capfd):
    """The first line is all a command line shows of the error: it carries the exception."""
    import sys

    from tfspark.spark.distributed import _run_worker

    script = "print('Epoch 1/2'); raise ValueError(\"column 'age' is not in the data set\")"
    text = _run_worker([sys.executable, "-c", script], {}, str(tmp_path), 1)
    assert text is not None
    assert text.splitlines()[0] == ("tfspark training worker 1 exited with status 1 (ValueError: "
                                    "column 'age' is not in the data set)")
    assert text.splitlines()[1] == "its last output lines:"
    assert "Epoch 1/2" in text and "Traceback (most recent call last)" in text
    script = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    text = _run_worker([sys.executable, "-c", script], {}, str(tmp_path), 0)
    assert text is not None
    assert text.splitlines()[0] == "tfspark training worker 0 killed by signal 9"


def test_a_training_process_writes_a_warning_as_one_line(tmp_path):
    """Python's own form adds the warning's source line, which on the driver's terminal reads
    as a stray line of the worker's ('[tfspark worker 0]   return read_batches(')."""
    import os
    import pickle
    import subprocess
    import sys

    (tmp_path / "job.pkl").write_bytes(pickle.dumps({}))
    code = ("import warnings\nfrom tfspark.keras.worker import read_job\n"
            "read_job(['job.pkl', 'result.pkl'], 'tfspark.keras.jax_worker')\n"
            "warnings.warn('even_shards: worker 0 of 2 reads 9 of its 10 rows')\n")
    env = {**os.environ, "TFSPARK_TASK_PID": str(os.getpid())}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ("UserWarning: even_shards: worker 0 of 2 reads 9 of its 10 rows "
                           "(<string>:4)\n")


def test_workers_on_one_host_are_given_distinct_ports():
    """Each worker's port is held until every worker has sent its address: two on one host
    never get the same one (they did, the first's let go at once: the second's training
    process could not start its server, and the first waited for it)."""
    from tfspark.spark.distributed import _reserved_port

    with _reserved_port("127.0.0.1") as a, _reserved_port("127.0.0.1") as b:
        assert a != b
        import socket

        with socket.socket() as s, pytest.raises(OSError):  # held: no one else binds it
            s.bind(("127.0.0.1", a))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal")
def test_a_training_process_blocked_in_native_code_ends_with_its_task(tmp_path):
    """A training process stuck in native code that holds the GIL (TensorFlow's strategy
    waiting for a worker that never started) ends when its task's process is killed: its
    watching thread never ran there, and such a process stayed for good."""
    import os
    import signal
    import subprocess
    import time

    child = ("import re, sys; from tfspark.keras.worker import exit_with_parent; "
             "exit_with_parent(); print('blocked', flush=True); "
             "re.match(r'(a+)+$', 'a' * 64 + 'b')")  # minutes in C, the GIL held
    parent = ("import subprocess, sys, time; "
              f"p = subprocess.Popen([sys.executable, '-c', {child!r}]); "
              "print(p.pid, flush=True); time.sleep(600)")
    task = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(task.stdout.readline())
        assert task.stdout.readline().strip() == "blocked"
        time.sleep(0.5)  # (into the regular expression)
        os.kill(task.pid, signal.SIGKILL)
        task.wait()
        for _ in range(100):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":  # ended, not yet reaped
                        break
            except FileNotFoundError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the training process outlived its task's process")
    finally:
        task.kill()
