"""How many files a remote reader opens ahead (store/concurrency.files_ahead), old rule against new,
alternating in one process on the same emulator: the old rule opened 1 file ahead per reading
thread in make_dataset's own reader and 2 in read_batches whatever the files' sizes; the new
one shares the 16 requests in flight among the threads by each file's ranges (the bench's
block files, 12.7 MiB each: 4 files ahead per thread).

The standard table, --rows rows in 8 block files (1024 rows per record), local disk and the
GCS emulator at 50 and 100 ms per request (tests/integration/stores.py), one epoch at batch
1024 without shuffling per reading, each reader made anew; medians of --repeat epochs of the
bench_object_store measures (steady: from the first batch on; second half), as ratios to local
disk (which reads no remote file, so the rule does not touch it).

    python bench/bench_files_ahead.py --rows 2000000 --repeat 25
"""

from __future__ import annotations

import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))

from common import machine, rows_args, save_json  # noqa: E402


def main() -> None:
    ap = rows_args(__doc__, repeat=25)
    ap.add_argument("--readers", default="make_dataset_graph,read_batches")
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from bench_object_store import on_gcs, readers, timed

    import tfspark.numpy.batches as numpy_reader
    import tfspark.tf.records as tf_reader
    from tfspark.store.concurrency import files_ahead

    rules = {"old": (lambda io, slots, sizes=None: 1, lambda io, slots, sizes=None: 2),
             "new": (files_ahead, files_ahead)}
    kinds = args.readers.split(",")
    half = args.rows // 2
    started = machine()
    got: dict[str, list[tuple[float, float]]] = {}
    with on_gcs(args.rows, {"blocks": 1024}) as (gcs, local, bucket):
        places = {"local": (local["blocks"], None),
                  "gcs+50ms": (f"{bucket}/blocks", gcs.filesystem(0.05)),
                  "gcs+100ms": (f"{bucket}/blocks", gcs.filesystem(0.1))}
        for kind in kinds:  # warm up: tracing, compiled kernels, connections
            for path, fs in places.values():
                timed(readers(path, fs, half)[kind], half)
        for _ in range(args.repeat):
            for kind in kinds:
                for place, (path, fs) in places.items():
                    for rule, (in_tf, in_numpy) in rules.items():
                        if place == "local" and rule == "old":
                            continue
                        tf_reader.files_ahead, numpy_reader.files_ahead = in_tf, in_numpy
                        n, _, _, steady, second = timed(readers(path, fs, half)[kind], half)
                        if n != args.rows:
                            raise SystemExit(f"{kind} {place}: {n} rows, not {args.rows}")
                        got.setdefault(f"{kind}.{place}.{rule}", []).append((steady, second))
    medians = {k: (statistics.median(s for s, _ in v), statistics.median(h for _, h in v))
               for k, v in got.items()}
    for key, (steady, second) in medians.items():
        base = medians[key.split(".")[0] + ".local.new"]
        print(f"{key:32s} steady {steady / 1e6:6.2f}M ({steady / base[0]:.2f}x), second half "
              f"{second / 1e6:6.2f}M ({second / base[1]:.2f}x) rows/s")
    save_json(args.json, {"rows": args.rows, "repeat": args.repeat, "machine": started,
                          "epochs": got})


if __name__ == "__main__":
    main()
