"""String columns in read_batches: each value as a Python bytes object, made by a Python loop
over the offsets (before) or by Arrow in C++ (`LargeBinaryArray.to_numpy`, now), side by side
in one run.

The standard 10-column table (5 double, 3 long, 2 short strings) in 8 files per layout (rows;
blocks of 1024). One epoch of tfspark.read_batches(dir, 1024) with the default window shuffle
and without shuffling, both ways alternating (the module's string maker swapped), best of
--repeat after one warm-up epoch; rows/s and the process's median CPU seconds per epoch.

    python bench/bench_strings.py --rows 2000000 --repeat 5
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from bench_block import write_files  # noqa: E402
from common import machine, rows_args, save_json  # noqa: E402

BATCH = 1024


def python_loop(values: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The string maker before: a bytes slice per value in a list comprehension."""
    blob, offs = values
    raw = blob.tobytes()
    out = np.empty(len(offs) - 1, object)
    out[:] = [raw[a:b] for a, b in zip(offs[:-1].tolist(), offs[1:].tolist())]
    return out


def main() -> None:
    args = rows_args(__doc__, repeat=5).parse_args()
    import tfspark
    from tfspark.numpy import decode

    makers = {"python loop": python_loop, "arrow": decode._strings}
    results: dict = {"machine": machine(), "rows": args.rows, "cases": {}}
    with tempfile.TemporaryDirectory(prefix="tfspark-bench-strings-") as tmp:
        for layout, block in (("rows", 1), ("blocks", 1024)):
            path = write_files(args.rows, os.path.join(tmp, layout), block)
            for shuffle in ("window shuffle", "no shuffle"):
                kw = {} if shuffle == "window shuffle" else {"shuffle_buffer": 0}
                seconds: dict = {m: [] for m in makers}
                cpu: dict = {m: [] for m in makers}
                for k in range(args.repeat + 1):
                    for name, maker in makers.items():
                        decode._strings = maker
                        c, t = time.process_time(), time.perf_counter()
                        for _ in tfspark.read_batches(path, BATCH, label_cols=[], **kw):
                            pass
                        if k:  # the first round warms up
                            seconds[name].append(time.perf_counter() - t)
                            cpu[name].append(time.process_time() - c)
                decode._strings = makers["arrow"]
                case = {m: {"rows_per_s": args.rows / min(seconds[m]),
                            "cpu_s": statistics.median(cpu[m])} for m in makers}
                results["cases"][f"{layout}, {shuffle}"] = case
                before, now = case["python loop"], case["arrow"]
                print(f"{layout:6s} {shuffle:14s} python loop {before['rows_per_s'] / 1e6:5.2f}M "
                      f"rows/s {before['cpu_s']:5.2f} CPU-s | arrow "
                      f"{now['rows_per_s'] / 1e6:5.2f}M rows/s {now['cpu_s']:5.2f} CPU-s | "
                      f"{now['rows_per_s'] / before['rows_per_s']:.2f}x", flush=True)
    save_json(args.json, results)


if __name__ == "__main__":
    main()
