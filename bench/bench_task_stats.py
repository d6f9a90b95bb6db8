"""The data source's featureStats option: what gathering statistics in the write
tasks costs, side by side with the same write without it, on local[2].

The standard 10-column table (5 double, 3 long with ~2M distinct values, 2 short strings) is
cached, then written alternately with and without .option("featureStats", "true"); best of
--repeat. The long columns are integers with far more distinct values than top_k, so their
counts are pruned as they go: the worst case for the counting.

    python bench/bench_task_stats.py --rows 2000000 --json bench/results/task_stats.json
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
    spark = local_spark("bench-task-stats")
    df = spark_table(spark, rows).cache()
    df.count()
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-")
    times: dict[str, list[float]] = {"plain": [], "featureStats": []}
    for _ in range(repeat):
        for name in times:
            out = os.path.join(tmp, name)
            w = df.write.format("tfrecord").mode("overwrite")
            if name == "featureStats":
                w = w.option("featureStats", "true")
            start = time.perf_counter()
            w.save(out)
            times[name].append(time.perf_counter() - start)
            shutil.rmtree(out)
    shutil.rmtree(tmp)
    plain, stats = min(times["plain"]), min(times["featureStats"])
    return {"benchmark": "task_stats", "machine": machine(), "rows": rows,
            "write_s": round(plain, 2), "write_with_stats_s": round(stats, 2),
            "added_s": round(stats - plain, 2), "ratio": round(stats / plain, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    r = run(a.rows, a.repeat)
    print(f"data source write of {a.rows:,} rows x 10 columns, local[2], best of {a.repeat}")
    print(f"  without featureStats  {r['write_s']:>6} s")
    print(f"  with featureStats     {r['write_with_stats_s']:>6} s  (+{r['added_s']} s, "
          f"{r['ratio']}x)")
    save_json(a.json, r)


if __name__ == "__main__":
    main()
