"""Block layout benchmark: rows_per_record=N against the row layout and parquet,
side by side in one run, on the standard 10-column table (5 double, 3 long, 2 short strings).

  tf.data    make_dataset(dir, 1024) on row files vs block files (N rows per Example), no
             shuffle and the default window shuffle; the files written by tfspark's encoders
             without Spark, 8 files each, alternating runs, best of --repeat
  sizes      bytes per row: row layout, block layout, block layout gzip (level 6), parquet
             (Spark's default snappy) of the same table
  Spark      on local[2], alternating, best of --repeat: df.write.parquet vs
             df.write.format("tfrecord").option("rowsPerRecord", N) (and the row layout), then
             spark.read.parquet vs spark.read.format("tfrecord") of each, into the noop sink

Targets: make_dataset blocks >= 5x rows and >= 1M examples/s; block files <= 1/3
of the row layout's bytes, gzip'd blocks <= 0.8x parquet; block write >= 1.2x parquet's rows/s;
block read >= 0.75x parquet's rows/s.

    python bench/bench_block.py --rows 1000000 --spark-rows 5000000 \
        --json bench/results/block.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402
    local_spark,
    machine,
    save_json,
    spark_table,
    table,
)

BATCH = 1024
FILES = 8
TARGETS = {"read_vs_rows": 5.0, "read_examples_per_s": 1_000_000, "bytes_vs_rows": 1 / 3,
           "gzip_vs_parquet": 0.8, "write_vs_parquet": 1.2, "spark_read_vs_parquet": 0.75}


def _size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(path)
               for n in names if not n.startswith((".", "_")))


def write_files(rows: int, out: str, block: int, compression: str | None = None, *,
                data=None, files: int = FILES) -> str:
    """`files` TFRecord files + manifest, row (block=1) or block layout, of the standard table
    (or `data`, a pyarrow Table), written without Spark (tfspark.write_dataset)."""
    import tfspark

    if data is None:
        data = table(rows)
    tfspark.write_dataset(data, out, mode="overwrite", rows_per_record=block,
                          compression=compression, stats=False,
                          max_records_per_file=-(-data.num_rows // files))
    return out


def tf_read(rows: int, block: int, repeat: int, tmp: str) -> dict:
    import tensorflow as tf

    import tfspark

    dirs = {"rows": write_files(rows, os.path.join(tmp, "rows"), 1),
            "blocks": write_files(rows, os.path.join(tmp, "blocks"), block)}
    gz = write_files(rows, os.path.join(tmp, "blocks-gz"), block, "gzip")
    makers = {
        "rows": lambda: tfspark.make_dataset(dirs["rows"], BATCH, shuffle_buffer=0),
        "blocks": lambda: tfspark.make_dataset(dirs["blocks"], BATCH, shuffle_buffer=0),
        "rows_shuffled": lambda: tfspark.make_dataset(dirs["rows"], BATCH),
        "blocks_shuffled": lambda: tfspark.make_dataset(dirs["blocks"], BATCH),
    }

    def epoch(ds) -> tuple[int, float]:
        t = time.perf_counter()
        n = sum(int(b["f0"].shape[0]) for b in ds)
        return n, time.perf_counter() - t

    for make in makers.values():
        epoch(make().take(5))  # tracing, file cache
    runs: dict[str, list[float]] = {k: [] for k in makers}
    for _ in range(repeat):
        for name, make in makers.items():
            n, secs = epoch(make())
            if n != rows:
                raise SystemExit(f"{name} read {n} rows, expected {rows}")
            runs[name].append(n / secs)
    best = {k: max(v) for k, v in runs.items()}
    return {"tensorflow": tf.__version__, "examples_per_s": best, "runs": runs,
            "bytes": {"rows": _size(dirs["rows"]), "blocks": _size(dirs["blocks"]),
                      "blocks_gzip": _size(gz)}}


def spark_side(rows: int, block: int, repeat: int, tmp: str) -> dict:
    spark = local_spark("tfspark-bench-block")
    src_path = os.path.join(tmp, "source")
    spark_table(spark, rows).write.parquet(src_path)
    df = spark.read.parquet(src_path)
    paths = {k: os.path.join(tmp, "spark-" + k) for k in ("parquet", "blocks", "rows")}

    def write(name: str) -> float:
        t = time.perf_counter()
        if name == "parquet":
            df.write.mode("overwrite").parquet(paths[name])
        else:
            df.write.format("tfrecord").mode("overwrite") \
                .option("rowsPerRecord", block if name == "blocks" else 1).save(paths[name])
        return time.perf_counter() - t

    def read(name: str) -> float:
        t = time.perf_counter()
        reader = spark.read.parquet(paths[name]) if name == "parquet" else \
            spark.read.format("tfrecord").load(paths[name])
        reader.write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t

    for name in paths:  # warm up: Python workers, compiled kernels
        write(name)
        read(name)
    writes: dict[str, list[float]] = {k: [] for k in paths}
    reads: dict[str, list[float]] = {k: [] for k in paths}
    for _ in range(repeat):
        for name in paths:
            writes[name].append(write(name))
        for name in paths:
            reads[name].append(read(name))
    assert spark.read.format("tfrecord").load(paths["blocks"]).count() == rows
    sizes = {k: _size(p) for k, p in paths.items()}
    spark.stop()
    return {"write_s": {k: min(v) for k, v in writes.items()}, "write_runs": writes,
            "read_s": {k: min(v) for k, v in reads.items()}, "read_runs": reads,
            "bytes": sizes}


def run(rows: int, block: int, repeat: int, spark_rows: int) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = machine()
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-block-")
    try:
        read = tf_read(rows, block, repeat, tmp)
        sp = spark_side(spark_rows, block, repeat, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    eps = read["examples_per_s"]
    ratios = {
        "read_vs_rows": eps["blocks"] / eps["rows"],
        "read_examples_per_s": eps["blocks"],
        "bytes_vs_rows": read["bytes"]["blocks"] / read["bytes"]["rows"],
        "gzip_vs_parquet": read["bytes"]["blocks_gzip"] / rows / (sp["bytes"]["parquet"]
                                                                   / spark_rows),
        "write_vs_parquet": sp["write_s"]["parquet"] / sp["write_s"]["blocks"],
        "spark_read_vs_parquet": sp["read_s"]["parquet"] / sp["read_s"]["blocks"],
    }
    met = {k: (ratios[k] <= TARGETS[k] if k in ("bytes_vs_rows", "gzip_vs_parquet")
               else ratios[k] >= TARGETS[k]) for k in TARGETS}
    return {"benchmark": "block", "machine": started, "rows": rows, "spark_rows": spark_rows,
            "rows_per_record": block,
            "batch_size": BATCH, "repeat": repeat, "tf": read, "spark": sp, "ratios": ratios,
            "targets": TARGETS, "met": met}


def report(doc: dict) -> str:
    r, t, sp, rows = doc["ratios"], doc["tf"], doc["spark"], doc["rows"]
    eps = t["examples_per_s"]
    ok = {k: "met" if v else "MISSED" for k, v in doc["met"].items()}
    lines = [
        f"block benchmark: {rows:,} rows x 10 columns, rows_per_record={doc['rows_per_record']},"
        f" best of {doc['repeat']}; {doc['machine']}",
        f"make_dataset, batch {doc['batch_size']}, examples/s:  rows {eps['rows']:,.0f}  blocks "
        f"{eps['blocks']:,.0f}  ({r['read_vs_rows']:.2f}x; >= 5x and >= 1M: "
        f"{ok['read_vs_rows']}/{ok['read_examples_per_s']})",
        f"  with the default window shuffle:  rows {eps['rows_shuffled']:,.0f}  blocks "
        f"{eps['blocks_shuffled']:,.0f}  ({eps['blocks_shuffled'] / eps['rows_shuffled']:.2f}x)",
        f"bytes/row: rows {t['bytes']['rows'] / rows:.1f}  blocks {t['bytes']['blocks'] / rows:.1f}"
        f" ({r['bytes_vs_rows']:.2f}x; <= 0.33x: {ok['bytes_vs_rows']})  blocks gzip "
        f"{t['bytes']['blocks_gzip'] / rows:.1f}  parquet "
        f"{sp['bytes']['parquet'] / doc['spark_rows']:.1f} "
        f"(gzip blocks {r['gzip_vs_parquet']:.2f}x parquet; <= 0.8x: {ok['gzip_vs_parquet']})",
        f"Spark, {doc['spark_rows']:,} rows, local[2]. Write s: parquet "
        f"{sp['write_s']['parquet']:.2f}  blocks "
        f"{sp['write_s']['blocks']:.2f}  rows {sp['write_s']['rows']:.2f}  (blocks "
        f"{r['write_vs_parquet']:.2f}x parquet's rows/s; >= 1.2x: {ok['write_vs_parquet']})",
        f"Spark read s: parquet {sp['read_s']['parquet']:.2f}  blocks {sp['read_s']['blocks']:.2f}"
        f"  rows {sp['read_s']['rows']:.2f}  (blocks {r['spark_read_vs_parquet']:.2f}x parquet's "
        f"rows/s; >= 0.75x: {ok['spark_read_vs_parquet']})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rows-per-record", type=int, default=1024)
    p.add_argument("--spark-rows", type=int, default=5_000_000,
                   help="rows of the Spark write and read runs (as bench_write.py)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args(argv)
    doc = run(args.rows, args.rows_per_record, args.repeat, args.spark_rows)
    print(report(doc))
    save_json(args.json, doc)
    print(json.dumps(doc["ratios"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
