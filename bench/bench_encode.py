"""Encoder benchmark: tfspark encode_batch + framing versus the per-row tf.train.Example loop.

Both write real TFRecord files on one core, side by side in one run:
  tfspark   Arrow batches of 10,000 rows (what Spark hands a writer) -> BatchEncoder(framed)
            -> RecordWriter -> file
  per-row   for each row: tf.train.Example(...).SerializeToString() -> tf.io.TFRecordWriter
The per-row loop runs on a slice (--loop-rows) because it is ~100x slower; rows/s is rows/s.

    python bench/bench_encode.py --rows 1000000 --json bench/results/encode.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import best_of, machine, pin_one_core, save_json, spark_schema, table  # noqa: E402


def run(rows: int, loop_rows: int, repeat: int) -> dict:
    import tfspark
    from tfspark.arrow.encode import BatchEncoder
    from tfspark.wire.stream import RecordWriter

    pinned = pin_one_core()
    data = table(rows)
    spec = tfspark.infer_spec(spark_schema())
    batches = data.to_batches(max_chunksize=10_000)
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-")
    ours_path = os.path.join(tmp, "ours.tfrecord")
    encoder = BatchEncoder(spec)
    encoder.encode(batches[0].slice(0, 10), framed=True)  # compile / load kernels first

    def ours() -> None:
        with open(ours_path, "wb") as f, RecordWriter(f) as w:
            for b in batches:
                buf, offsets = encoder.encode(b, framed=True)
                w.write_framed(buf, count=len(offsets) - 1)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    loop_rows = min(loop_rows, rows)
    pylist = data.slice(0, loop_rows).to_pylist()
    loop_path = os.path.join(tmp, "loop.tfrecord")

    def per_row() -> None:
        with tf.io.TFRecordWriter(loop_path) as w:
            for r in pylist:
                feats = {}
                for k, v in r.items():
                    if k[0] == "f":
                        feats[k] = tf.train.Feature(float_list=tf.train.FloatList(value=[v]))
                    elif k[0] == "i":
                        feats[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))
                    else:
                        feats[k] = tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[v.encode()]))
                w.write(tf.train.Example(features=tf.train.Features(feature=feats))
                        .SerializeToString())

    t_ours, t_loop = [], []
    for _ in range(repeat):  # alternate so both see the same machine state
        t_ours.append(best_of(ours, 1))
        t_loop.append(best_of(per_row, 1))
    ours_rps = rows / min(t_ours)
    loop_rps = loop_rows / min(t_loop)
    size = os.path.getsize(ours_path)
    # The oracle: TF parses our file to the same number of records.
    n = sum(1 for _ in tf.data.TFRecordDataset(ours_path))
    assert n == rows, (n, rows)
    result = {
        "benchmark": "encode", "machine": machine(), "cpu": pinned, "rows": rows,
        "loop_rows": loop_rows, "tfspark_rows_per_s": round(ours_rps),
        "per_row_loop_rows_per_s": round(loop_rps), "ratio": round(ours_rps / loop_rps, 1),
        "tfspark_mb_per_s": round(size / min(t_ours) / 1e6, 1),
        "bytes_per_row": round(size / rows, 1),
    }
    for name in (ours_path, loop_path):
        os.remove(name)
    os.rmdir(tmp)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--loop-rows", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    r = run(a.rows, a.loop_rows, a.repeat)
    print(f"encode + frame + write, one core, {a.rows:,} rows x 10 columns")
    print(f"  tfspark         {r['tfspark_rows_per_s']:>12,} rows/s  "
          f"({r['tfspark_mb_per_s']} MB/s, {r['bytes_per_row']} B/row)")
    print(f"  per-row loop    {r['per_row_loop_rows_per_s']:>12,} rows/s  "
          f"(on {r['loop_rows']:,} rows)")
    print(f"  ratio           {r['ratio']:>12}x")
    save_json(a.json, r)


if __name__ == "__main__":
    main()
