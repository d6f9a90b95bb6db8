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

With --frameworks, each framework's reader of the row layout against the parquet copy fed to
that framework the way its users would, side by side (best of --repeat, alternating):

  torch              tfspark.torch_dataset(...).loader(num_workers=W) against a DataLoader over
                     an IterableDataset of the copy's pyarrow batches as tensors (strings as
                     object arrays, as torch_dataset gives them); W = 0 and 2 (forkserver,
                     the workers' start counted on both sides)
  grain              tfspark.grain_dataset against grain's own ParquetIterDataset over the
                     copy's files, batched by grain (.batch(1024))
  tf.data            tfspark.make_dataset against tf.data.Dataset.from_generator over the
                     copy's pyarrow batches

    python bench/bench_vs_parquet.py --rows 2000000 --repeat 4 --frameworks \
        --json bench/results/vs_parquet.json
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
        i, f = np.asarray(features["id"]), np.asarray(features["f0"], np.float64)
        rows += len(i)
        ids += int(i.sum())
        f0 += float(f.sum())
    return rows, ids, round(f0, 3)


def torch_parquet(copy: str, workers: int):
    """A DataLoader over the parquet copy's pyarrow batches as tensors (strings as object
    arrays), split among the loader's workers by file."""
    import glob

    from parquet_feed import CopyBatches, same
    from torch.utils.data import DataLoader

    files = sorted(glob.glob(os.path.join(copy, "*.parquet")))
    # (forkserver: this process runs TensorFlow's and JAX's threads, which a fork copies)
    return DataLoader(CopyBatches(files, BATCH), batch_size=None, num_workers=workers,
                      collate_fn=same,
                      **({"multiprocessing_context": "forkserver"} if workers else {}))


def grain_parquet(copy: str):
    """grain's own Parquet source over the copy's files, batched by grain."""
    import glob

    import grain

    files = sorted(glob.glob(os.path.join(copy, "*.parquet")))
    return grain.experimental.ParquetIterDataset(files).batch(BATCH)


def tf_parquet(copy: str, schema):
    """tf.data over the copy's pyarrow batches (from_generator)."""
    import tensorflow as tf

    def gen():
        yield from parquet_batches(copy)

    sig = {f.name: tf.TensorSpec([None], tf.string if str(f.type) == "string" else
                                 tf.as_dtype(f.type.to_pandas_dtype()))
           for f in schema}
    return tf.data.Dataset.from_generator(gen, output_signature=sig).prefetch(2)


def framework_makers(rows_dir: str, copy: str, schema) -> dict[str, tuple]:
    """{framework: (our reader, the parquet copy's)} makers."""
    import tfspark

    out: dict[str, tuple] = {}
    for w in (0, 2):
        out[f"torch, {w} workers"] = (
            lambda w=w: tfspark.torch_dataset(rows_dir, BATCH, shuffle_buffer=0).loader(
                num_workers=w, **({"multiprocessing_context": "forkserver"} if w else {})),
            lambda w=w: torch_parquet(copy, w))
    out["grain"] = (lambda: tfspark.grain_dataset(rows_dir, BATCH, shuffle_buffer=0),
                    lambda: grain_parquet(copy))
    out["tf.data"] = (lambda: tfspark.make_dataset(rows_dir, BATCH, shuffle_buffer=0),
                      lambda: tf_parquet(copy, schema))
    return out


def stages(path: str) -> dict[str, float]:
    """CPU seconds of the row layout's stages over all its files, on this thread (decoded in
    the reader's chunks of records)."""
    from tfspark.numpy.decode import NumpyDecoder, _strings
    from tfspark.store import manifest as mf
    from tfspark.store.fs import locate
    from tfspark.wire.stream import CHUNK_BYTES
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

    # as a reading thread does: each file in turn into one reused buffer of CHUNK_BYTES
    buffer = np.empty(CHUNK_BYTES, np.uint8)

    def read_files() -> None:
        for f in files:
            with f.open_input() as stream:
                while stream.readinto(buffer.data) == buffer.size:
                    pass

    timed("read the bytes", read_files)
    raw = [np.frombuffer(f.read_bytes(""), np.uint8) for f in files]
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
    parser = rows_args(__doc__, repeat=4)
    parser.add_argument("--frameworks", action="store_true",
                        help="also each framework's reader against the copy fed to it")
    args = parser.parse_args()
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
        frameworks: dict[str, dict[str, float]] = {}
        if args.frameworks:
            fw = framework_makers(rows_dir, copy, data.schema)
            for name, (ours, theirs) in fw.items():
                for which, make in (("tfspark", ours), ("parquet copy", theirs)):
                    got = fingerprint(make())
                    if got != want:
                        raise SystemExit(f"{name}, {which}: rows, id sum, f0 sum {got}, "
                                         f"want {want}")
            took: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.repeat):
                for name, (ours, theirs) in fw.items():
                    for which, make in (("tfspark", ours), ("parquet copy", theirs)):
                        t = time.perf_counter()
                        for _b in make():
                            pass
                        took.setdefault((name, which), []).append(time.perf_counter() - t)
            for name in fw:
                a, b = min(took[(name, "tfspark")]), min(took[(name, "parquet copy")])
                frameworks[name] = {"tfspark_rows_per_s": round(args.rows / a),
                                    "parquet_rows_per_s": round(args.rows / b),
                                    "vs_parquet": round(b / a, 2)}
    best = {k: min(v) for k, v in seconds.items()}
    base = best["parquet copy"]
    doc = {"benchmark": "vs_parquet", "machine": machine(), "rows": args.rows,
           "repeat": args.repeat, "batch": BATCH,
           "rows_per_s": {k: round(args.rows / s) for k, s in best.items()},
           "vs_parquet": {k: round(base / s, 2) for k, s in best.items()},
           "threads_2_vs_1": round(best["row, 1 thread"] / best["row layout"], 2),
           "stages_cpu_s": profile, **({"frameworks": frameworks} if frameworks else {})}
    for k in READERS:
        print(f"  {k:20s} {doc['rows_per_s'][k] / 1e6:6.2f}M rows/s  "
              f"{doc['vs_parquet'][k]:5.2f}x the parquet copy")
    print("  2 threads vs 1 (row layout):", doc["threads_2_vs_1"])
    print("  row layout stages (CPU s, one core):", profile)
    for name, f in frameworks.items():
        print(f"  {name:16s} tfspark {f['tfspark_rows_per_s'] / 1e6:6.2f}M rows/s, the "
              f"parquet copy {f['parquet_rows_per_s'] / 1e6:6.2f}M: {f['vs_parquet']:5.2f}x")
    save_json(args.json, doc)


if __name__ == "__main__":
    main()
