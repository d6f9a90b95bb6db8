"""Into a model training on a GPU: examples/s of the training steps fed by
read_batches from block files and from row files, against the same steps fed the same batches
held in memory, side by side in one run. Runs where there is no GPU too (on the CPU), to check it.

The table of ../shared/bench/gpu_feed_block.py: 40 float32 features, 4 int64 ids (0-999) and a
label (x0 + x1 > 0), --rows rows in 16 files per layout (rows: one Example per row; blocks: 1024
rows per record), written by tfspark's encoders without Spark. Its model: the ids through an
Embedding(1000, 16), concatenated with the floats, three Dense(512, relu), a sigmoid; Adam,
binary cross-entropy, batch 8192. Each framework runs in a process of its own:

    jax        read_batches -> jax.device_put -> a jitted step
    torch      read_batches -> torch tensors -> .to(device) -> a step (torch.compile is not used)
    torch-workers  torch_dataset in a DataLoader of 4 worker processes (each reading its part on
               2 threads and stacking the step's tensors), pinned memory -> the same step
    keras-jax  Keras 3 on JAX: model.fit over a generator of read_batches' batches
    grain      grain_dataset(stack=...) under Grain's mp_prefetch (4 worker processes, 2
               reading threads each) -> the jax step
    jax-ahead  the jax step, every feed's batches (memory's too) put on the device by a
               thread of their own two batches ahead of the step
    jax-processes  the jax-ahead step fed by read_batches(stack=..., processes=--processes):
               decoded in reading processes, handed over in shared memory

"reader" is read_batches alone (the batches made into the step's arrays, no step); "fed" the
training steps fed by it; "stacked reader" and "stacked" the same with read_batches(stack=...)
making the step's two matrices in the reader's threads (no np.stack in the loop); "memory"
feeds the same steps the batches of one epoch read beforehand and held in host memory
as the step takes them (NumPy arrays; for Keras the same generator over the list), so the host
to device copy is in both. A timed run is --epochs passes; best of --repeat after a warm-up
round, the feeds alternating. The reader uses its defaults (window shuffle, num_threads = the
cores, at most 8) unless --threads is given.

    python bench/bench_gpu_feed.py --rows 2000000 --json bench/results/gpu_feed.json
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

BATCH = 8192
FLOATS = [f"x{i}" for i in range(40)]
IDS = [f"c{i}" for i in range(4)]
LAYOUTS = {"rows": 1, "blocks": 1024}
STACK = {"x": FLOATS, "ids": IDS}  # read_batches(stack=): the step's two matrices
FRAMEWORKS = ("jax", "torch", "torch-workers", "keras-jax", "grain", "jax-ahead",
              "jax-processes")
WORKERS = 4  # torch-workers, grain: processes, each reading on 2 threads unless --threads


def data(rows: int):
    """The table and its FeatureSpec (built here: the GPU machine has no Spark to infer it)."""
    import numpy as np
    import pyarrow as pa

    from tfspark.spec import FeatureSpec

    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, len(FLOATS)), dtype=np.float32)
    cols = {n: pa.array(x[:, i]) for i, n in enumerate(FLOATS)}
    cols.update({n: pa.array(rng.integers(0, 1000, rows)) for n in IDS})
    cols["label"] = pa.array((x[:, 0] + x[:, 1] > 0).astype(np.int64))

    def feature(name: str, dtype: str, source: str) -> dict:
        return {"name": name, "path": [name], "kind": "fixed", "dtype": dtype,
                "encoding": "float" if dtype == "float32" else "int", "source_type": source,
                "shape": [], "nullable": False, "label": name == "label"}

    spec = FeatureSpec.from_dict({
        "format": "tfspark.feature_spec", "version": 1,
        "features": [feature(n, "float32", "float") for n in FLOATS]
        + [feature(n, "int64", "bigint") for n in IDS + ["label"]]})
    return pa.table(cols), spec


def child(framework: str, path: str, rows: int, repeat: int, epochs: int,
          threads: int | None, processes: int = 4) -> dict:
    """Runs in the framework's own process: {feed: best examples/s, device: what ran the step}."""
    import numpy as np

    import tfspark

    def arrays(batch: dict) -> tuple:
        x = np.stack([batch[n] for n in FLOATS], 1)
        ids = np.stack([batch[n] for n in IDS], 1).astype(np.int32)
        return x, ids, batch["label"].astype(np.float32)

    def batches(passes: int, stack: dict | None = None) -> object:  # each pass a new shuffle
        return tfspark.read_batches(path, BATCH, epochs=passes, seed=1, label_cols=[],
                                    num_threads=threads, stack=stack)

    def reader() -> object:
        return (arrays(b) for b in batches(epochs))

    def stacked() -> object:  # the reader's threads make the step's matrices
        return (_matrices(b) for b in batches(epochs, STACK))

    memory = [arrays(b) for b in batches(1)]

    def from_memory() -> object:
        return (b for _ in range(epochs) for b in memory)

    feeds = {"reader": reader, "fed": reader, "stacked reader": stacked, "stacked": stacked,
             "memory": from_memory}
    if framework == "torch-workers":  # decoded in DataLoader worker processes
        feeds = {"reader": _loader(path, epochs, threads), "memory": from_memory}
        feeds["fed"] = feeds["reader"]
    if framework == "grain":  # decoded in Grain's worker processes
        feeds = {"reader": _grain(path, epochs, rows, threads), "memory": from_memory}
        feeds["fed"] = feeds["reader"]
    if framework == "jax-processes":  # decoded in read_batches' reading processes
        spread = tfspark.read_batches(path, BATCH, epochs=epochs, seed=1, label_cols=[],
                                      num_threads=threads, stack=STACK, processes=processes)
        feeds = {"reader": lambda: (_matrices(b) for b in spread), "memory": from_memory}
        feeds["fed"] = feeds["reader"]
    train, device = {"jax": _jax, "torch": _torch, "torch-workers": _torch,
                     "keras-jax": _keras, "grain": _jax,
                     "jax-ahead": lambda: _jax(ahead=True),
                     "jax-processes": lambda: _jax(ahead=True)}[framework]()
    best: dict[str, float] = {}
    for _ in range(repeat + 1):  # the first round warms up (compiling, threads, caches)
        for name, source in feeds.items():
            t = time.perf_counter()
            n = sum(len(b[2]) for b in source()) if "reader" in name else train(source())
            assert n == rows * epochs or framework == "grain", (name, n, rows * epochs)
            best[name] = max(best.get(name, 0.0), n / (time.perf_counter() - t))
    best["device"] = device
    return best


