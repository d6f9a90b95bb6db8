"""Spark work in a thread of its own while the caller starts other Spark work: two jobs whose
fixed costs (query planning and code generation on the driver, Python workers starting on the
executors) would otherwise come one after the other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def meanwhile(spark: Any, work: Callable[[], T], name: str) -> Callable[[], T]:
    """Start work() in a thread that carries the caller's job properties (job group, tags,
    scheduler pool: pyspark's InheritableThread) with `spark` its active session. The returned
    function waits for it and returns its result or raises its error (each call the same)."""
    from pyspark import InheritableThread

    from tfspark.spark.source import _make_active

    outcome: list[Any] = []

    def run() -> None:
        _make_active(spark)
        try:
            outcome.append((True, work()))
        except BaseException as e:  # noqa: BLE001 - raised by the returned function
            outcome.append((False, e))

    thread = InheritableThread(run, session=spark, name=name, daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    return result
