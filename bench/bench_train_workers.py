"""Distributed Keras training through tfspark.train_on_spark: 1 worker vs 2, from files and from
memory, side by side in one run on the loopback standalone cluster of scripts/local_cluster.py
(master + 2 workers, one executor of 1 core each, CPU TensorFlow).

For each worker count (each run through train_on_spark, so both pay the same machinery), the
same model (keras_inputs + Normalization + two Dense layers over 16 float features) is fit on
make_dataset(shard=ctx.shard) at a global batch of --batch, then on the same batches cached in
memory (filled before timing). Fastest epoch of each; the share of time spent waiting for input
is 1 - (from memory) / (from files).

    python bench/bench_train_workers.py --rows 400000 --epochs 3 \
        --json bench/results/train_workers.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from common import local_cluster_module, machine, save_json  # noqa: E402

FEATURES = 16


def fit_both(ctx: Any, data: str, batch: int, epochs: int) -> dict[str, Any]:
    """On each worker: fastest epoch from files, then from memory (same batches)."""
    import keras

    import tfspark
    from tfspark.store.fs import locate
    from tfspark.store.manifest import read_manifest

    n = ctx.num_workers

    def timed_fit(ds: Any) -> float:
        with ctx.strategy.scope():
            inputs = tfspark.keras_inputs(tfspark.FeatureSpec.from_dict(spec))
            x = keras.layers.Concatenate()([keras.ops.expand_dims(v, -1)
                                            for v in inputs.values()])
            x = keras.layers.Normalization(mean=0.0, variance=1.0)(x)
            for units in (256, 128):
                x = keras.layers.Dense(units, activation="relu")(x)
            model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(x))
            model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
        seconds: list[float] = []

        class Timer(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
                self.start = time.perf_counter()

            def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                seconds.append(time.perf_counter() - self.start)

        model.fit(ds, epochs=epochs, verbose=0, callbacks=[Timer()])
        return min(seconds)

    spec = read_manifest(locate(data)).spec.to_dict()
    files = tfspark.make_dataset(data, batch // n, shard=ctx.shard, label_cols=["label"])
    steps = int(files.cardinality())
    from_files = timed_fit(files)
    memory = files.cache()
    for _ in memory:  # fill the cache before any timing
        pass
    from_memory = timed_fit(memory)
    ctx.log(f"{steps} steps/epoch: files {from_files:.2f} s, memory {from_memory:.2f} s")
    return {"steps": steps, "files_s": from_files, "memory_s": from_memory}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--batch", type=int, default=512, help="global batch")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args(argv)
    launcher = local_cluster_module()
    import functools

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import tfspark

    work = Path(tempfile.mkdtemp(prefix="bench-train-"))
    cluster = launcher.LocalCluster(work / "cluster", workers=2, cores=1, memory="1g")
    cluster.start(timeout=180)
    rows = []
    try:
        builder = SparkSession.builder.appName("bench-train-workers")
        for key, value in launcher.cluster_conf(cluster, work / "driver").items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        launcher.wait_for_executors(spark, 2)
        cols = [F.randn(k).cast("float").alias(f"f{k}") for k in range(FEATURES)]
        df = spark.range(args.rows, numPartitions=8).select(*cols)
        df = df.withColumn("label", (F.col("f0") + F.col("f1") > 0).cast("long"))
        data = str(work / "ds")
        tfspark.write_tfrecords(df, data, label_cols=["label"], stats=False,
                                target_file_bytes=8 << 20)
        for n in (1, 2):
            started = time.perf_counter()
            got = tfspark.train_on_spark(spark, functools.partial(
                fit_both, data=data, batch=args.batch, epochs=args.epochs), n)
            wall = time.perf_counter() - started
            wait = max(0.0, 1 - got["memory_s"] / got["files_s"])
            rows.append({"workers": n, "wall_s": round(wall, 1), "steps": got["steps"],
                         "epoch_files_s": round(got["files_s"], 2),
                         "epoch_memory_s": round(got["memory_s"], 2),
                         "examples_per_s": round(args.rows / got["files_s"]),
                         "input_wait_share": round(wait, 3)})
            print(rows[-1], flush=True)
        spark.stop()
    finally:
        cluster.stop()
    one, two = rows
    print(f"\n{args.rows:,} rows, global batch {args.batch}, {args.epochs} epochs per run "
          f"(fastest epoch):")
    for r in rows:
        print(f"  {r['workers']} worker(s): epoch {r['epoch_files_s']:.2f} s from files, "
              f"{r['epoch_memory_s']:.2f} s from memory -> {r['examples_per_s']:,} examples/s, "
              f"waiting for input {100 * r['input_wait_share']:.0f}%; whole run {r['wall_s']} s")
    print(f"  2 workers / 1 worker epoch time: {two['epoch_files_s'] / one['epoch_files_s']:.2f}x")
    if args.json:
        save_json(args.json, {"machine": machine(), "args": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