def _matrices(batch: dict) -> tuple:
    """The step's arrays from a batch read with stack=STACK (no copy of the matrices)."""
    return batch["x"], batch["ids"], batch["label"].astype("float32")


def _grain(path: str, epochs: int, rows: int, threads: int | None):
    """grain_dataset under Grain's mp_prefetch (WORKERS processes, each reading its slice on
    2 threads with stack=STACK): one iterator over many epochs, each timed run taking the
    next `epochs` epochs' rows from it (the workers start once, as a training run's do)."""
    import grain

    import tfspark

    ds = tfspark.grain_dataset(path, BATCH, epochs=None, seed=1, label_cols=[],
                               num_threads=threads or 2, stack=STACK).map(_matrices)
    it = iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=WORKERS)))

    def run() -> object:
        n = 0
        while n < rows * epochs:
            b = next(it)
            n += len(b[2])
            yield b
    return run


def _jax(ahead: bool = False):
    import jax
    import jax.numpy as jnp
    from jax.example_libraries import optimizers

    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    sizes = [len(FLOATS) + 16 * len(IDS), 512, 512, 512, 1]
    params = {"embed": jax.random.normal(keys[0], (1000, 16)) * 0.05,
              "dense": [(jax.random.normal(k, (a, b)) * (2 / a) ** 0.5, jnp.zeros(b))
                        for k, a, b in zip(keys[1:], sizes, sizes[1:])]}

    def loss(p, x, ids, y):
        h = jnp.concatenate([x, p["embed"][ids].reshape(len(ids), -1)], 1)
        for w, b in p["dense"][:-1]:
            h = jax.nn.relu(h @ w + b)
        z = (h @ p["dense"][-1][0] + p["dense"][-1][1])[:, 0]
        return jnp.mean(jnp.maximum(z, 0) - z * y + jnp.log1p(jnp.exp(-jnp.abs(z))))

    init, update, get = optimizers.adam(1e-3)
    state = [init(params)]

    @jax.jit
    def step(s, x, ids, y):
        return update(0, jax.grad(loss)(get(s), x, ids, y), s)

    def train(source) -> int:
        n = 0
        for batch in (_on_device(source) if ahead else source):
            x, ids, y = batch if ahead else jax.device_put(batch)
            state[0] = step(state[0], x, ids, y)
            n += len(batch[2])
        jax.block_until_ready(state[0])
        return n

    return train, str(jax.devices()[0])


def _on_device(source, depth: int = 2):
    """The batches of `source` put on the device by a thread of their own, `depth` ahead."""
    import queue
    import threading

    import jax

    items: queue.Queue = queue.Queue(depth)
    end = object()

    def put() -> None:
        for batch in source:
            items.put(jax.device_put(batch))
        items.put(end)

    threading.Thread(target=put, daemon=True).start()
    while (item := items.get()) is not end:
        yield item


