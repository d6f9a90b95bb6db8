"""Where make_dataset's own reader loses to TensorFlow's native reader on block files: the
stages of one epoch timed apart, on the same local files read both ways (the own reader
through a SubTreeFileSystem: the remote code path without a network).

The standard 10-column table, --rows rows in 8 block files (1024 rows per record), blocks of
64 records (make_dataset's reads without a shuffle). Median seconds per epoch of:

- records: the record blocks alone (make_dataset's _records, Dataset.reduce);
- records+parse: the same and the block parse, as make_dataset maps it;
- python: the own reader's threads alone, no TensorFlow (RecordSource.epoch);
- make_dataset in a graph (Dataset.reduce, as Keras fit reads) and in a Python loop taking
  each batch into NumPy;
and from_generator's cost per element: a 4-byte uint8 array, and 64 records of 52 KB as an
object array (one block as the own reader hands it on).

    python bench/bench_tf_handover.py --rows 2000000 --repeat 9
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_block import write_files  # noqa: E402
from common import machine, median_of, rows_args, save_json  # noqa: E402

BATCH = 1024
PER_READ = 64


def median_s(f: Callable[[], object], repeat: int) -> float:
    f()  # warm up
    return median_of(f, repeat)


def per_element_ms(item: object, spec: object, repeat: int, n: int = 31) -> float:
    """from_generator's milliseconds per element, the same item n times."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_generator(lambda: (item for _ in range(n)), output_signature=spec)
    return 1000 * median_s(lambda: ds.reduce(tf.constant(0, tf.int64), lambda k, _: k + 1),
                           repeat) / n


def main() -> None:
    args = rows_args(__doc__, repeat=9).parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import pyarrow.fs as pafs
    import tensorflow as tf

    import tfspark
    from tfspark.store.read_plan import plan_read
    from tfspark.store.shards import shard
    from tfspark.tf.dataset import _records
    from tfspark.tf.parsing import make_block_parser
    from tfspark.tf.records import RecordSource

    started = machine()
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-handover-")
    own_fs = pafs.SubTreeFileSystem("/", pafs.LocalFileSystem())
    out: dict[str, float] = {}

    def count(ds: object) -> Callable[[], object]:
        return lambda: ds.reduce(tf.constant(0, tf.int64), lambda k, _: k + 1)

    try:
        local = write_files(args.rows, os.path.join(tmp, "blocks"), 1024)
        for name, path, fs in (("native", local, None), ("own", local.lstrip("/"), own_fs)):
            plan = plan_read(path, filesystem=fs, label_cols=[])
            part = shard(plan, None, True)
            records = _records(part, PER_READ, False, None, 2, False, None, 1024)
            out[f"{name}.records"] = median_s(count(records), args.repeat)
            parsed = records.map(make_block_parser(plan.example_spec),
                                 num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
            out[f"{name}.records+parse"] = median_s(count(parsed), args.repeat)
            if name == "own":
                source = RecordSource(part, list(part.records or ()), PER_READ, 16, None)
                files = list(range(len(part.files)))
                out["own.python"] = median_s(
                    lambda s=source, f=files: sum(1 for _ in s.epoch(f, 2, False)), args.repeat)
            ds = tfspark.make_dataset(path, BATCH, shuffle_buffer=0, label_cols=[],
                                      filesystem=fs)
            out[f"{name}.make_dataset_graph"] = median_s(count(ds), args.repeat)
            out[f"{name}.make_dataset_loop"] = median_s(
                lambda d=ds: [{k: v.numpy() for k, v in b.items()} for b in d], args.repeat)
        block = np.empty(PER_READ, object)
        block[:] = [os.urandom(52_000) for _ in range(PER_READ)]
        out["from_generator.tiny_ms"] = per_element_ms(
            np.zeros(4, np.uint8), tf.TensorSpec([None], tf.uint8), args.repeat)
        out["from_generator.block_ms"] = per_element_ms(
            block, tf.TensorSpec([None], tf.string), args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for key, v in out.items():
        unit = "ms per element" if key.endswith("_ms") else "s per epoch"
        ratio = ""
        if key.startswith("own.") and key.replace("own.", "native.") in out:
            ratio = f"  native/own {out[key.replace('own.', 'native.')] / v:.2f}x"
        print(f"{key:28s} {v:8.3f} {unit}{ratio}")
    save_json(args.json, {"rows": args.rows, "repeat": args.repeat, "machine": started,
                          "seconds": out})


if __name__ == "__main__":
    main()
