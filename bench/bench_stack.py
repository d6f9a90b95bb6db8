"""read_batches(stack=...) on the CPU: how a window's columns are best written into one matrix,
and the reader with stack= against the same reader plus np.stack in the loop (the GPU side is
bench_gpu_feed.py).

1. One shuffle window of the GPU table (81,920 rows x 40 float32 columns), ms per window, best
   of --repeat x 20: "per batch" permutes each column then np.stack()s each 8,192-row batch
   (what a training loop did); "blocks" permutes each column then writes the matrix 8,192 rows
   at a time (stacking.fill); "strided" takes each column straight into its strided column of
   the matrix; "join, gather" writes the columns into a matrix, then gathers its rows.
2. read_batches alone over --rows rows of that table in 16 block files (1,024 rows per
   record), batch 8,192: rows/s, best of --repeat, alternating, with the default window
   shuffle and without one.

    python bench/bench_stack.py --rows 2000000 --json bench/results/stack.json
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import best_of, machine, rows_args, save_json  # noqa: E402

WINDOW, BATCH = 81_920, 8_192


def fills(repeat: int) -> dict[str, float]:
    """ms per window of each way of building the matrix."""
    rng = np.random.default_rng(0)
    cols = [rng.standard_normal(WINDOW, dtype=np.float32) for _ in range(40)]
    perm = rng.permutation(WINDOW)

    def per_batch() -> None:
        taken = [c[perm] for c in cols]
        for lo in range(0, WINDOW, BATCH):
            np.stack([c[lo:lo + BATCH] for c in taken], 1)

    def blocks() -> None:
        taken = [c[perm] for c in cols]
        m = np.empty((WINDOW, len(cols)), np.float32)
        for lo in range(0, WINDOW, BATCH):
            for j, c in enumerate(taken):
                m[lo:lo + BATCH, j] = c[lo:lo + BATCH]

    def strided() -> None:
        m = np.empty((WINDOW, len(cols)), np.float32)
        for j, c in enumerate(cols):
            np.take(c, perm, out=m[:, j], mode="clip")

    def join_gather() -> None:
        m = np.empty((WINDOW, len(cols)), np.float32)
        for j, c in enumerate(cols):
            m[:, j] = c
        np.take(m, perm, axis=0)

    out = {}
    for name, fn in (("per batch", per_batch), ("blocks", blocks), ("strided", strided),
                     ("join, gather", join_gather)):
        fn()
        out[name] = 1e3 * best_of(lambda f=fn: [f() for _ in range(20)], repeat) / 20
    return out


def reads(rows: int, repeat: int) -> dict[str, float]:
    """rows/s of read_batches with np.stack in the loop and with stack=, per shuffle."""
    from bench_block import write_files
    from bench_gpu_feed import FLOATS, IDS, STACK, data

    import tfspark

    table, spec = data(rows)
    path = write_files(rows, os.path.join(tempfile.mkdtemp(prefix="tfspark-bench-stack-"),
                                          "blocks"), 1024, data=table, spec=spec, files=16)

    def loop(buffer: int | None) -> int:
        n = 0
        for b in tfspark.read_batches(path, BATCH, seed=1, label_cols=[],
                                      shuffle_buffer=buffer):
            x = np.stack([b[k] for k in FLOATS], 1)
            np.stack([b[k] for k in IDS], 1)
            n += len(x)
        return n

    def stacked(buffer: int | None) -> int:
        return sum(len(b["x"]) for b in tfspark.read_batches(
            path, BATCH, seed=1, label_cols=[], shuffle_buffer=buffer, stack=STACK))

    out: dict[str, float] = {}
    for buffer, shuffle in ((None, "window"), (0, "none")):
        for _ in range(repeat):
            for name, fn in (("np.stack in the loop", loop), ("stack=", stacked)):
                t = time.perf_counter()
                n = fn(buffer)
                key = f"{shuffle}: {name}"
                out[key] = max(out.get(key, 0.0), n / (time.perf_counter() - t))
    return out


def main() -> None:
    a = rows_args(__doc__, repeat=4).parse_args()
    started = machine()
    f = fills(a.repeat)
    for name, ms in f.items():
        print(f"window of {WINDOW:,} x 40, {name:13s} {ms:6.2f} ms")
    r = reads(a.rows, a.repeat)
    for name, rate in r.items():
        print(f"read_batches, {name:28s} {rate:>12,.0f} rows/s")
    save_json(a.json, {"rows": a.rows, "repeat": a.repeat, "machine": started,
                       "fill_ms": f, "rows_per_s": r})


if __name__ == "__main__":
    main()
