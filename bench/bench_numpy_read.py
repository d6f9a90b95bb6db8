"""NumPy reader benchmark: tfspark.read_batches with 1 and 2 threads against
make_dataset (TensorFlow) on the same files, row and block layout, side by side in one run.

The standard 10-column table (5 double, 3 long, 2 short strings) is written once per layout
into 8 files with tfspark's encoders (no Spark). Then, alternating and best of --repeat, one
epoch at batch 1024 without shuffling of:

  make_dataset         tfspark.make_dataset(dir, 1024, shuffle_buffer=0)
  read_batches x1      tfspark.read_batches(dir, 1024, shuffle_buffer=0, num_threads=1)
  read_batches x2      the same with num_threads=2
  bytes x1, bytes x2   the same with strings="bytes" (no Python object per string value)

Targets (this machine): read_batches x2 >= 1.7x x1, and >= 5x make_dataset on the
row files.

    python bench/bench_numpy_read.py --rows 1000000 --json bench/results/numpy_read.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_block import write_files  # noqa: E402
from common import machine, save_json  # noqa: E402

BATCH = 1024


def run(rows: int, block: int, repeat: int) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tfspark

    started = machine()
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-numpy-")
    try:
        dirs = {"rows": write_files(rows, os.path.join(tmp, "rows"), 1),
                "blocks": write_files(rows, os.path.join(tmp, "blocks"), block)}

        def count(batches, key="f0") -> int:
            return sum(len(b[key]) for b in batches)

        makers = {}
        for layout, d in dirs.items():
            makers[f"{layout}.make_dataset"] = (lambda d=d: count(
                tfspark.make_dataset(d, BATCH, shuffle_buffer=0, label_cols=[])))
            for strings, tag in (("object", "read_batches"), ("bytes", "bytes")):
                for threads in (1, 2):
                    makers[f"{layout}.{tag}_x{threads}"] = (
                        lambda d=d, t=threads, s=strings: count(tfspark.read_batches(
                            d, BATCH, shuffle_buffer=0, num_threads=t, label_cols=[],
                            strings=s)))
        for make in makers.values():  # warm up: tracing, compiled kernels, file cache
            make()
        runs: dict[str, list[float]] = {k: [] for k in makers}
        for _ in range(repeat):
            for name, make in makers.items():
                t = time.perf_counter()
                n = make()
                secs = time.perf_counter() - t
                if n != rows:
                    raise SystemExit(f"{name} read {n} rows, expected {rows}")
                runs[name].append(n / secs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    best = {k: max(v) for k, v in runs.items()}
    ratios = {
        "rows.threads_2_vs_1": best["rows.read_batches_x2"] / best["rows.read_batches_x1"],
        "rows.vs_make_dataset": best["rows.read_batches_x2"] / best["rows.make_dataset"],
        "blocks.threads_2_vs_1": best["blocks.read_batches_x2"] / best["blocks.read_batches_x1"],
        "blocks.vs_make_dataset": best["blocks.read_batches_x2"] / best["blocks.make_dataset"],
        "rows.bytes_threads_2_vs_1": best["rows.bytes_x2"] / best["rows.bytes_x1"],
        "rows.bytes_vs_make_dataset": best["rows.bytes_x2"] / best["rows.make_dataset"],
        "blocks.bytes_threads_2_vs_1": best["blocks.bytes_x2"] / best["blocks.bytes_x1"],
        "blocks.bytes_vs_make_dataset": best["blocks.bytes_x2"] / best["blocks.make_dataset"],
    }
    targets = {"rows.threads_2_vs_1": 1.7, "rows.vs_make_dataset": 5.0}
    return {"benchmark": "numpy_read", "machine": started, "rows": rows,
            "rows_per_record": block, "batch_size": BATCH, "repeat": repeat,
            "examples_per_s": best, "runs": runs, "ratios": ratios, "targets": targets,
            "met": {k: ratios[k] >= v for k, v in targets.items()}}


def report(doc: dict) -> str:
    best, r = doc["examples_per_s"], doc["ratios"]
    lines = [f"NumPy reader: {doc['rows']:,} rows x 10 columns, batch {doc['batch_size']}, "
             f"8 files per layout (blocks of {doc['rows_per_record']}), best of "
             f"{doc['repeat']}; {doc['machine']}",
             f"{'reader':<30}{'row layout':>14}{'block layout':>14}  examples/s"]
    for name in ("make_dataset", "read_batches_x1", "read_batches_x2", "bytes_x1", "bytes_x2"):
        lines.append(f"{name:<30}{best['rows.' + name]:>14,.0f}{best['blocks.' + name]:>14,.0f}")
    for k, v in r.items():
        target = doc["targets"].get(k)
        mark = "" if target is None else f"  (>= {target}x: " + \
            ("met" if v >= target else "MISSED") + ")"
        lines.append(f"{k:<30}{v:>8.2f}x{mark}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--rows-per-record", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args(argv)
    doc = run(args.rows, args.rows_per_record, args.repeat)
    print(report(doc))
    save_json(args.json, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
