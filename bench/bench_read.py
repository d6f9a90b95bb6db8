"""Read benchmark: tfspark.make_dataset versus other ways of feeding the same rows to tf.data.

The standard table (bench/common.py: 10 columns, 5 float, 3 int64, 2 short strings) is written
once with tfspark's encoder into ~8 TFRecord files plus a manifest (no Spark), and as 8 CSV
files. Then, alternating and best of --repeat each, one full epoch at batch 1024 of:

  make_dataset      tfspark.make_dataset(dir, 1024, shuffle_buffer=0), the like-for-like row
  make_dataset+shuf the same with its default shuffle buffer (10 * batch), for information
  (a) hand-tuned    TFRecordDataset(files, num_parallel_reads=AUTOTUNE) -> batch -> map(
                    parse_example, AUTOTUNE) -> prefetch
  (b) per record    TFRecordDataset(files, AUTOTUNE) -> map(parse_single_example, AUTOTUNE)
                    -> batch -> prefetch
  (c) CSV           tf.data.experimental.make_csv_dataset(8 files, 1024, typed defaults)

Targets: make_dataset >= 0.9x (a), >= 10x (b), >= 3x (c).

    python bench/bench_read.py --rows 1000000 --json bench/results/read.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import machine, save_json, spark_schema, table  # noqa: E402

BATCH = 1024
FILES = 8
TARGETS = {"hand_tuned": 0.9, "per_record": 10.0, "csv": 3.0}


def write_data(rows: int, out: str) -> tuple[list[str], list[str]]:
    """TFRecord files + manifest, and CSV files, of the same rows; reused when already there."""
    import json

    import pyarrow.csv as pacsv

    import tfspark
    from tfspark.arrow.encode import encode_records
    from tfspark.store import manifest as mf
    from tfspark.store.fs import locate
    from tfspark.wire.stream import RecordWriter

    tf_dir, csv_dir = os.path.join(out, f"tfrecord-{rows}"), os.path.join(out, f"csv-{rows}")
    names = [f"part-{k:05d}.tfrecord" for k in range(FILES)]
    csvs = [os.path.join(csv_dir, f"part-{k:05d}.csv") for k in range(FILES)]
    done = os.path.exists(os.path.join(tf_dir, mf.NAME)) and all(map(os.path.exists, csvs))
    if done and json.load(open(os.path.join(tf_dir, mf.NAME)))["records"] == rows:
        return [os.path.join(tf_dir, n) for n in names], csvs
    os.makedirs(tf_dir, exist_ok=True)
    os.makedirs(csv_dir, exist_ok=True)
    data = table(rows)
    spec = tfspark.infer_spec(spark_schema())
    manifest = mf.Manifest(spec=spec)
    entries = []
    per_file = -(-rows // FILES)
    for k, name in enumerate(names):
        part = data.slice(k * per_file, per_file)
        with open(os.path.join(tf_dir, name), "wb") as f, RecordWriter(f) as w:
            for batch in part.to_batches(max_chunksize=100_000):
                buf, offsets = encode_records(batch, spec, framed=True)
                w.write_framed(buf, count=len(offsets) - 1)
        entries.append({"path": name, "records": part.num_rows,
                        "bytes": os.path.getsize(os.path.join(tf_dir, name)), "split": None})
        pacsv.write_csv(part, csvs[k])
    mf.write_manifest(locate(tf_dir),
                      manifest.with_files([mf.FileEntry(**e) for e in entries], "bench"))
    return [os.path.join(tf_dir, n) for n in names], csvs


def pipelines(tf_dir: str, files: list[str], csvs: list[str]) -> dict:
    import tensorflow as tf

    import tfspark
    from tfspark.tf.dataset import make_dataset

    AUTO = tf.data.AUTOTUNE
    parsing = tfspark.tf.parsing_spec(tfspark.infer_spec(spark_schema()))

    def hand_tuned():
        return (tf.data.TFRecordDataset(files, num_parallel_reads=AUTO).batch(BATCH)
                .map(lambda s: tf.io.parse_example(s, parsing), num_parallel_calls=AUTO)
                .prefetch(AUTO))

    def per_record():
        return (tf.data.TFRecordDataset(files, num_parallel_reads=AUTO)
                .map(lambda s: tf.io.parse_single_example(s, parsing), num_parallel_calls=AUTO)
                .batch(BATCH).prefetch(AUTO))

    def csv():
        defaults = [tf.float32] * 5 + [tf.int64] * 3 + [tf.string] * 2
        return tf.data.experimental.make_csv_dataset(
            csvs, BATCH, column_defaults=defaults, num_epochs=1, shuffle=False,
            num_parallel_reads=len(csvs), sloppy=True)

    return {
        "make_dataset": lambda: make_dataset(tf_dir, BATCH, shuffle_buffer=0),
        "make_dataset_shuffled": lambda: make_dataset(tf_dir, BATCH),
        "hand_tuned": hand_tuned,
        "per_record": per_record,
        "csv": csv,
    }


def one_epoch(ds) -> tuple[int, float]:
    """(examples, seconds) of a full pass, building the iterator inside the timing."""
    start = time.perf_counter()
    n = 0
    for batch in ds:
        n += int(batch["f0"].shape[0])
    return n, time.perf_counter() - start


def run(rows: int, repeat: int, data_dir: str) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = machine()
    files, csvs = write_data(rows, data_dir)
    tf_dir = os.path.dirname(files[0])
    makers = pipelines(tf_dir, files, csvs)
    for make in makers.values():  # warm up: tracing, file cache
        one_epoch(make().take(5))
    runs: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(repeat):
        for name, make in makers.items():  # alternating, so load changes hit all alike
            n, secs = one_epoch(make())
            if n != rows:
                raise SystemExit(f"{name} read {n} rows, expected {rows}")
            runs[name].append(n / secs)
    best = {name: max(r) for name, r in runs.items()}
    ratios = {name: best["make_dataset"] / best[name] for name in TARGETS}
    import tensorflow as tf

    return {"rows": rows, "batch_size": BATCH, "files": FILES, "repeat": repeat,
            "machine": started, "tensorflow": tf.__version__,
            "tfrecord_bytes": sum(os.path.getsize(f) for f in files),
            "csv_bytes": sum(os.path.getsize(f) for f in csvs),
            "examples_per_s": best, "runs": runs, "ratios": ratios, "targets": TARGETS,
            "met": {k: ratios[k] >= TARGETS[k] for k in TARGETS}}


def report(doc: dict) -> str:
    labels = {"make_dataset": "tfspark make_dataset (no shuffle)",
              "make_dataset_shuffled": "tfspark make_dataset (default shuffle)",
              "hand_tuned": "(a) hand-tuned batch -> parse_example",
              "per_record": "(b) parse_single_example -> batch",
              "csv": "(c) make_csv_dataset"}
    lines = [f"read benchmark: {doc['rows']:,} rows x 10 columns, batch {doc['batch_size']}, "
             f"{doc['files']} files, best of {doc['repeat']}; {doc['machine']}",
             f"{'pipeline':<42} {'examples/s':>12} {'make_dataset is':>16}  target"]
    best = doc["examples_per_s"]
    for name, label in labels.items():
        ratio = best["make_dataset"] / best[name]
        target = doc["targets"].get(name)
        mark = ""
        if target is not None:
            mark = f">= {target:.1f}x " + ("ok" if ratio >= target else "MISSED")
        lines.append(f"{label:<42} {best[name]:>12,.0f} {ratio:>15.2f}x  {mark}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), "data"))
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args(argv)
    doc = run(args.rows, args.repeat, args.data_dir)
    print(report(doc))
    save_json(args.json, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
