"""Spark write benchmark on local[2]: TFRecords versus Spark's own parquet writer.

The same source rows (rows x 10 columns: 5 double, 3 long, 2 short strings, generated once
and stored as parquet) are written, alternating, by:
  parquet        df.write.parquet(...)
  tfrecord       df.write.format("tfrecord").save(...)            (the data source alone)
  tfrecord.gz    the same with option compression=gzip
  workflow       write_tfrecords(df, ...), whole: TFRecords, their parquet copy and statistics
                 (one pass)
Reports rows/s, ratios to parquet, and bytes per row on disk.

    python bench/bench_write.py --rows 5000000 --json bench/results/write.json
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


def _size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path)
               for n in names if not n.startswith((".", "_")))


def run(rows: int, repeat: int) -> dict:
    import tfspark

    spark = local_spark("tfspark-bench-write")
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-write-")
    src = spark_table(spark, rows)
    src_path = os.path.join(tmp, "source")
    src.write.parquet(src_path)
    df = spark.read.parquet(src_path)

    def parquet(out: str) -> float:
        t = time.perf_counter()
        df.write.mode("overwrite").parquet(out)
        return time.perf_counter() - t

    def tfrecord(out: str, compression: str = "none") -> float:
        t = time.perf_counter()
        df.write.format("tfrecord").mode("overwrite").option("compression", compression) \
            .save(out)
        return time.perf_counter() - t

    def workflow(out: str) -> float:
        t = time.perf_counter()
        r = tfspark.write_tfrecords(df, out, mode="overwrite", backup_path=out + "_bk")
        assert r.rows == rows
        return time.perf_counter() - t

    runs = {"parquet": parquet, "tfrecord": tfrecord,
            "tfrecord.gz": lambda o: tfrecord(o, "gzip"), "workflow": workflow}
    times: dict[str, list[float]] = {k: [] for k in runs}
    sizes: dict[str, int] = {}
    tfrecord(os.path.join(tmp, "warm"))  # start Python workers, load kernels
    for _ in range(repeat):
        for name, fn in runs.items():
            out = os.path.join(tmp, name)
            times[name].append(fn(out))
            sizes[name] = _size(out)
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(out + "_bk", ignore_errors=True)
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    return {
        "benchmark": "write", "machine": machine(), "master": "local[2]", "rows": rows,
        "seconds": {k: round(v, 2) for k, v in best.items()},
        "rows_per_s": {k: round(rows / v) for k, v in best.items()},
        "throughput_vs_parquet": {k: round(best["parquet"] / v, 2) for k, v in best.items()},
        "bytes_per_row": {k: round(sizes[k] / rows, 1) for k in ("parquet", "tfrecord",
                                                                  "tfrecord.gz")},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=5_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    r = run(a.rows, a.repeat)
    print(f"Spark write on local[2], {a.rows:,} rows x 10 columns (best of {a.repeat})")
    for k in r["seconds"]:
        print(f"  {k:<12} {r['seconds'][k]:>7.2f} s {r['rows_per_s'][k]:>12,} rows/s  "
              f"{r['throughput_vs_parquet'][k]:>5.2f}x parquet")
    print("  bytes/row:   " + ", ".join(f"{k} {v}" for k, v in r["bytes_per_row"].items()))
    save_json(a.json, r)


if __name__ == "__main__":
    main()
