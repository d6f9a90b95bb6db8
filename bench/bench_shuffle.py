"""The global shuffle against the window shuffle: what each costs and how well it
mixes, side by side in one run, on local disk.

The standard 10-column table, --rows rows, written in order into 8 files per layout (rows;
blocks of 1024) with tfspark's encoders. One epoch at batch 1024 with the default window
(10 batches), read_batches on 2 threads:

  none      shuffle_buffer=0, shuffle_files=False (file order: the floor of mixing)
  window    the default: each epoch a file order, windows of 10 batches permuted
  global    shuffle="global": each epoch a permutation of 1,024-row units over all files,
            then the same windows (the first epoch of a reader also scans the files'
            framing for the units: timed apart, "scan")

Mixing: each row's place in the source order is known, so for every batch the mean distance
between the source places of consecutive rows, as a share of all rows (1/3 for a uniform
permutation, about 1/N in file order), and the share of the 8 files a batch draws rows from.

    python bench/bench_shuffle.py --rows 2000000 --json bench/results/shuffle.json
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_block import FILES, write_files  # noqa: E402
from common import machine, rows_args, save_json, table  # noqa: E402

BATCH = 1024
MODES = {"none": dict(shuffle_buffer=0, shuffle_files=False),
         "window": {}, "global": dict(shuffle="global")}


def places(rows: int) -> dict[bytes, int]:
    """Source place of each row, keyed by its (f0, f1) as float32 (as the files store them)."""
    t = table(rows)
    keys = np.stack([t.column("f0").to_numpy().astype(np.float32),
                     t.column("f1").to_numpy().astype(np.float32)], axis=1)
    return {k.tobytes(): i for i, k in enumerate(keys)}


def mixing(batches: list[np.ndarray], rows: int) -> tuple[float, float]:
    """(mean gap between consecutive rows' source places over rows, mean share of files)."""
    per_file = -(-rows // FILES)
    gaps = [np.abs(np.diff(b)).mean() / rows for b in batches if len(b) > 1]
    files = [len(np.unique(b // per_file)) / FILES for b in batches]
    return float(np.mean(gaps)), float(np.mean(files))


def run(rows: int, repeat: int) -> dict:
    import tfspark

    started = machine()
    where = places(rows)
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-shuffle-")
    out: dict = {"rows": rows, "machine": started, "results": {}}
    try:
        for layout, block in (("rows", 1), ("blocks", 1024)):
            path = write_files(rows, os.path.join(tmp, layout), block)
            for mode, kw in MODES.items():
                reader = tfspark.read_batches(path, BATCH, label_cols=[], seed=1, epochs=1,
                                              num_threads=2, **kw)
                t = time.perf_counter()
                first = next(iter(reader))  # the global shuffle's scan happens here
                scan = time.perf_counter() - t
                best, order = 0.0, []
                for _ in range(repeat):
                    t = time.perf_counter()
                    got = [b for b in reader]
                    secs = time.perf_counter() - t
                    n = sum(len(b["f0"]) for b in got)
                    if n != rows:
                        raise SystemExit(f"{layout} {mode}: {n} rows, not {rows}")
                    best = max(best, n / secs)
                    order = [np.array([where[np.array([a, b], np.float32).tobytes()]
                                       for a, b in zip(x["f0"], x["f1"])]) for x in got[:200]]
                gap, files = mixing(order, rows)
                out["results"][f"{layout}.{mode}"] = {
                    "rows_s": best, "first_batch_s": scan, "gap": gap, "files": files}
                del first
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for layout in ("rows", "blocks"):
        base = out["results"][f"{layout}.window"]["rows_s"]
        for mode in MODES:
            r = out["results"][f"{layout}.{mode}"]
            r["vs_window"] = r["rows_s"] / base
    return out


def main() -> None:
    args = rows_args(__doc__).parse_args()
    doc = run(args.rows, args.repeat)
    print(f"shuffles: {args.rows:,} rows, batch {BATCH}, 8 files, 2 threads; {doc['machine']}")
    print(f"{'layout.mode':16s} {'rows/s':>11s} {'vs window':>9s} {'first batch':>11s} "
          f"{'gap/rows':>8s} {'files':>6s}")
    for key, r in doc["results"].items():
        print(f"{key:16s} {r['rows_s']:>11,.0f} {r['vs_window']:>8.2f}x "
              f"{r['first_batch_s']:>10.2f}s {r['gap']:>8.3f} {r['files']:>6.2f}")
    save_json(args.json, doc)


if __name__ == "__main__":
    main()
