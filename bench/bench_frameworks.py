"""Examples/s into each framework from block files: the reader alone, the
reader feeding a small MLP's training steps, and the same steps fed from in-memory arrays, side
by side in one run.

The standard 10-column table, --rows rows in 8 block files (1024 rows per record), written once.
The model reads the 8 numeric columns (5 double, 3 long) as one float32 [batch, 8] array and
predicts f0 > 0 with an MLP 8 -> 64 -> 64 -> 1 (Adam, binary cross-entropy), batch 1024, one
epoch per run, no shuffling; best of --repeat, the three feeds alternating. Each framework runs
in a process of its own (Keras picks its backend once per process):

    jax         read_batches -> a jitted step (jax.example_libraries.optimizers.adam)
    torch       torch_dataset in a DataLoader (batch_size=None, no workers) -> a torch step
    keras-jax   Keras 3 on JAX: model.fit over read_batches vs over the arrays in memory
    keras-tf    Keras 3 on TensorFlow: model.fit over make_dataset vs over the arrays in memory

"reader" is the epoch read and handed to the framework as its arrays (device_put, tensors),
with no step; "fed / memory" is the share of the in-memory rate the reader keeps the step at.

    python bench/bench_frameworks.py --rows 1000000 --repeat 3 --json bench/results/frameworks.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import RESULT, child_result, machine, save_json  # noqa: E402

BATCH = 1024
NUMBERS = [f"f{i}" for i in range(5)] + [f"i{i}" for i in range(3)]
FRAMEWORKS = ("jax", "torch", "keras-jax", "keras-tf")


def child(framework: str, path: str, rows: int, repeat: int) -> dict:
    """Runs in the framework's own process: {feed: best examples/s}."""
    import numpy as np

    import tfspark

    def arrays(batch: dict) -> tuple[np.ndarray, np.ndarray]:
        x = np.stack([np.asarray(batch[n], np.float32) for n in NUMBERS], 1)
        return x, (np.asarray(batch["f0"]) > 0).astype(np.float32)

    def batches() -> object:
        return tfspark.read_batches(path, BATCH, shuffle_buffer=0, label_cols=[],
                                    columns=NUMBERS)

    memory = [arrays(b) for b in batches()]  # the same batches, held in memory
    if framework == "jax":
        feeds = _jax(arrays, batches, memory)
    elif framework == "torch":
        feeds = _torch(path, arrays, memory)
    else:
        feeds = _keras(framework, path, arrays, batches, memory)
    best: dict[str, float] = {}
    for _ in range(repeat + 1):  # the first round warms up (compiling, threads)
        for name, run in feeds.items():
            t = time.perf_counter()
            n = run()
            assert n == rows, (name, n, rows)
            best[name] = max(best.get(name, 0.0), n / (time.perf_counter() - t))
    return best


def _jax(arrays, batches, memory) -> dict:
    import jax
    import jax.numpy as jnp
    from jax.example_libraries import optimizers

    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = [(jax.random.normal(k1, (8, 64)) * 0.1, jnp.zeros(64)),
              (jax.random.normal(k2, (64, 64)) * 0.1, jnp.zeros(64)),
              (jax.random.normal(k3, (64, 1)) * 0.1, jnp.zeros(1))]

    def loss(p, x, y):
        for w, b in p[:-1]:
            x = jax.nn.relu(x @ w + b)
        z = (x @ p[-1][0] + p[-1][1])[:, 0]
        return jnp.mean(jnp.maximum(z, 0) - z * y + jnp.log1p(jnp.exp(-jnp.abs(z))))

    init, update, get = optimizers.adam(1e-3)
    state = [init(params)]

    @jax.jit
    def step(s, x, y):
        return update(0, jax.grad(loss)(get(s), x, y), s)

    def train(source) -> int:
        n = 0
        for x, y in source:
            state[0] = step(state[0], x, y)
            n += len(y)
        jax.block_until_ready(state[0])
        return n

    def reader() -> int:
        n = 0
        for b in batches():
            x, y = jax.device_put(arrays(b))
            n += len(y)
        jax.block_until_ready(x)
        return n

    return {"reader": reader, "fed": lambda: train(arrays(b) for b in batches()),
            "memory": lambda: train(memory)}


def _torch(path, arrays, memory) -> dict:
    import torch
    from torch.utils.data import DataLoader

    import tfspark

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tensors = [(torch.as_tensor(x), torch.as_tensor(y)) for x, y in memory]

    def loader() -> object:
        ds = tfspark.torch_dataset(path, BATCH, shuffle_buffer=0, label_cols=[], columns=NUMBERS)
        for b in DataLoader(ds, batch_size=None):
            x = torch.stack([b[n].float() for n in NUMBERS], 1)
            yield x, (b["f0"] > 0).float()

    def train(source) -> int:
        n = 0
        for x, y in source:
            opt.zero_grad()
            torch.nn.functional.binary_cross_entropy_with_logits(model(x)[:, 0], y).backward()
            opt.step()
            n += len(y)
        return n

    return {"reader": lambda: sum(len(y) for _, y in loader()), "fed": lambda: train(loader()),
            "memory": lambda: train(tensors)}


def _keras(framework, path, arrays, batches, memory) -> dict:
    import keras
    import numpy as np

    import tfspark

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss=keras.losses.BinaryCrossentropy(from_logits=True))
    x_all = np.concatenate([x for x, _ in memory])
    y_all = np.concatenate([y for _, y in memory])
    steps = len(memory)
    if framework == "keras-tf":
        import tensorflow as tf

        def source() -> object:
            ds = tfspark.make_dataset(path, BATCH, shuffle_buffer=0, label_cols=[],
                                      columns=NUMBERS)
            return ds.map(lambda b: (tf.stack([tf.cast(b[n], tf.float32) for n in NUMBERS], 1),
                                     tf.cast(b["f0"] > 0, tf.float32)))

        def reader() -> int:
            return sum(int(y.shape[0]) for _, y in source())
    else:
        def source() -> object:
            return (arrays(b) for b in batches())

        def reader() -> int:
            return sum(len(y) for _, y in source())

    def fit(data) -> int:
        model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
        return len(y_all)

    def from_memory() -> int:
        model.fit(x_all, y_all, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
        return len(y_all)

    return {"reader": reader, "fed": lambda: fit(source()), "memory": from_memory}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--json")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        framework, path, rows = a.child
        print(RESULT + json.dumps(child(framework, path, int(rows), a.repeat)))
        return
    from bench_block import write_files

    started = machine()
    out = tempfile.mkdtemp(prefix="tfspark-bench-fw-")
    path = write_files(a.rows, os.path.join(out, "blocks"), 1024)
    results = {}
    for framework in a.frameworks.split(","):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        if framework.startswith("keras-"):
            env["KERAS_BACKEND"] = {"keras-jax": "jax", "keras-tf": "tensorflow"}[framework]
        r, done = child_result([sys.executable, __file__, "--repeat", str(a.repeat), "--child",
                                framework, path, str(a.rows)], env, timeout=1800)
        if r is None:
            raise SystemExit(f"{framework} failed:\n{done.stderr[-3000:]}")
        r["fed_vs_memory"] = r["fed"] / r["memory"]
        results[framework] = r
        print(f"{framework:10s} reader {r['reader']:>11,.0f}  fed {r['fed']:>10,.0f}  "
              f"memory {r['memory']:>10,.0f} examples/s  fed/memory {r['fed_vs_memory']:.2f}",
              flush=True)
    save_json(a.json, {"rows": a.rows, "repeat": a.repeat, "machine": started,
                       "results": results})


if __name__ == "__main__":
    main()
