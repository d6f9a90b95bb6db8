"""make_dataset with tf.data's autotuner on and off, side by side (make_dataset turns it off on
machines of 2 cores or fewer; this measures why).

The standard 10-column table, --rows rows in 8 local files per layout (rows; blocks of 1024).
For each layout and consumer, epochs with the autotuner on and off alternate (--repeat each,
after a warm-up of each); every epoch is a fresh make_dataset(path, 1024), as the store bench's:

  graph      Dataset.reduce over the batches (as Keras fit reads), default shuffle
  graph-0    the same without a shuffle (shuffle_buffer=0)
  fit        keras Model.fit of a small MLP (4 float features -> 64 -> 64 -> 1) for one epoch

Reported: the median epoch and the slowest (the autotuner's slow epochs show there).

    python bench/bench_autotune.py --rows 2000000 --repeat 6
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_block import write_files  # noqa: E402
from bench_object_store import in_graph  # noqa: E402
from common import machine, rows_args, save_json  # noqa: E402

FEATURES = ("f1", "f2", "f3", "f4")


def dataset(path: str, off: bool, shuffled: bool, labels: list[str]):
    import tensorflow as tf

    import tfspark

    ds = tfspark.make_dataset(path, 1024, shuffle_buffer=None if shuffled else 0,
                              label_cols=labels)
    options = tf.data.Options()
    options.autotune.enabled = not off  # set either way: make_dataset's own choice is the test
    return ds.with_options(options)


def model():
    import keras

    inputs = {k: keras.Input((), name=k, dtype="float32") for k in FEATURES}
    h = keras.layers.Concatenate()([keras.layers.Reshape((1,))(v) for v in inputs.values()])
    for _ in range(2):
        h = keras.layers.Dense(64, activation="relu")(h)
    m = keras.Model(inputs, keras.layers.Dense(1)(h))
    m.compile("adam", "mse")
    return m


def consumers(path: str, rows: int, fitted) -> dict:
    def graph(off: bool, shuffled: bool):
        return lambda: in_graph(dataset(path, off, shuffled, []), rows // 2)

    def fit(off: bool):
        ds = dataset(path, off, True, ["f0"]).map(
            lambda x, y: ({k: x[k] for k in FEATURES}, y))
        return lambda: fitted.fit(ds, epochs=1, verbose=0, shuffle=False)

    return {"graph": lambda off: graph(off, True), "graph-0": lambda off: graph(off, False),
            "fit": fit}


def run(rows: int, repeat: int) -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = machine()
    tmp = tempfile.mkdtemp(prefix="tfspark-bench-autotune-")
    results: dict[str, dict] = {}
    try:
        fitted = model()
        for layout, block in (("rows", 1), ("blocks", 1024)):
            path = write_files(rows, os.path.join(tmp, layout), block)
            for name, make in consumers(path, rows, fitted).items():
                times: dict[bool, list[float]] = {False: [], True: []}
                for k in range(repeat + 1):
                    for off in (False, True):  # alternating: drifts in load hit both alike
                        t = time.perf_counter()
                        make(off)()
                        if k:  # the first of each is the warm-up
                            times[off].append(time.perf_counter() - t)
                for off, got in times.items():
                    key = f"{layout}.{name}.autotune_{'off' if off else 'on'}"
                    results[key] = {"median_s": statistics.median(got), "max_s": max(got),
                                    "epochs_s": [round(t, 3) for t in got]}
                    print(f"{key:32s} median {results[key]['median_s']:.3f} s, slowest "
                          f"{results[key]['max_s']:.3f} s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"rows": rows, "repeat": repeat, "machine": started, "cores": os.cpu_count(),
            "results": results}


def main() -> None:
    ap = rows_args(__doc__, repeat=6)
    args = ap.parse_args()
    save_json(args.json, run(args.rows, args.repeat))


if __name__ == "__main__":
    main()
