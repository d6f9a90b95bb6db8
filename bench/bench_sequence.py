"""SequenceExample encoder benchmark: tfspark's vectorized encoder versus per-row
tf.train.SequenceExample serialization, writing real TFRecord files on one core, side by side
in one run.

The table: sessions of 0-20 steps (about 10 on average): context user (long), country
(string), score (double); feature lists clicks (1-3 int64 per step), dwell (one float per
step), pages (one short string per step).

  tfspark   Arrow batches of 10,000 rows -> BatchEncoder(framed) of a SequenceExample spec
            -> RecordWriter -> file
  per-row   for each row: tf.train.SequenceExample built field by field, SerializeToString()
            -> tf.io.TFRecordWriter
The per-row loop runs on a slice (--loop-rows); rows/s is rows/s. TensorFlow then parses our
file with parse_sequence_example and the totals are compared (the oracle).

    python bench/bench_sequence.py --rows 200000 --dir /dev/shm --json bench/results/sequence.json
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import pyarrow as pa

import tfspark

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import best_of, machine, pin_one_core, save_json  # noqa: E402


def sessions(rows: int, seed: int = 0) -> pa.Table:
    """The benchmark's table of sessions, built with numpy (no per-row Python)."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(0, 21, rows)
    row_steps = np.concatenate([[0], np.cumsum(steps)]).astype(np.int32)
    n_steps = int(row_steps[-1])
    per_step = rng.integers(1, 4, n_steps)
    step_values = np.concatenate([[0], np.cumsum(per_step)]).astype(np.int32)
    clicks = pa.ListArray.from_arrays(pa.array(row_steps), pa.ListArray.from_arrays(
        pa.array(step_values), pa.array(rng.integers(0, 50_000, int(step_values[-1])))))
    ones = pa.array(np.arange(n_steps + 1, dtype=np.int32))
    dwell = pa.ListArray.from_arrays(pa.array(row_steps), pa.ListArray.from_arrays(
        ones, pa.array(rng.exponential(30.0, n_steps))))
    page_names = np.array([f"/page/{i}" for i in range(500)], dtype=object)
    pages = pa.ListArray.from_arrays(pa.array(row_steps), pa.ListArray.from_arrays(
        ones, pa.array(page_names[rng.integers(0, 500, n_steps)], pa.string())))
    countries = np.array(["de", "fr", "us", "jp", "br"], dtype=object)
    return pa.table({
        "user": pa.array(np.arange(rows, dtype=np.int64)),
        "country": pa.array(countries[rng.integers(0, 5, rows)], pa.string()),
        "score": pa.array(rng.normal(size=rows)),
        "clicks": clicks, "dwell": dwell, "pages": pages,
    })


def spec_of(data: pa.Table):
    import tfspark
    F = tfspark.Feature
    return tfspark.FeatureSpec((
        F("clicks", ("clicks",), "sequence", "int64", "int", "array<array<bigint>>"),
        F("country", ("country",), "fixed", "string", "bytes", "string", default=""),
        F("dwell", ("dwell",), "sequence", "float32", "float", "array<array<double>>"),
        F("pages", ("pages",), "sequence", "string", "bytes", "array<array<string>>"),
        F("score", ("score",), "fixed", "float32", "float", "double", default=0.0),
        F("user", ("user",), "fixed", "int64", "int", "bigint", default=0),
    ), record_type="SequenceExample")


def run(rows: int, loop_rows: int, repeat: int, where: str | None = None) -> dict:
    from tfspark.arrow.encode import BatchEncoder
    from tfspark.wire.stream import RecordWriter

    pinned = pin_one_core()
    data = sessions(rows)
    spec = spec_of(data)
    batches = data.to_batches(max_chunksize=10_000)
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-", dir=where)
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
                ex = tf.train.SequenceExample()
                ctx = ex.context.feature
                ctx["user"].int64_list.value.append(r["user"])
                ctx["country"].bytes_list.value.append(r["country"].encode())
                ctx["score"].float_list.value.append(r["score"])
                lists = ex.feature_lists.feature_list
                clicks, dwell, pages = lists["clicks"], lists["dwell"], lists["pages"]
                for c, d, p in zip(r["clicks"], r["dwell"], r["pages"]):
                    clicks.feature.add().int64_list.value.extend(c)
                    dwell.feature.add().float_list.value.extend(d)
                    pages.feature.add().bytes_list.value.extend(s.encode() for s in p)
                w.write(ex.SerializeToString())

    t_ours, t_loop = [], []
    for _ in range(repeat):  # alternate so both see the same machine state
        for name in (ours_path, loop_path):  # not timed: truncating a big file is slow
            if os.path.exists(name):
                os.remove(name)
        t_ours.append(best_of(ours, 1))
        t_loop.append(best_of(per_row, 1))
    ours_rps = rows / min(t_ours)
    loop_rps = loop_rows / min(t_loop)
    size = os.path.getsize(ours_path)
    clicks = 0
    context, sequence = tfspark.tf.sequence_parsing_spec(spec)
    for batch in tf.data.TFRecordDataset(ours_path).batch(10_000):
        _, seq, _ = tf.io.parse_sequence_example(batch, context_features=context,
                                                 sequence_features=sequence)
        clicks += int(tf.size(seq["clicks"].flat_values))
    want = len(data.column("clicks").combine_chunks().flatten().flatten())
    assert clicks == want, (clicks, want)
    result = {
        "benchmark": "sequence_encode", "machine": machine(), "cpu": pinned, "rows": rows,
        "loop_rows": loop_rows, "steps_per_row": round(
            len(data.column("dwell").combine_chunks().flatten()) / rows, 2),
        "tfspark_rows_per_s": round(ours_rps), "per_row_loop_rows_per_s": round(loop_rps),
        "ratio": round(ours_rps / loop_rps, 1),
        "tfspark_mb_per_s": round(size / min(t_ours) / 1e6, 1),
        "bytes_per_row": round(size / rows, 1),
    }
    for name in (ours_path, loop_path):
        os.remove(name)
    os.rmdir(tmp)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--loop-rows", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", help="where the files go (e.g. /dev/shm: no disk in the timing)")
    p.add_argument("--json")
    a = p.parse_args()
    r = run(a.rows, a.loop_rows, a.repeat, a.dir)
    print(f"SequenceExample encode + frame + write, one core, {a.rows:,} sessions "
          f"({r['steps_per_row']} steps each on average)")
    print(f"  tfspark         {r['tfspark_rows_per_s']:>12,} rows/s  "
          f"({r['tfspark_mb_per_s']} MB/s, {r['bytes_per_row']} B/row)")
    print(f"  per-row protos  {r['per_row_loop_rows_per_s']:>12,} rows/s  "
          f"(on {r['loop_rows']:,} rows)")
    print(f"  ratio           {r['ratio']:>12}x  (goal: >= 30x)")
    save_json(a.json, r)


if __name__ == "__main__":
    main()
