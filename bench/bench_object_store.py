"""Object-store reads: the same data sets read from local disk and from a GCS
emulator (fake-gcs-server on loopback) with 0, 20, 50 and 100 ms added to every request by a
TCP proxy (tests/integration/stores.py: this kernel has no netem), side by side in one run;
and the local files read through the store's code path (local-as-store: a pyarrow
SubTreeFileSystem over the local disk, so tfspark's own remote reader runs with no server and
no network). local -> local-as-store is the cost of the reader, local-as-store -> gcs+0ms that
of the transport (the emulator's CPU on the same cores included, which a real store's is not),
gcs+0ms -> gcs+Nms that of the latency.

The standard 10-column table (5 double, 3 long, 2 short strings), --rows rows, written once per
layout (rows; blocks of 1024) into 8 files with tfspark's encoders, copied into a bucket. For
each place, reader and layout, one epoch at batch 1024 without shuffling:

  read_batches   tfspark.read_batches(path, 1024, shuffle_buffer=0, filesystem=fs)
                 (default threads: the cores, and io_threads=16 requests in flight, or
                 --io-threads)
  make_dataset   tfspark.make_dataset(path, 1024, shuffle_buffer=0, filesystem=fs), each batch
                 taken into NumPy by a Python loop
  make_dataset_graph  the same read in a graph (Dataset.reduce), as Keras fit consumes it:
                 no Python per batch (the first batch timed by tf.timestamp); both
                 make_dataset readers take --io-threads too

rows/s (best of --repeat, places alternating; --each prints every epoch's too): steady (the
rows after the first batch over the time after it), over the second half of the epoch (the
rows after the batch that passes half of them over the time after it: a pipeline that ran
ahead before its first batch, as a local one does, gains nothing there; its ratio is also
given of the medians, in brackets: a tenth of a second on blocks, so single epochs scatter)
and over the whole epoch, and the time to the first batch (from the call, so the manifest
read and planning count). Targets on this 2-core machine: >= 0.9x local at 50 ms and >= 0.8x
at 100 ms, first batch within 1 s.

The seed experiment: --small-rows rows of the same table as one small object per row (each a
serialized tf.train.Example, as the per-row loaders stored them) read one after another, vs
the tfspark data set of the same rows read by read_batches, on the emulator with no added
latency, as a ratio (at 50 ms the per-object loop would take --small-rows x 50 ms); 0 skips it.

    python bench/bench_object_store.py --rows 2000000 --json bench/results/object_store.json
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))

from bench_block import write_files  # noqa: E402
from common import machine, rows_args, save_json  # noqa: E402

BATCH = 1024
DELAYS = (0.0, 0.02, 0.05, 0.1)
STORE_PATH = "local-as-store"  # local disk read through a pyarrow filesystem, as a store is


def timed(make, half: int) -> tuple[int, float, float, float, float]:
    """(rows, seconds to the first batch, seconds in all, steady rows/s: the rows after the
    first batch over the time after it, and the rows after the batch that passes `half` rows
    over the time after it) of one epoch. A reader that reads in a graph returns (rows, rows of
    its first batch, when it came, rows up to the batch passing half, when it came: by
    time.time()) instead of batches."""
    t, wall = time.perf_counter(), time.time()
    got = make()
    if isinstance(got, tuple):
        total = time.perf_counter() - t
        rows, first_rows, came, mid_rows, mid = got
        first = came - wall
        return (rows, first, total, (rows - first_rows) / (total - first),
                (rows - mid_rows) / (time.time() - mid))
    first = mid = None
    rows = first_rows = mid_rows = 0
    for batch in got:
        rows += len(batch["f0"])
        if first is None:
            first, first_rows = time.perf_counter() - t, rows
        if mid is None and rows >= half:
            mid, mid_rows = time.perf_counter() - t, rows
    total = time.perf_counter() - t
    steady = (rows - first_rows) / (total - first) if first is not None and total > first else 0
    second = (rows - mid_rows) / (total - mid) if mid is not None and total > mid else 0
    return rows, first or 0.0, total, steady, second


READ_IO_THREADS = None  # the readers' io_threads (--io-threads; None: their default)


def readers(path: str, fs, half: int) -> dict:
    import tfspark

    return {
        "read_batches": lambda: tfspark.read_batches(path, BATCH, shuffle_buffer=0,
                                                     label_cols=[], filesystem=fs,
                                                     io_threads=READ_IO_THREADS),
        "make_dataset": lambda: (
            {k: v.numpy() for k, v in b.items()} for b in tfspark.make_dataset(
                path, BATCH, shuffle_buffer=0, label_cols=[], filesystem=fs)),
        "make_dataset_graph": lambda: in_graph(tfspark.make_dataset(
            path, BATCH, shuffle_buffer=0, label_cols=[], filesystem=fs,
            io_threads=READ_IO_THREADS), half),
    }


def in_graph(ds, half: int) -> tuple[int, int, float, int, float]:
    """One epoch read in a graph (Dataset.reduce), as Keras fit consumes a dataset, no Python
    per batch: (rows, rows of the first batch, when it came, rows up to the batch passing
    `half`, when it came: tf.timestamp, as time.time())."""
    import tensorflow as tf

    def step(state, batch):
        rows, first_rows, came, mid_rows, mid = state
        n = tf.shape(batch["f0"], out_type=tf.int64)[0]
        first = tf.equal(rows, 0)
        passing = tf.logical_and(rows < half, rows + n >= half)
        now = tf.timestamp()
        return (rows + n, tf.where(first, n, first_rows), tf.where(first, now, came),
                tf.where(passing, rows + n, mid_rows), tf.where(passing, now, mid))

    zero, never = tf.constant(0, tf.int64), tf.constant(0.0, tf.float64)
    got = ds.reduce((zero, zero, never, zero, never), step)
    rows, first_rows, came, mid_rows, mid = (v.numpy() for v in got)
    return int(rows), int(first_rows), float(came), int(mid_rows), float(mid)


def seed_experiment(gcs, rows: int) -> dict:
    """One object per row read one by one vs the data set of the same rows."""
    import pyarrow.fs as pafs
    from common import spark_schema, table

    import tfspark

    fs = gcs.filesystem()
    bucket = gcs.bucket()
    examples = tfspark.arrow.encode_batch(table(rows), tfspark.infer_spec(spark_schema()))
    started = time.perf_counter()
    for i, example in enumerate(examples):
        with fs.open_output_stream(f"{bucket}/rows/{i:07d}.pb") as out:
            out.write(example)
    upload_s = time.perf_counter() - started
    t = time.perf_counter()
    got = 0
    for info in fs.get_file_info(pafs.FileSelector(f"{bucket}/rows")):
        with fs.open_input_file(info.path) as f:
            got += len(f.read()) > 0
    per_object = time.perf_counter() - t
    assert got == rows, (got, rows)
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-seed-")
    try:
        local = write_files(rows, os.path.join(tmp, "ds"), 1)
        pafs.copy_files(local, f"{bucket}/ds", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=fs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n, _, secs, _, _ = timed(readers(f"{bucket}/ds", fs, rows // 2)["read_batches"], rows // 2)
    assert n == rows
    return {"rows": rows, "per_object_s": per_object, "data_set_s": secs,
            "upload_s": upload_s, "ratio": per_object / secs}


@contextmanager
def on_gcs(rows: int, layouts: dict[str, int]) -> Iterator[tuple[Any, dict[str, str], str]]:
    """The standard table written locally once per layout ({name: rows_per_record}, 8 files)
    and copied into a bucket of a fresh fake-gcs-server, as <bucket>/<name>: yields (the
    emulator, {name: local directory}, the bucket); all of it removed afterwards."""
    import pyarrow.fs as pafs
    from stores import GcsEmulator

    tmp = tempfile.mkdtemp(prefix="tfspark-bench-store-")
    gcs = GcsEmulator()
    try:
        local = {name: write_files(rows, os.path.join(tmp, name), block)
                 for name, block in layouts.items()}
        bucket = gcs.bucket()
        for name, d in local.items():
            pafs.copy_files(d, f"{bucket}/{name}", source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=gcs.filesystem())
        yield gcs, local, bucket
    finally:
        gcs.close()
        shutil.rmtree(tmp, ignore_errors=True)


def run(rows: int, repeat: int, small_rows: int, layouts: tuple[str, ...] = ("rows", "blocks"),
        kinds: tuple[str, ...] = ("read_batches", "make_dataset", "make_dataset_graph"),
        each: bool = False) -> dict:
    import pyarrow.fs as pafs

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = machine()
    with on_gcs(rows, {k: v for k, v in {"rows": 1, "blocks": 1024}.items()
                       if k in layouts}) as (gcs, local, bucket):
        # the store's code path on local disk (no server, no network): what is left between
        # it and gcs+0ms is the transport, the emulator's CPU on these cores included
        root = os.path.dirname(next(iter(local.values())))
        places = {"local": (None, None),
                  STORE_PATH: (pafs.SubTreeFileSystem(root, pafs.LocalFileSystem()), "")}
        for delay in DELAYS:
            places[f"gcs+{int(delay * 1000)}ms"] = (gcs.filesystem(delay), bucket)
        results: dict[str, dict] = {}
        for layout in local:
            for place, (fs, bucket_name) in places.items():
                path = local[layout] if fs is None else f"{bucket_name}/{layout}".lstrip("/")
                for reader, make in readers(path, fs, rows // 2).items():
                    if reader not in kinds:
                        continue
                    timed(make, rows // 2)  # warm up: tracing, compiled kernels, connections
                    key = f"{layout}.{reader}.{place}"
                    results[key] = {"rows_s": 0.0, "steady_rows_s": 0.0,
                                    "second_half_rows_s": 0.0, "first_s": float("inf"),
                                    "second_halves": []}
        for _ in range(repeat):  # places alternate, so drifts in load hit them all alike
            for layout in local:
                for reader in kinds:
                    for place, (fs, bucket_name) in places.items():
                        path = local[layout] if fs is None else \
                            f"{bucket_name}/{layout}".lstrip("/")
                        n, first, secs, steady, second = timed(
                            readers(path, fs, rows // 2)[reader], rows // 2)
                        if n != rows:
                            raise SystemExit(f"{layout} {reader} {place}: {n} rows, not {rows}")
                        if each:
                            print(f"  {layout}.{reader}.{place}: epoch {secs:.3f} s, first "
                                  f"batch {first:.3f} s, steady {steady:,.0f}, second half "
                                  f"{second:,.0f} rows/s", flush=True)
                        r = results[f"{layout}.{reader}.{place}"]
                        r["rows_s"] = max(r["rows_s"], n / secs)
                        r["steady_rows_s"] = max(r["steady_rows_s"], steady)
                        r["second_half_rows_s"] = max(r["second_half_rows_s"], second)
                        r["second_halves"].append(round(second))
                        r["first_s"] = min(r["first_s"], first)
        ratios = {}
        for layout in local:
            for reader in kinds:
                base = results[f"{layout}.{reader}.local"]
                for place in places:
                    if place == "local":
                        continue
                    key = f"{layout}.{reader}.{place}"
                    ratios[key] = results[key]["steady_rows_s"] / base["steady_rows_s"]
                    ratios[key + ".epoch"] = results[key]["rows_s"] / base["rows_s"]
                    ratios[key + ".second_half"] = (results[key]["second_half_rows_s"]
                                                    / base["second_half_rows_s"])
                    ratios[key + ".second_half_median"] = (
                        statistics.median(results[key]["second_halves"])
                        / statistics.median(base["second_halves"]))
        seed = seed_experiment(gcs, small_rows) if small_rows else None
    return {"rows": rows, "repeat": repeat, "machine": started, "results": results,
            "ratios_vs_local": ratios, "seed": seed}


def main() -> None:
    ap = rows_args(__doc__, repeat=2)
    ap.add_argument("--small-rows", type=int, default=20_000)
    ap.add_argument("--layouts", default="rows,blocks")
    ap.add_argument("--readers", default="read_batches,make_dataset,make_dataset_graph")
    ap.add_argument("--each", action="store_true", help="print every epoch's figures too")
    ap.add_argument("--io-threads", type=int,
                    help="read_batches' and make_dataset's io_threads (default: their own)")
    args = ap.parse_args()
    global READ_IO_THREADS
    READ_IO_THREADS = args.io_threads
    doc = run(args.rows, args.repeat, args.small_rows, tuple(args.layouts.split(",")),
              tuple(args.readers.split(",")), args.each)
    for key, r in doc["results"].items():
        ratio = doc["ratios_vs_local"].get(key)
        epoch = doc["ratios_vs_local"].get(key + ".epoch")
        second = doc["ratios_vs_local"].get(key + ".second_half")
        median = doc["ratios_vs_local"].get(key + ".second_half_median")
        print(f"{key:34s} steady {r['steady_rows_s']:>11,.0f}, second half "
              f"{r['second_half_rows_s']:>11,.0f}, epoch {r['rows_s']:>11,.0f} rows/s, first "
              f"batch {r['first_s']:.3f} s"
              + (f"  {ratio:.2f}x / {second:.2f}x ({median:.2f}x) / {epoch:.2f}x local"
                 if ratio else ""))
    s = doc["seed"]
    if s:
        print(f"seed: {s['rows']:,} objects one by one {s['per_object_s']:.1f} s; the data set "
              f"{s['data_set_s']:.2f} s; {s['ratio']:,.0f}x")
    save_json(args.json, doc)


if __name__ == "__main__":
    main()
