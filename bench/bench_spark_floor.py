"""What Spark's Python paths cost before tfspark does anything: the floor under the block
layout's Spark write and read (docs/benchmarks.md, "Block layout"). local[2], 5M rows of the
standard table, each measured after one warm-up run:

  parquet write               df.write.parquet
  rows to Python              df.mapInArrow(count the rows)      the JVM -> Python transfer alone
  tfrecord blocks write       df.write.format("tfrecord").option("rowsPerRecord", 1024)
  parquet read                spark.read.parquet -> noop
  parquet via Python          spark.read.parquet -> mapInArrow(identity) -> noop
  tfrecord blocks read        spark.read.format("tfrecord") -> noop

    python bench/bench_spark_floor.py --rows 5000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import local_spark, machine, spark_table  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    import pyarrow as pa

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=5_000_000)
    args = p.parse_args(argv)
    print(machine())
    spark = local_spark("tfspark-bench-floor")
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-floor-")
    spark_table(spark, args.rows).write.parquet(tmp + "/src")
    df = spark.read.parquet(tmp + "/src")

    def count(batches):
        n = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict({"n": [n]})

    def noop(reader):
        reader.write.format("noop").mode("overwrite").save()

    runs = {
        "parquet write": lambda: df.write.mode("overwrite").parquet(tmp + "/p"),
        "rows to Python": lambda: df.mapInArrow(count, "n long").collect(),
        "tfrecord blocks write": lambda: df.write.format("tfrecord").mode("overwrite")
        .option("rowsPerRecord", 1024).save(tmp + "/b"),
        "parquet read": lambda: noop(spark.read.parquet(tmp + "/p")),
        "parquet via Python": lambda: noop(spark.read.parquet(tmp + "/p").mapInArrow(
            lambda it: it, df.schema)),
        "tfrecord blocks read": lambda: noop(spark.read.format("tfrecord").load(tmp + "/b")),
    }
    for name, fn in runs.items():
        fn()  # warm-up
        t = time.perf_counter()
        fn()
        print(f"{name:<24} {time.perf_counter() - t:6.2f} s")
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
