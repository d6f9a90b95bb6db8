"""Shared bits of the benchmarks: the standard 10-column table, timing, one-core pinning."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

WORDS = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])


def table(rows: int, seed: int = 0) -> pa.Table:
    """rows x 10 columns: 5 float64, 3 int64, 2 short strings (the benchmark issues' table)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, pa.Array] = {}
    for i in range(5):
        cols[f"f{i}"] = pa.array(rng.standard_normal(rows))
    for i in range(3):
        cols[f"i{i}"] = pa.array(rng.integers(-10**6, 10**6, rows))
    for i in range(2):
        cols[f"s{i}"] = pa.array(WORDS[rng.integers(0, len(WORDS), rows)])
    return pa.table(cols)


def spark_schema():
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(f"f{i}", T.DoubleType()) for i in range(5)]
        + [T.StructField(f"i{i}", T.LongType()) for i in range(3)]
        + [T.StructField(f"s{i}", T.StringType()) for i in range(2)])


def times_of(fn: Callable[[], object], repeat: int) -> list[float]:
    """Seconds of each of `repeat` calls of fn."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def best_of(fn: Callable[[], object], repeat: int) -> float:
    return min(times_of(fn, repeat))


def median_of(fn: Callable[[], object], repeat: int) -> float:
    return statistics.median(times_of(fn, repeat))


def pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        return "pinned to one core"
    return "not pinned (no sched_setaffinity)"


def machine() -> str:
    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.1f} at start")


def rows_args(doc: str, repeat: int = 3) -> argparse.ArgumentParser:
    """A bench's parser (its docstring's first paragraph as description) with the options
    most benches take: --rows (default 2,000,000), --repeat and --json (where to save)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--json")
    return ap


def save_json(path: str | None, doc: dict) -> None:
    if path:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)  # bench/results/ is ignored
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)


RESULT = "RESULT "  # the line a benchmark's child process prints its figures on, as JSON


def child_result(argv: list[str], env: dict, timeout: float
                 ) -> tuple[dict | None, subprocess.CompletedProcess]:
    """Run a benchmark's child process; the figures of its RESULT line (None: it printed
    none), and the finished process (its exit status, the end of its stderr for a failure)."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(RESULT)), None)
    return (None if line is None else json.loads(line[len(RESULT):])), done


def local_spark(app: str):
    """The local[2] session the Spark benchmarks share, with tfspark registered."""
    import sys

    from pyspark.sql import SparkSession

    import tfspark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.pyspark.python", sys.executable)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tfspark.register(spark)
    return spark


def spark_table(spark, rows: int):
    """The benchmark table in Spark: 5 double, 3 long, 2 short strings, 4 partitions."""
    from pyspark.sql import functions as F

    words = F.array(*[F.lit(w) for w in ("alpha", "beta", "gamma", "delta", "epsilon")])
    return spark.range(rows, numPartitions=4).select(
        *[F.randn(i).alias(f"f{i}") for i in range(5)],
        *[(F.rand(10 + i) * 2e6 - 1e6).cast("long").alias(f"i{i}") for i in range(3)],
        *[F.element_at(words, (F.rand(20 + i) * 5).cast("int") + 1).alias(f"s{i}")
          for i in range(2)])


def local_cluster_module():
    """scripts/local_cluster.py (the loopback standalone cluster), loaded by path: no package."""
    import importlib.util
    import sys
    from pathlib import Path

    if "local_cluster" in sys.modules:
        return sys.modules["local_cluster"]
    path = Path(__file__).resolve().parents[1] / "scripts" / "local_cluster.py"
    spec = importlib.util.spec_from_file_location("local_cluster", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["local_cluster"] = module  # dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module
