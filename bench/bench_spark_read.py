"""Spark read benchmark on local[2]: spark.read.format("tfrecord") versus Spark's own parquet.

The same rows (rows x 10 columns: 5 double, 3 long, 2 short strings; 4 files each) are written
once by tfspark (df.write.format("tfrecord")) and once as parquet; then, alternating, each is
read in full and handed to the "noop" sink (every row materialized, nothing written):
  tfrecord   spark.read.format("tfrecord").load(p).write.format("noop")
  parquet    spark.read.parquet(p).write.format("noop")
Reports the best of --repeat runs as rows/s and the ratio to parquet.

    python bench/bench_spark_read.py --rows 1000000 --json bench/results/spark_read.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import local_spark, machine, save_json, spark_table  # noqa: E402


def run(rows: int, repeat: int) -> dict:
    spark = local_spark("tfspark-bench-read")
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-read-")
    src = spark_table(spark, rows)
    paths = {"parquet": os.path.join(tmp, "parquet"), "tfrecord": os.path.join(tmp, "tfr")}
    src.write.parquet(paths["parquet"])  # the same 4 partitions give 4 files each
    src.write.format("tfrecord").mode("overwrite").save(paths["tfrecord"])
    readers = {"tfrecord": lambda: spark.read.format("tfrecord").load(paths["tfrecord"]),
               "parquet": lambda: spark.read.parquet(paths["parquet"])}
    assert readers["tfrecord"]().count() == rows

    def timed(name: str) -> float:
        t = time.perf_counter()
        readers[name]().write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t

    for name in readers:  # warm up: start Python workers, load the compiled kernels
        timed(name)
    times: dict[str, list[float]] = {k: [] for k in readers}
    for _ in range(repeat):
        for name in readers:
            times[name].append(timed(name))
    data = {k: [os.path.join(d, n) for d, _, names in os.walk(p) for n in names
                if not n.startswith((".", "_"))] for k, p in paths.items()}
    sizes = {k: sum(os.path.getsize(f) for f in v) for k, v in data.items()}
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    return {
        "benchmark": "spark_read", "machine": machine(), "master": "local[2]", "rows": rows,
        "files": {k: len(v) for k, v in data.items()},
        "seconds": {k: round(v, 2) for k, v in best.items()},
        "all_seconds": {k: [round(x, 2) for x in v] for k, v in times.items()},
        "rows_per_s": {k: round(rows / v) for k, v in best.items()},
        "tfrecord_vs_parquet": round(best["parquet"] / best["tfrecord"], 3),
        "bytes_per_row": {k: round(v / rows, 1) for k, v in sizes.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    r = run(a.rows, a.repeat)
    print(f"Spark read on local[2], {a.rows:,} rows x 10 columns, files {r['files']} "
          f"(best of {a.repeat})")
    for k in r["seconds"]:
        print(f"  {k:<9} {r['seconds'][k]:>7.2f} s {r['rows_per_s'][k]:>12,} rows/s  "
              f"(runs {r['all_seconds'][k]})")
    print(f"  tfrecord reads at {r['tfrecord_vs_parquet']:.2f}x parquet's rate; bytes/row: "
          + ", ".join(f"{k} {v}" for k, v in r["bytes_per_row"].items()))
    print(f"  {r['machine']}")
    save_json(a.json, r)


if __name__ == "__main__":
    main()
