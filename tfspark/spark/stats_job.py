"""write_tfrecords' feature statistics as a job beside the TFRecords' write: on a small write
both are mostly Spark's fixed costs (job start, code generation, shuffle set-up), which overlap
(docs/benchmarks.md, first write)."""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import DataFrame

from tfspark import progress
from tfspark.spark import stats as spark_stats
from tfspark.spec import FeatureSpec


class StatsJob:
    """spark_stats.compute of the rows being written, in a thread of its own (pyspark gives it
    a JVM thread of its own); result() waits for it and re-raises its error; cancel() stops
    its Spark jobs (the write failed: its statistics are not wanted)."""

    def __init__(self, df: DataFrame, spec: FeatureSpec, split_col: str | None, top_k: int,
                 rows: int):
        from pyspark import InheritableThread

        self._out: dict[str, Any] = {}
        self._session = df.sparkSession
        self._group = f"tfspark-statistics-{id(self)}"

        def run() -> None:
            started = time.perf_counter()
            try:
                self._mark(start=True)
                with progress.stage("statistics", f"{len(spec.features)} features") as done:
                    stats = spark_stats.compute(df, spec, split_col, top_k)
                    done.rows = rows
                stats["stats_seconds"] = round(time.perf_counter() - started, 3)
                self._out["stats"] = stats
            except BaseException as e:  # noqa: BLE001 - re-raised by result()
                self._out["error"] = e

        self._thread = InheritableThread(target=run, name="tfspark-statistics", daemon=True)
        self._thread.start()

    def _mark(self, start: bool) -> None:
        """start: tag this thread's jobs; else cancel the jobs so tagged (a classic session's
        job group, a Connect session's tag)."""
        try:
            sc = self._session.sparkContext
        except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
            sc = None
        if sc is not None:
            if start:
                sc.setJobGroup(self._group, "tfspark: feature statistics", True)
            else:
                sc.cancelJobGroup(self._group)
        elif start:
            self._session.addTag(self._group)
        else:
            self._session.interruptTag(self._group)

    def result(self) -> dict[str, Any]:
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return dict(self._out["stats"])

    def cancel(self) -> None:
        if self._thread.is_alive():
            self._mark(start=False)
        self._thread.join()
