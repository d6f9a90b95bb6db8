"""A probe for make_dataset on remote block files: could TensorFlow's native reader
on local copies beat tfspark's own reader on the store? Times, side by side on the same files:
copying every file of the data set from fake-gcs-server behind the 50 ms latency proxy to local
disk (pyarrow.fs.copy_files, threads), make_dataset on the local files (TensorFlow's reader),
and make_dataset on the store (tfspark's own reader); both readers consumed in a graph
(Dataset.reduce, as Keras fit consumes), one epoch at batch 1024 without shuffling.

If the copy takes no longer than the native read, files copied a few ahead of a native read
would run at about the native rate: a design for make_dataset on stores, not built yet.

    python bench/bench_spool_probe.py --rows 2000000 --repeat 3
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from common import machine, rows_args, save_json  # noqa: E402


def main() -> None:
    args = rows_args(__doc__).parse_args()
    import pyarrow.fs as pafs
    import tensorflow as tf
    from bench_object_store import on_gcs

    import tfspark

    def in_graph(ds) -> int:
        return int(ds.reduce(tf.constant(0, tf.int64),
                             lambda n, b: n + tf.shape(b["f0"], tf.int64)[0]))

    doc: dict = {"machine": machine(), "rows": args.rows, "runs": []}
    with on_gcs(args.rows, {"blocks": 1024}) as (gcs, local, bucket):
        remote = gcs.filesystem(0.05)
        spool = tempfile.mkdtemp(prefix="tfspark-bench-spool-")
        try:
            for k in range(args.repeat + 1):  # the first round warms up, untimed
                shutil.rmtree(spool)
                os.makedirs(spool)
                t = time.perf_counter()
                pafs.copy_files(f"{bucket}/blocks", spool, source_filesystem=remote,
                                destination_filesystem=pafs.LocalFileSystem(), use_threads=True)
                copy_s = time.perf_counter() - t
                t = time.perf_counter()
                assert in_graph(tfspark.make_dataset(local["blocks"], 1024, shuffle_buffer=0,
                                                     label_cols=[])) == args.rows
                native_s = time.perf_counter() - t
                t = time.perf_counter()
                assert in_graph(tfspark.make_dataset(
                    f"{bucket}/blocks", 1024, shuffle_buffer=0, label_cols=[],
                    filesystem=remote)) == args.rows
                own_s = time.perf_counter() - t
                if k == 0:
                    continue
                doc["runs"].append({"copy_s": copy_s, "native_local_s": native_s,
                                    "own_remote_s": own_s})
                print(f"copy to local disk at 50 ms {copy_s:.2f} s; make_dataset native on "
                      f"the copies {native_s:.2f} s; own on the store {own_s:.2f} s", flush=True)
        finally:
            shutil.rmtree(spool, ignore_errors=True)
    save_json(args.json, doc)

if __name__ == "__main__":
    main()
