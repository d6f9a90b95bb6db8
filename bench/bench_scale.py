"""Scale and memory through a real standalone cluster: write_tfrecords of 1M, 5M, 20M rows.

Starts the loopback cluster of scripts/local_cluster.py (master + 2 workers, one executor of
1 core and 1 GiB each), then for each row count, in a fresh application (new executors, new
Python workers, so peaks do not carry over): exports the 10-column id table
(local_cluster.id_source: every value a function of id) with write_tfrecords into a fresh
directory, then reads it back with spark.read.format("tfrecord") in one streaming pass (count,
id sum/min/max, every column against its function of id; memory sampled), then counts
distinct ids in a second, unsampled job (lost and duplicated rows, exactly).

While each stage runs, a sampler reads /proc every 0.25 s: VmHWM (peak resident set) of each
executor JVM and of each Python process under them (pyspark.daemon and the workers it forks).
The source has a fixed number of partitions, so each task handles 20x more rows at 20M than at
1M: memory that stays flat shows the write streams (nothing collected per task).

    python bench/bench_scale.py --rows 1000000,5000000,20000000 --json bench/results/scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import local_cluster_module, machine, save_json  # noqa: E402


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class MemorySampler(threading.Thread):
    """Peak RSS (VmHWM) per executor JVM and per Python worker, read from /proc."""

    def __init__(self, cluster: Any, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.cluster, self.interval = cluster, interval
        self.peaks: dict[tuple[str, int], int] = {}
        self.python_sum_kb = 0  # largest sum of all Python workers' RSS at one moment
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.interval)

    def sample(self) -> None:
        for pid in self.cluster.executor_pids():
            key = ("executor", pid)
            self.peaks[key] = max(self.peaks.get(key, 0), _status_kb(pid, "VmHWM"))
        now = 0
        for pid in self.cluster.python_workers():
            key = ("python", pid)
            self.peaks[key] = max(self.peaks.get(key, 0), _status_kb(pid, "VmHWM"))
            now += _status_kb(pid, "VmRSS")
        self.python_sum_kb = max(self.python_sum_kb, now)

    def stop(self) -> dict[str, Any]:
        self._done.set()
        self.join()
        self.sample()

        def mib(role: str) -> list[float]:
            return sorted((round(v / 1024, 1) for (r, _), v in self.peaks.items() if r == role),
                          reverse=True)

        return {"executor_peak_mib": mib("executor"), "python_peak_mib": mib("python"),
                "python_sum_peak_mib": round(self.python_sum_kb / 1024, 1)}


def _size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path)
               for n in names)


def _read_back(spark: Any, path: str) -> dict[str, Any]:
    """One streaming pass of spark.read.format("tfrecord") (no shuffle, so executor memory
    reflects the reader, not an aggregation): count, id sum/min/max, and rows whose values are
    not the function of their id. Doubles travel as float32 in tf.train.Example, so x is
    compared with its float32 rounding (id * 0.25 is inexact in float32 from id 2**24 on)."""
    from pyspark.sql import functions as F

    df = spark.read.format("tfrecord").load(path)
    i = F.col("id")
    expected = {
        "i": (i % 1000).cast("int"), "x": (i * 0.25).cast("float").cast("double"),
        "f": ((i % 4096) / 8).cast("float"),
        "s": F.concat(F.lit("r"), i.cast("string")), "flag": i % 3 == 0,
        "day": F.date_add(F.lit("2020-01-01").cast("date"), (i % 365).cast("int")),
        "arr": F.array((i % 7).cast("double"), F.lit(1.5), (i % 11).cast("double")),
        "maybe": F.when(i % 10 == 0, F.lit(None)).otherwise(i * 2), "y": (i % 2).cast("int"),
    }
    bad = F.lit(False)
    for name, value in expected.items():
        bad = bad | ~F.col(name).eqNullSafe(value)
    row = df.agg(F.count("*").alias("n"), F.sum("id").alias("total"),
                 F.min("id").alias("lo"), F.max("id").alias("hi"),
                 F.sum(F.when(bad, 1).otherwise(0)).alias("bad")).first()
    assert row is not None
    return {"rows_read": row["n"], "id_sum": row["total"], "min_id": row["lo"],
            "max_id": row["hi"], "rows_wrong": row["bad"]}


def _distinct_ids(spark: Any, path: str, rows: int) -> dict[str, int]:
    """Lost and duplicated ids, exactly (a shuffle: not part of the memory figures)."""
    from pyspark.sql import functions as F

    df = spark.read.format("tfrecord").load(path)
    row = df.agg(F.count("*").alias("n"), F.count_distinct("id").alias("ids"),
                 F.sum(((F.col("id") < 0) | (F.col("id") >= rows)).cast("int")).alias("out")
                 ).first()
    assert row is not None
    return {"distinct_ids": row["ids"], "lost": rows - row["ids"] + row["out"],
            "duplicated": row["n"] - row["ids"]}


def run_one(launcher: Any, cluster: Any, rows: int, partitions: int, work: Path) -> dict:
    from pyspark.sql import SparkSession

    import tfspark

    builder = SparkSession.builder.appName(f"tfspark-scale-{rows}")
    for key, value in launcher.cluster_conf(cluster, work / f"driver-{rows}").items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        launcher.wait_for_executors(spark, 2)
        tfspark.register(spark)
        out = str(work / f"out-{rows}")
        sampler = MemorySampler(cluster)
        sampler.start()
        started = time.perf_counter()
        result = tfspark.write_tfrecords(launcher.id_source(spark, 0, rows, partitions), out,
                                         label_cols=["y"], mode="overwrite")
        wall = time.perf_counter() - started
        write_mem = sampler.stop()
        sampler = MemorySampler(cluster)
        sampler.start()
        started = time.perf_counter()
        check = _read_back(spark, out)
        read_s = time.perf_counter() - started
        read_mem = sampler.stop()
        check.update(_distinct_ids(spark, out, rows))
        doc = {
            "rows": rows, "partitions": partitions, "write_s": round(wall, 1),
            "stage_s": result.seconds, "rows_per_s": round(rows / wall),
            "tfrecord_files": result.files, "tfrecord_bytes": result.bytes,
            "backup_bytes": _size(os.path.join(out, "_backup")),
            "counts": {"source": result.source_rows, "backup": result.backup_rows,
                       "tfrecords": result.rows},
            "write_memory": write_mem, "read_s": round(read_s, 1), "read_memory": read_mem,
            **check,
        }
        shutil.rmtree(out, ignore_errors=True)
        return doc
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="1000000,5000000,20000000",
                    help="comma-separated row counts, each run in its own application")
    ap.add_argument("--partitions", type=int, default=4,
                    help="source partitions (fixed, so rows per task grow with --rows)")
    ap.add_argument("--workdir", help="where the cluster and outputs live (default: a temp dir)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    launcher = local_cluster_module()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="tfspark-scale-"))
    cluster = launcher.LocalCluster(work / "cluster", workers=2, cores=1, memory="1g")
    started = time.perf_counter()
    cluster.start(timeout=180)
    doc: dict[str, Any] = {"machine": machine(), "command": " ".join(sys.argv),
                           "cluster": "standalone on loopback: master + 2 workers, 1 executor "
                                      "each (1 core, spark.executor.memory=1g)",
                           "cluster_start_s": round(time.perf_counter() - started, 1),
                           "runs": []}
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            load = os.getloadavg()[0]
            run = run_one(launcher, cluster, rows, args.partitions, work)
            run["load_avg_before"] = round(load, 2)
            doc["runs"].append(run)
            print(json.dumps(run), flush=True)
            save_json(args.json, doc)
    finally:
        cluster.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
