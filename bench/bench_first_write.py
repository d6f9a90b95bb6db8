"""First-write benchmark: the fixed cost of a first write in a fresh local Spark session.

A table of 100,000 rows x 4 columns (long, double, string, long) is written by each writer in
a fresh Python process with a fresh local[*] session (what a new user, a notebook or a job
meets): the first write, then a second one in the same session. Writers: Spark's own
`df.write.parquet`, the data source `df.write.format("tfrecord")`, and `write_tfrecords`
(parquet backup + TFRecords + feature statistics), also with stats=False. Writers alternate;
the median of --repeat runs is reported.

Target: write_tfrecords' first write <= parquet's first write + 3 s.

    python bench/bench_first_write.py --repeat 3 --json bench/results/first_write.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import child_result, machine, save_json  # noqa: E402

WRITERS = ("parquet", "datasource", "write_tfrecords", "write_tfrecords_nostats")
TARGET_EXTRA_S = 3.0

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[*]").config("spark.pyspark.python", sys.executable)
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
session = time.perf_counter() - t0
df = spark.range(ROWS).select("id", (F.col("id") * 0.5).alias("x"),
                              F.col("id").cast("string").alias("s"),
                              (F.col("id") % 2).alias("label"))
import tfspark
def write(out):
    if WRITER == "parquet":
        df.write.parquet(out)
    elif WRITER == "datasource":
        tfspark.register(spark)
        df.write.format("tfrecord").mode("overwrite").save(out)
    else:
        tfspark.write_tfrecords(df, out, stats=WRITER == "write_tfrecords")
times = []
for k in range(2):
    t = time.perf_counter()
    write(os.path.join(OUT, f"w{k}"))
    times.append(time.perf_counter() - t)
spark.stop()
print("RESULT " + json.dumps({"session_s": session, "first_s": times[0], "second_s": times[1]}))
"""


def run_once(writer: str, rows: int, work: str) -> dict:
    out = tempfile.mkdtemp(dir=work)
    code = CHILD.replace("ROWS", str(rows)).replace("WRITER", repr(writer)).replace(
        "OUT", repr(out))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    # As an installed package has them (pip compiles them): bytecode caches for the checkout's
    # modules too, else each Python worker compiles tfspark from source again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    result, done = child_result([sys.executable, "-c", code], env, timeout=900)
    if done.returncode or result is None:
        raise RuntimeError(f"{writer} run failed:\n{done.stderr[-3000:]}")
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="write the results here too")
    a = p.parse_args()
    info = machine()
    runs: dict[str, list[dict]] = {w: [] for w in WRITERS}
    with tempfile.TemporaryDirectory() as work:
        for k in range(a.repeat):
            order = WRITERS if k % 2 == 0 else tuple(reversed(WRITERS))
            for writer in order:
                runs[writer].append(run_once(writer, a.rows, work))
    median = {w: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
              for w, rs in runs.items()}
    extra = median["write_tfrecords"]["first_s"] - median["parquet"]["first_s"]
    result = {"rows": a.rows, "repeat": a.repeat, "machine": info, "median": median,
              "runs": runs, "extra_first_s": extra, "target_extra_s": TARGET_EXTRA_S,
              "met": extra <= TARGET_EXTRA_S}
    print(f"first write of {a.rows:,} rows x 4 columns in a fresh local[*] session, median of "
          f"{a.repeat}; {info}")
    print(f"{'writer':24} {'first write s':>14} {'second write s':>15}")
    for w in WRITERS:
        print(f"{w:24} {median[w]['first_s']:14.2f} {median[w]['second_s']:15.2f}")
    print(f"write_tfrecords first - parquet first = {extra:+.2f} s (target <= "
          f"+{TARGET_EXTRA_S:.0f} s: {'met' if result['met'] else 'NOT met'})")
    if a.json:
        save_json(a.json, result)


if __name__ == "__main__":
    main()
