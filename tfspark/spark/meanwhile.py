"""The session in the threads that use it: made the thread's active session (where Spark
looks Python data sources up), its local Python workers this interpreter; and Spark work in a
thread of its own while the caller starts other Spark work (Meanwhile): two jobs whose fixed
costs (query planning and code generation on the driver, Python workers starting on the
executors) would otherwise come one after the other."""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger("tfspark")
T = TypeVar("T")
CANCEL_POLL_S = 0.2  # cancel(): how often it stops the jobs the thread has started since


def make_active(spark: Any) -> None:
    """Make spark the active session of the calling thread's JVM thread, where Spark looks
    Python sources up (Spark Connect sessions have no JVM here); on a local master, its Python
    workers run this interpreter (same_python)."""
    jvm_session = getattr(spark, "_jsparkSession", None)
    if jvm_session is not None:
        spark._jvm.SparkSession.setActiveSession(jvm_session)
        same_python(spark)


def same_python(spark: Any) -> None:
    """On a local master Spark's Python workers run PYSPARK_PYTHON, else `python3` on PATH,
    which in a virtual environment or a notebook's kernel is often another interpreter, one
    without tfspark ("No module named 'tfspark'" from every task). Where neither PYSPARK_PYTHON
    nor spark.pyspark.python chooses one, the workers of this session's later jobs run this
    process's interpreter (a cluster's executors keep their own)."""
    sc = getattr(spark, "_sc", None)
    if sc is None or os.environ.get("PYSPARK_PYTHON") or \
            not str(sc.master).startswith("local") or \
            sc.getConf().get("spark.pyspark.python", None):
        return
    current = shutil.which(sc.pythonExec) or sc.pythonExec
    if os.path.realpath(current) != os.path.realpath(sys.executable) or \
            os.path.dirname(current) != os.path.dirname(sys.executable):
        log.info("tfspark: Spark's local Python workers run %s (this process's Python) "
                 "instead of %s; set PYSPARK_PYTHON to choose another", sys.executable,
                 sc.pythonExec)
        sc.pythonExec = sys.executable


class Meanwhile(Generic[T]):
    """work() running in a thread that carries the caller's job properties (job group, tags,
    scheduler pool: pyspark's InheritableThread), with `spark` its active session and the
    thread's jobs tagged, so that cancel() can stop them."""

    def __init__(self, spark: Any, work: Callable[[], T], name: str) -> None:
        from pyspark import InheritableThread

        self.spark = spark
        self.tag = f"{name}-{uuid.uuid4().hex[:12]}"
        self._outcome: list[tuple[bool, Any]] = []
        self._cancelled = threading.Event()

        def run() -> None:
            try:
                make_active(spark)
                _tag(spark, self.tag, True)
                if self._cancelled.is_set():
                    raise RuntimeError(f"{name}: cancelled before it started")
                self._outcome.append((True, work()))
            except BaseException as e:  # noqa: BLE001 - raised by result()
                self._outcome.append((False, e))
            finally:  # the JVM thread may serve another Python thread later
                _tag(spark, self.tag, False)

        # the session is for Spark Connect's tags; classic PySpark 3.5 refuses the argument
        remote = {"session": spark} if _context(spark) is None else {}
        self._thread = InheritableThread(run, name=name, daemon=True, **remote)
        self._thread.start()

    def result(self) -> T:
        """Wait for work() and return what it returned, or raise its error."""
        self._thread.join()
        ok, value = self._outcome[0]
        if not ok:
            raise value
        return value

    def cancel(self) -> None:
        """Stop the thread's Spark jobs (the caller failed: they are of no use now) and wait
        for the thread to end; its outcome is not asked for. A job the thread starts after
        the first try is stopped by the next (a cancel finds only jobs already running)."""
        self._cancelled.set()
        while self._thread.is_alive():
            try:
                sc = _context(self.spark)
                if sc is not None and hasattr(sc, "cancelJobsWithTag"):
                    sc.cancelJobsWithTag(self.tag)
                else:  # Spark Connect
                    self.spark.interruptTag(self.tag)
            except Exception:  # noqa: BLE001 - cannot cancel: the jobs run to their end
                self._thread.join()
            self._thread.join(CANCEL_POLL_S)


def _context(spark: Any) -> Any:
    """The session's SparkContext; None on Spark Connect (it has none here)."""
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect raises for it
        return None


def _tag(spark: Any, tag: str, on: bool) -> None:
    """Tag the jobs this thread starts, or (on=False) no longer (classic: a job tag; Spark
    Connect: an operation tag)."""
    sc = _context(spark)
    try:
        if sc is not None and hasattr(sc, "addJobTag"):
            (sc.addJobTag if on else sc.removeJobTag)(tag)
        elif hasattr(spark, "addTag"):
            (spark.addTag if on else spark.removeTag)(tag)
    except Exception:  # noqa: BLE001, S110 - untagged, the jobs only cannot be cancelled
        pass
