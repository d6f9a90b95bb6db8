"""make_dataset on local files of the row layout (one row per record): TensorFlow's native
reader against tfspark's own, side by side in one process, with and without the default
window shuffle, consumed by a Python loop and in a graph (Dataset.reduce, as Keras fit
consumes). make_dataset takes the own reader for these files (tf/dataset.py NATIVE_FROM_ROWS);
the bench sets it per case.

    python bench/bench_rows_reader.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench_block import write_files  # noqa: E402
from common import machine, rows_args, save_json  # noqa: E402

BATCH = 1024


def main() -> None:
    args = rows_args(__doc__).parse_args()
    import tensorflow as tf

    import tfspark
    import tfspark.tf.dataset as tfd

    def loop(ds) -> None:
        for _ in ds:
            pass

    def graph(ds) -> None:
        ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)

    results: dict = {"machine": machine(), "rows": args.rows, "rows_s": {}}
    with tempfile.TemporaryDirectory(prefix="tfspark-bench-rows-") as tmp:
        path = write_files(args.rows, os.path.join(tmp, "rows"), 1)
        cases = {}
        for shuffle in (0, None):
            for how, consume in (("loop", loop), ("graph", graph)):
                for reader, from_rows in (("native", 1), ("own", 2)):
                    def run(s=shuffle, c=consume, n=from_rows) -> None:
                        tfd.NATIVE_FROM_ROWS = n
                        c(tfspark.make_dataset(path, BATCH, shuffle_buffer=s, label_cols=[]))
                    cases[(f"shuffle_buffer={shuffle}", how, reader)] = run
        for run in cases.values():  # warm up: tracing, kernels
            run()
        best: dict = {}
        for _ in range(args.repeat):  # the cases alternate
            for key, run in cases.items():
                t = time.perf_counter()
                run()
                best[key] = max(best.get(key, 0.0), args.rows / (time.perf_counter() - t))
    for (shuffle, how, reader), rate in best.items():
        native = best[(shuffle, how, "native")]
        print(f"{shuffle:20s} {how:6s} {reader:7s} {rate / 1e6:5.2f}M rows/s "
              f"({rate / native:.2f}x native)")
        results["rows_s"][f"{shuffle}.{how}.{reader}"] = rate
    save_json(args.json, results)


if __name__ == "__main__":
    main()