def _torch():
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(1000, 16)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(len(FLOATS) + 16 * len(IDS), 512), torch.nn.ReLU(),
                torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                torch.nn.ReLU(), torch.nn.Linear(512, 1))

        def forward(self, x, ids):
            return self.mlp(torch.cat([x, self.embed(ids).flatten(1)], 1))[:, 0]

    model = Model().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train(source) -> int:
        n = 0
        for x, ids, y in source:
            x, ids, y = (torch.as_tensor(a).to(device, non_blocking=True) for a in (x, ids, y))
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.binary_cross_entropy_with_logits(model(x, ids), y).backward()
            opt.step()
            n += len(y)
        if device == "cuda":
            torch.cuda.synchronize()
        return n

    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    return train, name


def _loader(path: str, epochs: int, threads: int | None):
    """torch_dataset in a DataLoader of WORKERS processes (fork: this process runs no Spark or
    TensorFlow), each stacking its batches into the step's tensors, pinned on a GPU machine."""
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    import tfspark

    class Stacked(IterableDataset):
        def __init__(self) -> None:
            self.batches = tfspark.torch_dataset(path, BATCH, epochs=epochs, seed=1,
                                                 label_cols=[], num_threads=threads or 2)

        def __iter__(self):
            for b in self.batches:
                yield (torch.stack([b[n] for n in FLOATS], 1),
                       torch.stack([b[n] for n in IDS], 1).int(), b["label"].float())

    loader = DataLoader(Stacked(), batch_size=None, num_workers=WORKERS, persistent_workers=True,
                        pin_memory=torch.cuda.is_available(), prefetch_factor=4)
    return lambda: iter(loader)


def _keras():
    import jax
    import keras

    keras.utils.set_random_seed(0)
    x_in = keras.Input((len(FLOATS),))
    ids_in = keras.Input((len(IDS),), dtype="int32")
    h = keras.layers.Concatenate()(
        [x_in, keras.layers.Flatten()(keras.layers.Embedding(1000, 16)(ids_in))])
    for _ in range(3):
        h = keras.layers.Dense(512, activation="relu")(h)
    model = keras.Model([x_in, ids_in], keras.layers.Dense(1, activation="sigmoid")(h))
    model.compile(optimizer="adam", loss="binary_crossentropy")

    def train(source) -> int:
        counted = [0]

        def pairs() -> object:
            for x, ids, y in source:
                counted[0] += len(y)
                yield (x, ids), y

        # steps_per_epoch=None: Keras runs the generator to its end, one "epoch"
        model.fit(pairs(), epochs=1, verbose=0)
        return counted[0]

    return train, str(jax.devices()[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--epochs", type=int, default=3, help="passes per timed run")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, help="read_batches' num_threads (default: its own)")
    ap.add_argument("--processes", type=int, default=4, help="jax-processes' reading processes")
    ap.add_argument("--switch-interval", type=float,
                    help="sys.setswitchinterval in each framework's process (default: 5 ms)")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--json")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        if a.switch_interval:
            sys.setswitchinterval(a.switch_interval)
        framework, path, rows = a.child
        r = child(framework, path, int(rows), a.repeat, a.epochs, a.threads, a.processes)
        print(RESULT + json.dumps(r), flush=True)
        return
    from bench_block import write_files

    started = machine()
    out = tempfile.mkdtemp(prefix="tfspark-bench-gpu-")
    table, spec = data(a.rows)
    results: dict = {}
    for layout in a.layouts.split(","):
        t = time.perf_counter()
        path = write_files(a.rows, os.path.join(out, layout), LAYOUTS[layout], data=table, files=16)
        print(f"{layout}: wrote {a.rows:,} rows in {time.perf_counter() - t:.1f} s", flush=True)
        for framework in a.frameworks.split(","):
            env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
            args = ["--repeat", str(a.repeat), "--epochs", str(a.epochs),
                    "--processes", str(a.processes)]
            if a.threads:
                args += ["--threads", str(a.threads)]
            if a.switch_interval:
                args += ["--switch-interval", str(a.switch_interval)]
            r, done = child_result([sys.executable, __file__, *args, "--child", framework, path,
                                    str(a.rows)], env, timeout=900)
            if r is None:
                print(f"{layout} {framework} failed:\n{done.stderr[-3000:]}", flush=True)
                continue
            r["fed_vs_memory"] = r["fed"] / r["memory"]
            if "stacked" in r:
                r["stacked_vs_memory"] = r["stacked"] / r["memory"]
            results[f"{layout}/{framework}"] = r
            line = "  ".join(f"{k} {v:,.0f}" for k, v in r.items()
                             if isinstance(v, float) and "_vs_" not in k)
            ratios = "  ".join(f"{k} {v:.2f}" for k, v in r.items() if "_vs_" in k)
            print(f"{layout:6s} {framework:13s} {line} examples/s  {ratios}  ({r['device']})",
                  flush=True)
    save_json(a.json, {"rows": a.rows, "epochs": a.epochs, "repeat": a.repeat,
                       "threads": a.threads, "switch_interval": a.switch_interval,
                       "machine": started, "results": results})


if __name__ == "__main__":
    main()
