"""The statistics' Spark jobs alone (tfspark.spark.stats.compute), over the backup of a data
set that tfspark wrote, a few times in one fresh local session: the first call pays the
session's first aggregation jobs (planning, code generation), the later ones not. The splits
are drawn at random (80/20, seeded), so the scalars go through their job (not observed while
a backup is written). To compare two versions of tfspark, alternate runs with each on
PYTHONPATH (a git worktree of the older commit):

    tfspark export --output /tmp/sample_ds --split train=0.8,test=0.2 --label-cols label
    python bench/bench_stats_jobs.py /tmp/sample_ds
    cd /tmp && PYTHONPATH=/tmp/old python /path/to/repo/bench/bench_stats_jobs.py /tmp/sample_ds

(from outside the repository: Spark's Python workers put the driver's working directory first
on their path, so from its root they import the repository's tfspark, not PYTHONPATH's)
"""

from __future__ import annotations

import argparse
import sys
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="a data set tfspark wrote (with its _backup)")
    p.add_argument("--calls", type=int, default=3)
    args = p.parse_args()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[*]")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from tfspark.spark import stats
    from tfspark.store.manifest import read_manifest

    spec = read_manifest(args.path).spec
    df = spark.read.parquet(f"{args.path}/_backup").withColumn(
        "_split", F.when(F.rand(1) < 0.8, "train").otherwise("test"))
    for k in range(args.calls):
        t = time.perf_counter()
        stats.compute(df, spec, "_split", 10_000)
        print(f"call {k + 1}: {time.perf_counter() - t:.2f} s", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
