"""Where make_dataset's own reader (every file not on local disk) loses time, with no store and
no latency: the same local files read by TensorFlow's TFRecordDataset and by the own reader
(forced with a pyarrow SubTreeFileSystem over the local disk), side by side in one run.

For each layout (rows; blocks of 1024), --rows rows of the standard table in 8 files, one epoch
at batch 1024 without shuffling (best of --repeat, after one warm-up pass):

  make_dataset native   tfspark.make_dataset(path, 1024, shuffle_buffer=0) with TensorFlow's
                        reader (make_dataset takes it for local block files only: the bench
                        sets tfspark.tf.dataset.NATIVE_FROM_ROWS = 1)
  make_dataset own      the same through filesystem=SubTreeFileSystem("/", LocalFileSystem())
  own reader alone      RecordSource.epoch: the reads and CRC checks, no TensorFlow
  own reader into TF    tf/records.epoch_blocks: the same through tf.data (from_generator and
                        the cut into records), no parsing, in a graph
  native records        TensorFlow's TFRecordDataset (2 parallel reads) batched as the own
                        reader's blocks, no parsing, in a graph: what "own reader into TF" does
  ..., in a graph       the two make_dataset rows consumed by Dataset.reduce, with no Python per
                        batch (as Keras fit consumes a tf.data.Dataset), instead of a for loop

The object-store targets (>= 0.9x local at 50 ms) compare with the native row, so the own
reader's cost on local disk bounds what hiding latency can reach.

Each case prints its best rate and the median CPU seconds of the process per epoch (all
threads: on 2 cores the CPU a reader spends is taken from the parse). --layouts picks one.

    python bench/bench_own_reader.py --rows 2000000
    python bench/bench_own_reader.py --rows 10000000 --repeat 5 --layouts blocks
"""

from __future__ import annotations

import glob
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench_block import write_files  # noqa: E402
from common import best_of, machine, rows_args, save_json  # noqa: E402

BATCH = 1024


def best(run, repeat: int) -> tuple[float, float]:
    """Best seconds of `repeat` timed calls, after one untimed (compiles, warms caches), and
    their median CPU seconds."""
    run()
    cpu = []

    def timed() -> None:
        start = time.process_time()
        run()
        cpu.append(time.process_time() - start)

    return best_of(timed, repeat), statistics.median(cpu)


def cases(path: str) -> dict:
    import pyarrow.fs as pafs
    import tensorflow as tf

    import tfspark
    from tfspark.store.read_plan import plan_read
    from tfspark.store.shards import shard as shard_plan
    from tfspark.tf.dataset import _UNSHUFFLED_ROWS
    from tfspark.tf.records import RecordSource, epoch_blocks

    own_fs = pafs.SubTreeFileSystem("/", pafs.LocalFileSystem())
    own_path = os.path.abspath(path).lstrip("/")
    plan = plan_read(own_path, filesystem=own_fs)
    part = shard_plan(plan, None, True)
    block = plan.rows_per_record
    per_read = BATCH if block == 1 else -(-max(BATCH, _UNSHUFFLED_ROWS) // block)
    order = list(range(len(part.files)))

    def drain(ds) -> None:
        for _ in ds:
            pass

    def in_graph(ds) -> None:
        ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)

    def source() -> RecordSource:
        return RecordSource(part, list(part.records), per_read, 16, None)

    return {
        "make_dataset native": lambda: drain(tfspark.make_dataset(path, BATCH, shuffle_buffer=0,
                                                                  label_cols=[])),
        "make_dataset own": lambda: drain(tfspark.make_dataset(
            own_path, BATCH, shuffle_buffer=0, label_cols=[], filesystem=own_fs)),
        "make_dataset native, in a graph": lambda: in_graph(tfspark.make_dataset(
            path, BATCH, shuffle_buffer=0, label_cols=[])),
        "make_dataset own, in a graph": lambda: in_graph(tfspark.make_dataset(
            own_path, BATCH, shuffle_buffer=0, label_cols=[], filesystem=own_fs)),
        "own reader alone": lambda: drain(source().epoch(order, 2, False)),
        "own reader into TF": lambda: in_graph(epoch_blocks(
            source(), tf.constant(order, tf.int64), 2, False)),
        "native records": lambda: in_graph(tf.data.TFRecordDataset(
            sorted(glob.glob(os.path.join(path, "**", "*.tfrecord"), recursive=True)),
            num_parallel_reads=2).batch(per_read)),
    }


def main() -> None:
    ap = rows_args(__doc__)
    ap.add_argument("--layouts", default="rows,blocks", help="rows, blocks or both")
    args = ap.parse_args()
    import tfspark.tf.dataset

    tfspark.tf.dataset.NATIVE_FROM_ROWS = 1  # "native": TensorFlow's reader for every layout
    results = {"machine": machine(), "rows": args.rows, "layouts": {}}
    with tempfile.TemporaryDirectory(prefix="tfspark-bench-own-") as tmp:
        for layout, block in (("rows", 1), ("blocks", 1024)):
            if layout not in args.layouts.split(","):
                continue
            path = write_files(args.rows, os.path.join(tmp, layout), block)
            timed = {name: best(run, args.repeat) for name, run in cases(path).items()}
            results["layouts"][layout] = timed
            print(f"{layout}:")
            for name, (s, cpu) in timed.items():
                graph = name.endswith("in a graph")  # compared with native in a graph
                native = timed["make_dataset native" + (", in a graph" if graph else "")][0]
                print(f"  {name:31s} {args.rows / s / 1e6:6.2f} M rows/s  "
                      f"({native / s:.2f}x native)  {cpu:.2f} CPU-s", flush=True)
    if args.json:
        save_json(args.json, results)


if __name__ == "__main__":
    main()
