"""Writes to object stores: one DataFrame written by write_tfrecords to local disk,
to moto's S3 server and to a GCS emulator (fake-gcs-server), each store with 0 and 50 ms added
to every request by a TCP proxy (tests/integration/stores.py), side by side in one run, on
local[2]. On S3 twice: with the filesystem= a user makes by default, and with
allow_delayed_open=True (what tfspark sets for s3:// URIs and [store] tables: a file smaller
than an upload part is one PUT instead of a multipart upload of three requests).

The DataFrame: --rows rows (id, a partition column of 8 values, a double, a label), cached,
written with partition_by and max_records_per_file=--per-file, statistics off (the phases that
touch the store: the backup, the TFRecords, the commit), to a new path, then over it
(mode="overwrite": the old files swept, the old backup replaced), then added to it
(mode="append"). Seconds per write (best of --repeat, places alternating) and the ratio to
local disk.

    python bench/bench_store_write.py --rows 200000 --repeat 3
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))

from common import machine, rows_args, save_json  # noqa: E402


def main() -> None:
    ap = rows_args(__doc__)
    ap.add_argument("--per-file", type=int, default=10_000)
    args = ap.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    import pyarrow.fs as pafs
    from pyspark.sql import SparkSession
    from stores import GcsEmulator, S3Server

    import tfspark

    spark = (SparkSession.builder.master("local[2]")
             .config("spark.pyspark.python", sys.executable).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's request log
    df = spark.range(args.rows, numPartitions=4).selectExpr(
        "id", "CAST(id % 8 AS STRING) AS c", "rand(1) AS x", "CAST(id % 2 AS INT) AS y").cache()
    df.count()
    s3, gcs = S3Server(), GcsEmulator()
    s3_bucket, gcs_bucket = s3.bucket(), gcs.bucket()
    local = tempfile.mkdtemp(prefix="store-write-")

    def s3_fs(delay: float, delayed_open: bool) -> pafs.FileSystem:
        return pafs.S3FileSystem(access_key="testing", secret_key="testing", scheme="http",
                                 endpoint_override=s3.endpoint(delay), region="us-east-1",
                                 allow_delayed_open=delayed_open)

    places = {"local": (local, None)}
    for ms in (0, 50):
        places[f"s3 +{ms} ms"] = (s3_bucket, s3_fs(ms / 1000, False))
        places[f"s3 +{ms} ms, delayed open"] = (s3_bucket, s3_fs(ms / 1000, True))
        places[f"gcs +{ms} ms"] = (gcs_bucket, gcs.filesystem(ms / 1000))
    modes = ("errorifexists", "overwrite", "append")  # a new path, then replaced, then added to
    seconds: dict[str, dict[str, list[float]]] = {p: {m: [] for m in modes} for p in places}
    for r in range(args.repeat):
        for i, (name, (root, fs)) in enumerate(places.items()):
            for mode in modes:
                start = time.perf_counter()
                tfspark.write_tfrecords(df, f"{root}/w{r}-{i}", filesystem=fs, mode=mode,
                                        label_cols=["y"], partition_by=["c"],
                                        max_records_per_file=args.per_file, stats=False)
                seconds[name][mode].append(time.perf_counter() - start)
    best = {p: {m: min(v) for m, v in by_mode.items()} for p, by_mode in seconds.items()}
    print(f"{machine()}; {args.rows:,} rows, best of {args.repeat}")
    print("| where | " + " | ".join(f"{m}, s" for m in modes) + " | local / this (new path) |")
    print("|---|" + "---:|" * (len(modes) + 1))
    for p, b in best.items():
        print(f"| {p} | " + " | ".join(f"{b[m]:.1f}" for m in modes) +
              f" | {best['local'][modes[0]] / b[modes[0]]:.2f}x |")
    save_json(args.json, {"rows": args.rows, "seconds": seconds, "machine": machine()})
    s3.close()
    gcs.close()


if __name__ == "__main__":
    main()
