"""What write_tfrecords' feature statistics cost, by how they are gathered: none
(stats=False), sketched by the write tasks (the default), and Spark's aggregation jobs
(stats_exact=True), written alternately from one cached table in one local[2] session; best of
--repeat (later writes of a session: a first write's fixed costs are bench_first_write.py's).

The standard table (5 double, 3 long with ~2M distinct values, 2 short strings), or with
--wide N a table of N columns like the cluster test's (40% long with a value per row, 40%
double, 20% strings of 97 values): the per-feature cost of either way shows there.

    python bench/bench_write_stats.py --rows 2000000
    python bench/bench_write_stats.py --rows 100000 --wide 256
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

MODES = {"none": {"stats": False}, "tasks": {}, "exact": {"stats_exact": True}}


def wide_table(spark, rows: int, n: int):
    longs, doubles = int(n * 0.4), int(n * 0.4)
    cols = [f"(id * {k + 1}) % 100003 AS l{k}" for k in range(longs)]
    cols += [f"CAST((id + {k}) % 4096 / 4 AS DOUBLE) AS d{k}" for k in range(doubles)]
    cols += [f"concat('c{k}_', CAST(id % 97 AS STRING)) AS s{k}"
             for k in range(n - longs - doubles)]
    return spark.range(0, rows, numPartitions=4).selectExpr("id", *cols)


def run(rows: int, repeat: int, wide: int) -> dict:
    import tfspark

    spark = local_spark("bench-write-stats")
    df = (wide_table(spark, rows, wide) if wide else spark_table(spark, rows)).cache()
    df.count()
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-")
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(repeat):
        for mode, kwargs in MODES.items():
            out = os.path.join(tmp, mode)
            start = time.perf_counter()
            tfspark.write_tfrecords(df, out, mode="overwrite", **kwargs)
            times[mode].append(time.perf_counter() - start)
            shutil.rmtree(out)
    shutil.rmtree(tmp)
    spark.stop()
    return {"benchmark": "write_stats", "machine": machine(), "rows": rows,
            "columns": wide or 10, "best_s": {m: round(min(t), 2) for m, t in times.items()},
            "all_s": {m: [round(x, 2) for x in t] for m, t in times.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--wide", type=int, default=0, help="columns of a wide table instead")
    p.add_argument("--json")
    a = p.parse_args()
    r = run(a.rows, a.repeat, a.wide)
    best = r["best_s"]
    print(f"write_tfrecords of {a.rows:,} rows x {r['columns']} columns, local[2], best of "
          f"{a.repeat} ({machine()})")
    for mode in MODES:
        extra = "" if mode == "none" else f"  (+{best[mode] - best['none']:.2f} s)"
        print(f"  statistics: {mode:<6} {best[mode]:>7.2f} s{extra}   all: {r['all_s'][mode]}")
    save_json(a.json, r)


if __name__ == "__main__":
    main()
