"""make_dataset's epochs from an object store as Keras fit reads them: one dataset made once and
read epoch after epoch, median epoch time, local disk vs a GCS emulator (fake-gcs-server on
loopback) at 0 and 50 ms per request (the latency proxy of tests/integration/stores.py).

The standard 10-column table, --rows rows in 8 block files (1024 rows per record), batch 1024,
no shuffling. Each place's dataset is read once untimed, then --repeat epochs timed, consumed
two ways: in a graph (Dataset.reduce: no Python per batch, as Keras fit consumes a dataset)
and by a Python loop taking each batch into NumPy. Whole epochs, first batch included (at
50 ms about 0.3 s of an epoch of 2,000,000 rows is the first batch's wait).

To compare two versions of tfspark, run it from outside the repository with each on
PYTHONPATH in turn (the script's own directory comes first on sys.path, not the repository):

    cd /tmp && PYTHONPATH=/path/to/other/tfspark python /work/main/bench/bench_store_epochs.py
    python bench/bench_store_epochs.py --rows 2000000 --repeat 8
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))

from bench_block import write_files  # noqa: E402
from common import machine, median_of, rows_args, save_json  # noqa: E402

BATCH = 1024


def main() -> None:
    args = rows_args(__doc__, repeat=8).parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import pyarrow.fs as pafs
    import tensorflow as tf
    from stores import GcsEmulator

    import tfspark

    started = machine()
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-epochs-")
    gcs = GcsEmulator()
    seconds: dict[str, float] = {}
    try:
        local = write_files(args.rows, os.path.join(tmp, "blocks"), 1024)
        bucket = gcs.bucket()
        pafs.copy_files(local, f"{bucket}/blocks", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=gcs.filesystem())
        places = {"local": (local, None),
                  "gcs+0ms": (f"{bucket}/blocks", gcs.filesystem(0.0)),
                  "gcs+50ms": (f"{bucket}/blocks", gcs.filesystem(0.05))}
        for mode in ("graph", "loop"):
            for name, (path, fs) in places.items():
                ds = tfspark.make_dataset(path, BATCH, shuffle_buffer=0, label_cols=[],
                                          filesystem=fs)

                def epoch(ds=ds, mode=mode) -> None:
                    if mode == "graph":
                        ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
                    else:
                        for b in ds:
                            {k: v.numpy() for k, v in b.items()}

                epoch()
                seconds[f"{mode}.{name}"] = median_of(epoch, args.repeat)
    finally:
        gcs.close()
        shutil.rmtree(tmp, ignore_errors=True)
    for key, s in seconds.items():
        base = seconds[key.split(".")[0] + ".local"]
        print(f"{key:15s} {s:.3f} s/epoch  {args.rows / s:>11,.0f} rows/s  {base / s:.2f}x local")
    save_json(args.json, {"rows": args.rows, "repeat": args.repeat, "machine": started,
                          "tfspark": tfspark.__file__, "seconds": seconds})


if __name__ == "__main__":
    main()
