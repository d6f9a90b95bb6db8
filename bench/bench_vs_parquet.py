"""read_batches against what a user could do instead: read the data set's parquet copy with
pyarrow straight into NumPy batches.

The standard table (5 double, 3 long, 2 short strings) plus an int64 id, written once by
tfspark.write_dataset in the row layout (its parquet copy beside it) and once in the block
layout (rows_per_record=1024), 8 files each. One epoch of batches of 1024, no shuffle, each
reader's best of --repeat after a warm-up epoch, the readers alternating:

  parquet copy       pyarrow.dataset(<copy>).to_batches(1024), each column to NumPy
                     (strings as an object array of bytes, as read_batches gives them)
  row layout         read_batches(path, 1024, shuffle_buffer=0), otherwise its defaults
  row, strings=bytes the same with strings="bytes" (no Python object per string)
  row, 1 thread      the row layout with num_threads=1 (what a second thread adds)
  block layout       read_batches on the block files, defaults

Every reader's ids and values are checked against the table (the same rows, each once). Then
the row layout's stages on one core (CPU seconds over all its files): reading the bytes,
framing with both CRCs, indexing and decoding the numeric columns, the strings as objects.

    python bench/bench_vs_parquet.py --rows 2000000 --repeat 4 --json bench/results/vs_parquet.json
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from bench_block import FILES, table  # noqa: E402
from common import machine, rows_args, save_json  # noqa: E402

BATCH = 1024
READERS = ("parquet copy", "row layout", "row, strings=bytes", "row, 1 thread", "block layout")


def parquet_batches(copy: str):
    """The parquet copy as NumPy batches: pyarrow's dataset reader, each column to NumPy."""
    import pyarrow.dataset as ds

    for b in ds.dataset(copy, format="parquet").to_batches(batch_size=BATCH):
        yield {name: col.to_numpy(zero_copy_only=False)
               for name, col in zip(b.schema.names, b.columns)}


def fingerprint(batches) -> tuple[int, int, float]:
    """(rows, sum of ids, sum of f0) of the batches: the same rows give the same three."""
    rows = ids = 0
    f0 = 0.0
    for b in batches:
        features = b[0] if isinstance(b, tuple) else b
        rows += len(features["id"])
        ids += int(features["id"].sum())
        f0 += float(np.asarray(features["f0"], np.float64).sum())
    return rows, ids, round(f0, 3)


def stages(path: str) -> dict[str, float]:
    """CPU seconds of the row layout's stages over all its files, on this thread (decoded in
    the reader's chunks of records)."""
    from tfspark.numpy.decode import NumpyDecoder, _strings
    from tfspark.store import manifest as mf
    from tfspark.store.fs import locate
    from tfspark.wire.tfrecord import frame_offsets

    loc = locate(path)
    m = mf.read_manifest(loc)
    files = [loc.child(e.path) for e in m.files]
    out: dict[str, float] = {}

    def timed(name, fn):
        fn()  # warm
        c = time.process_time()
        r = fn()
        out[name] = round(time.process_time() - c, 3)
        return r

    raw = timed("read the bytes", lambda: [np.frombuffer(f.read_bytes(""), np.uint8)
                                           for f in files])
    offs = timed("frame + CRC", lambda: [frame_offsets(b) for b in raw])
    dec = NumpyDecoder(m.spec, strings="bytes")
    from tfspark.numpy.batches import _CHUNK_ROWS  # records per decode, as the reader does

    def decode():
        return [dec.decode(b, o[i:i + _CHUNK_ROWS + 1], path="x")[0]
                for b, o in zip(raw, offs) for i in range(0, len(o) - 1, _CHUNK_ROWS)]

    cols = timed("index + decode (strings as bytes)", decode)
    strs = [c for c in m.spec.features if c.dtype == "string"]
    timed("strings as objects", lambda: [_strings((c[f.name].values, c[f.name].row_splits))
                                         for c in cols for f in strs])
    return out


def main() -> None:
    args = rows_args(__doc__, repeat=4).parse_args()
    import pyarrow as pa

    import tfspark

    data = table(args.rows)
    data = data.append_column("id", pa.array(np.arange(args.rows, dtype=np.int64)))
    want = (args.rows, args.rows * (args.rows - 1) // 2,
            round(float(data.column("f0").to_numpy().sum()), 3))
    with tempfile.TemporaryDirectory(prefix="tfspark-bench-vs-parquet-") as tmp:
        rows_dir, blocks_dir = os.path.join(tmp, "rows"), os.path.join(tmp, "blocks")
        per_file = -(-args.rows // FILES)
        tfspark.write_dataset(data, rows_dir, stats=False, max_records_per_file=per_file)
        tfspark.write_dataset(data, blocks_dir, stats=False, max_records_per_file=per_file,
                              rows_per_record=1024)
        copy = os.path.join(rows_dir, "_backup")
        makers = {
            "parquet copy": lambda: parquet_batches(copy),
            "row layout": lambda: tfspark.read_batches(rows_dir, BATCH, shuffle_buffer=0),
            "row, strings=bytes": lambda: tfspark.read_batches(rows_dir, BATCH, shuffle_buffer=0,
                                                               strings="bytes"),
            "row, 1 thread": lambda: tfspark.read_batches(rows_dir, BATCH, shuffle_buffer=0,
                                                          num_threads=1),
            "block layout": lambda: tfspark.read_batches(blocks_dir, BATCH, shuffle_buffer=0),
        }
        for name, make in makers.items():  # warm-up, and the same rows from every reader
            got = fingerprint(make())
            if got != want:
                raise SystemExit(f"{name}: rows, id sum, f0 sum {got}, want {want}")
        seconds: dict[str, list[float]] = {k: [] for k in READERS}
        for _ in range(args.repeat):
            for name in READERS:
                t = time.perf_counter()
                for _b in makers[name]():
                    pass
                seconds[name].append(time.perf_counter() - t)
        profile = stages(rows_dir)
    best = {k: min(v) for k, v in seconds.items()}
    base = best["parquet copy"]
    doc = {"benchmark": "vs_parquet", "machine": machine(), "rows": args.rows,
           "repeat": args.repeat, "batch": BATCH,
           "rows_per_s": {k: round(args.rows / s) for k, s in best.items()},
           "vs_parquet": {k: round(base / s, 2) for k, s in best.items()},
           "threads_2_vs_1": round(best["row, 1 thread"] / best["row layout"], 2),
           "stages_cpu_s": profile}
    for k in READERS:
        print(f"  {k:20s} {doc['rows_per_s'][k] / 1e6:6.2f}M rows/s  "
              f"{doc['vs_parquet'][k]:5.2f}x the parquet copy")
    print("  2 threads vs 1 (row layout):", doc["threads_2_vs_1"])
    print("  row layout stages (CPU s, one core):", profile)
    save_json(args.json, doc)


if __name__ == "__main__":
    main()
