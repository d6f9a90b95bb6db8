"""One fresh session's first and second write_tfrecords, with the progress lines' timestamps
(ms since the process started): where a write's time goes, phase by phase.

The table of bench_first_write.py (--rows rows x 4 columns: long, double, string, long), in a
fresh local[*] session; `--writer parquet` times df.write.parquet instead. To compare two
versions of tfspark side by side, alternate runs with each on PYTHONPATH (a git worktree of
the older commit). Run it from outside the repository: Spark's Python workers start in the
driver's working directory and put it first on their path, so from the repository root they
import its tfspark whatever PYTHONPATH says:

    cd /tmp && python /path/to/repo/bench/bench_write_phases.py --rows 100000
    cd /tmp && PYTHONPATH=/tmp/old python /path/to/repo/bench/bench_write_phases.py --rows 100000
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--writer", choices=("write_tfrecords", "parquet"), default="write_tfrecords")
    args = p.parse_args()
    logging.basicConfig(format="%(relativeCreated)8.0f ms %(message)s")
    logging.getLogger("tfspark.progress").setLevel(logging.INFO)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (SparkSession.builder.master("local[*]")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.range(args.rows).select("id", (F.col("id") * 0.5).alias("x"),
                                       F.col("id").cast("string").alias("s"),
                                       (F.col("id") % 2).alias("label"))
    import tfspark

    with tempfile.TemporaryDirectory(prefix="tfspark-bench-phases-") as tmp:
        for which in ("first", "second"):
            out = f"{tmp}/{which}"
            started = time.perf_counter()
            if args.writer == "parquet":
                df.write.parquet(out)
            else:
                tfspark.write_tfrecords(df, out)
            print(f"{args.writer} {which} write: {time.perf_counter() - started:.2f} s",
                  flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
