"""tfspark.train_on_spark on the local[2] session: two barrier tasks train one model together
under MultiWorkerMirroredStrategy (TensorFlow) or a DataParallel distribution (Keras on JAX,
no TensorFlow imported), the chief's value comes back; bad input fails before any
task starts, with one line naming what to change; a failing train_fn fails with its message.
(The loopback-cluster proofs, stage retry after a killed worker included, are in
tests/cluster/test_cluster_training.py.)
"""

from __future__ import annotations

import os
import re
import sys

import pytest
from jaxcheck import path_without_tensorflow
from pyspark import cloudpickle

import tfspark
from tfspark.errors import OptionError, TrainingError
from tfspark.keras.resume import checkpoint_name

pytestmark = [pytest.mark.spark, pytest.mark.tf, pytest.mark.slow, pytest.mark.training]

# The workers cannot import this test module: its functions travel by value, as a notebook's do.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def fit_xor_like(ctx):
    """A small model fit on each worker's own half of synthetic data; what every worker saw."""
    import json

    import keras
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(ctx.index)
    x = rng.normal(size=(2048, 4)).astype("float32")
    y = (x[:, 0] * x[:, 1] + x[:, 2] > 0).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    with ctx.strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy", metrics=["accuracy"])
    history = model.fit(ds.with_options(options), epochs=3, verbose=0)
    ctx.log(f"weights sum {float(sum(w.sum() for w in model.get_weights())):.6f}")
    return {"index": ctx.index, "is_chief": ctx.is_chief, "shard": ctx.shard,
            "replicas": ctx.strategy.num_replicas_in_sync,
            "tf_config": json.loads(os.environ["TF_CONFIG"]),
            "weights": [w.tolist() for w in model.get_weights()],
            "history": history.history}


def test_two_barrier_tasks_train_one_model_and_the_chief_answers(spark, tmp_path):
    ckpt = tmp_path / "ckpt"
    got = tfspark.train_on_spark(spark, fit_xor_like, 2, checkpoint_dir=str(ckpt))
    assert got["index"] == 0 and got["is_chief"] and got["shard"] == (2, 0)
    assert got["replicas"] == 2
    workers = got["tf_config"]["cluster"]["worker"]
    assert len(workers) == 2 and len(set(workers)) == 2 and got["tf_config"]["task"]["index"] == 0
    assert len(got["history"]["loss"]) == 3
    assert got["history"]["loss"][-1] < got["history"]["loss"][0]
    # Both workers ended with the same weights (one model, gradients summed across workers):
    # each logged its sum.
    logs = [(ckpt / "logs" / f"worker-{i}.log").read_text() for i in (0, 1)]
    sums = [next(ln.split("weights sum ")[1] for ln in log.splitlines() if "weights sum" in ln)
            for log in logs]
    assert sums[0] == sums[1], sums
    assert re.search(r"^\[tfspark worker 1/2 task \d+\] started: 2 replicas in sync$", logs[1],
                     re.M), logs[1]


def fit_on_jax(ctx):
    """fit_xor_like's model on Keras's JAX backend: each worker feeds its own batches of 64,
    from a Python iterator as read_batches gives them."""
    import keras
    import numpy as np

    rng = np.random.default_rng(ctx.index)
    x = rng.normal(size=(2048, 4)).astype("float32")
    y = (x[:, 0] * x[:, 1] + x[:, 2] > 0).astype("float32")
    with ctx.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation="relu"),
                                  keras.layers.Dense(1, activation="sigmoid")])
        model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy", metrics=["accuracy"])

    def batches():
        while True:
            for i in range(0, len(x), 64):
                yield x[i:i + 64], y[i:i + 64]

    history = model.fit(batches(), steps_per_epoch=len(x) // 64, epochs=3, verbose=0)
    weights = model.get_weights()
    ctx.log(f"weights sum {float(sum(w.sum() for w in weights)):.6f}")
    ctx.save(model, os.path.join(ctx.checkpoint_dir, "model.keras"))  # on every worker
    import jax

    return {"index": ctx.index, "backend": keras.backend.backend(),
            "devices": jax.device_count(), "processes": jax.process_count(),
            "batch_sharding": str(ctx.distribution.get_data_layout((128, 4)).axes),
            "tensorflow_imported": "tensorflow" in sys.modules, "history": history.history}


def test_two_jax_workers_train_one_model(spark, tmp_path):
    # The training processes run as where TensorFlow is not installed.
    path = path_without_tensorflow(tmp_path)
    ckpt = tmp_path / "ckpt"
    got = tfspark.train_on_spark(spark, fit_on_jax, 2, backend="jax", checkpoint_dir=str(ckpt),
                                 env={"PYTHONPATH": path})
    assert got["index"] == 0 and got["backend"] == "jax"
    assert got["processes"] == 2 and got["devices"] == 2  # one CPU device in each process
    assert got["batch_sharding"] == "('batch', None)", got  # the batch split over the workers
    assert not got["tensorflow_imported"]
    assert len(got["history"]["loss"]) == 3
    assert got["history"]["loss"][-1] < got["history"]["loss"][0]
    logs = [(ckpt / "logs" / f"worker-{i}.log").read_text() for i in (0, 1)]
    sums = [next(ln.split("weights sum ")[1] for ln in log.splitlines() if "weights sum" in ln)
            for log in logs]
    assert sums[0] == sums[1], sums  # one model: the gradients of both workers' batches
    assert re.search(r"^\[tfspark worker 1/2 task \d+\] started: 2 processes, 2 devices in "
                     r"sync$", logs[1], re.M), logs[1]
    # The chief's saved model holds the trained weights (the other worker saved to scratch).
    import keras

    saved = keras.saving.load_model(str(ckpt / "model.keras"))
    assert f"{float(sum(w.sum() for w in saved.get_weights())):.6f}" == sums[0]
    assert sorted(p.name for p in ckpt.iterdir()) == ["logs", "model.keras"]


def test_a_failing_train_fn_fails_with_its_own_message(spark):
    def boom(ctx):
        if ctx.index == 1:
            raise ValueError("column 'age' is not in the data set")
        return 1

    with pytest.raises(TrainingError) as e:
        tfspark.train_on_spark(spark, boom, 2)
    text = str(e.value)
    assert "tfspark training worker 1 exited with status 1" in text
    # the exception on the first line, which is all a command line shows
    assert "(ValueError: column 'age' is not in the data set)" in text.splitlines()[0], text


@pytest.mark.parametrize("kwargs, words", [
    ({"num_workers": 0}, "num_workers must be a positive int"),
    ({"num_workers": "2"}, "num_workers must be a positive int"),
    ({"num_workers": 3}, "num_workers=3 but the cluster has 2 task slot(s)"),
    ({"num_workers": 2, "checkpoint_dir": "s3://bucket/ckpt"}, "checkpoint_dir 's3://bucket/ckpt'"),
    ({"num_workers": 1, "train_fn": "train.py"}, "train_fn must be a function"),
    ({"num_workers": 1, "backend": "torch"}, "backend='torch': train_on_spark trains on"),
])
def test_bad_arguments_fail_before_any_task(spark, kwargs, words):
    args = {"train_fn": fit_xor_like, **kwargs}
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(OptionError) as e:
        tfspark.train_on_spark(spark, **args)
    assert words in str(e.value)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs  # no job ran


def test_a_train_fn_that_cannot_be_pickled_is_named(spark):
    import threading

    lock = threading.Lock()

    def uses_a_lock(ctx):
        with lock:
            return 1

    with pytest.raises(OptionError, match=r"train_fn cannot be sent to the executors"):
        tfspark.train_on_spark(spark, uses_a_lock, 1)


def test_a_path_the_executors_cannot_see_fails_before_training(spark, tmp_path):
    missing = tmp_path / "not-here"
    with pytest.raises(OptionError, match=r"cannot see '.*not-here'"):
        tfspark.train_on_spark(spark, fit_xor_like, 2, shared_paths=[str(missing)])
    assert not (tmp_path / "ckpt").exists()


def fit_from_reader(path: str, stop: bool, ctx):
    """ctx.fit over each worker's read_batches shard (the two features as one stacked input),
    a checkpoint every `every` steps; stop: both workers fail once at the checkpoint a few
    steps into the second epoch (after it is saved), as a preempted run would."""
    import time
    from pathlib import Path

    import keras

    reader = tfspark.read_batches(path, 32, label_cols=["y"], shard=ctx.shard, epochs=None,
                                  seed=0, stack={"x": ["x1", "x2"]})
    every = 3
    with ctx.scope():
        keras.utils.set_random_seed(0)
        x = keras.Input((2,), name="x")
        model = keras.Model({"x": x}, keras.layers.Dense(1, activation="sigmoid")(
            keras.layers.Dense(8, activation="relu")(x)))
        model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")  # has variables
    marker = Path(ctx.checkpoint_dir) / f"stopped-{ctx.index}"

    class StopOnce(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, step, logs=None):
            if stop and not marker.exists() and self.epoch == 1 and step + 1 == every:
                saved = Path(ctx.checkpoint_dir) / checkpoint_name(1, every)
                for _ in range(600):  # the chief saves it at the same step
                    if (saved / "state.json").exists():
                        break
                    time.sleep(0.1)
                marker.write_text("1")
                raise RuntimeError("preempted")

    done = ctx.fit(model, reader, 3, every=every, callbacks=[StopOnce()], verbose=0)
    return {"weights": [w.tolist() for w in model.get_weights()],
            "resumed_at": list(done.resumed_at), "loss": done.history["loss"],
            "steps": reader.steps_per_epoch()}


def test_tensorflow_workers_fit_from_readers_and_resume_mid_epoch(spark, tmp_path):
    """ctx.fit on TensorFlow's multi-worker strategy: each worker trains on its reader's
    shard (not sharded again), and a run stopped mid-epoch goes on from the checkpoint to
    the weights of a run that was never stopped."""
    import functools

    import numpy as np
    import pyarrow as pa
    from pyspark.sql import types as T
    from test_numpy_reader import write_dir

    rng = np.random.default_rng(1)
    x = rng.standard_normal((1600, 2)).astype(np.float32)
    batch = pa.RecordBatch.from_pydict({"x1": pa.array(x[:, 0]), "x2": pa.array(x[:, 1]),
                                        "y": pa.array((x.sum(1) > 0).astype(np.int64))})
    schema = T.StructType([T.StructField(n, t, False) for n, t in
                           (("x1", T.FloatType()), ("x2", T.FloatType()), ("y", T.LongType()))])
    path = write_dir(str(tmp_path / "data"), batch, tfspark.infer_spec(schema, ["y"]), 16,
                     files=4)
    whole = tfspark.train_on_spark(spark, functools.partial(fit_from_reader, path, False), 2,
                                   checkpoint_dir=str(tmp_path / "a"))
    assert whole["resumed_at"] == [0, 0] and len(whole["loss"]) == 3
    assert whole["steps"] == 25  # 800 rows a worker, batches of 32: its shard, not a half
    # The stopped stage is retried (this session allows a task 2 attempts) and goes on from
    # the checkpoint it stopped at.
    ckpt = tmp_path / "b"
    again = tfspark.train_on_spark(spark, functools.partial(fit_from_reader, path, True), 2,
                                   checkpoint_dir=str(ckpt))
    assert (ckpt / "stopped-0").exists() and (ckpt / "stopped-1").exists()
    assert again["resumed_at"] == [1, 3] and len(again["loss"]) == 3
    for i in (0, 1):
        log = (ckpt / "logs" / f"worker-{i}.log").read_text()
        assert "RuntimeError: preempted" in log, log
        assert "resumed from the checkpoint of epoch 1, step 3" in log, log
    for a, b in zip(whole["weights"], again["weights"]):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-6)


def steps_of_whole_shards(ctx):
    """Each worker fits on its own 32 batches of 64 (a dataset sharded by the caller, as
    make_dataset(shard=...) gives): the steps of an epoch, with the cardinality known and
    without."""
    import keras
    import numpy as np
    import tensorflow as tf

    x = np.arange(2048, dtype="float32").reshape(-1, 1)
    ds = tf.data.Dataset.from_tensor_slices((x, (x[:, 0] % 2).astype("float32"))).batch(64)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    seen: list[int] = []

    class Steps(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)

    with ctx.scope():
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, activation="sigmoid")])
        model.compile("sgd", "binary_crossentropy")
    out = {}
    for name, data in (("known", ds), ("unknown", ds.filter(lambda a, b: True))):
        seen.clear()
        model.fit(data.with_options(options), epochs=1, verbose=0, callbacks=[Steps()])
        out[name] = len(seen)
    return out


def test_each_worker_trains_on_its_whole_batches(spark):
    """A worker's dataset sharded by the caller reaches its replica batch by batch: every
    batch once per epoch, whole (tf.distribute had cut each into halves, and Keras then
    stopped the epoch after as many steps as batches: half of every shard)."""
    got = tfspark.train_on_spark(spark, steps_of_whole_shards, 2)
    assert got == {"known": 32, "unknown": 32}, got


def test_train_workers_failing_on_a_corrupt_file_print_no_spark_log(spark, tmp_path):
    """`tfspark train --workers 2` whose workers fail (a data file cut in half after the
    export): the workers' own lines, then one error line naming the worker, its exception and
    the file; not Spark's log of each failed task, a Python and a JVM trace each (--verbose
    keeps it)."""
    import subprocess

    from pyspark.sql import functions as F

    data = tmp_path / "ds"
    df = spark.range(2000).select("id", (F.col("id") % 2).alias("y"),
                                  (F.col("id") * 0.5).alias("x"))
    tfspark.write_tfrecords(df, str(data), label_cols=["y"], split={"train": 0.8,
                            "validation": 0.2}, split_key="id")
    part = sorted((data / "train").glob("*.tfrecord"))[0]
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    # One attempt of the stage, not Spark's four: the same lines, a quarter of the time.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYSPARK_SUBMIT_ARGS":
           "--conf spark.stage.maxConsecutiveAttempts=1 pyspark-shell"}
    done = subprocess.run(
        [sys.executable, "-m", "tfspark.cli", "train", str(data), "--workers", "2", "--backend",
         "jax", "--epochs", "1", "--model-out", str(tmp_path / "m.keras")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error: distributed training failed (2 workers): "
                                "tfspark training worker "), lines[-1]
    assert "CorruptRecordError" in lines[-1] and part.name in lines[-1], lines[-1]
    assert any(ln.startswith("[tfspark worker ") and "CorruptRecordError" in ln
               for ln in lines), done.stderr[-3000:]
    spark_log = [ln for ln in lines if re.match(r"\d\d/\d\d/\d\d [\d:]+ (ERROR|WARN) "
                                                r"(Executor|TaskSetManager): ", ln)
                 or ln.startswith("\tat ")]
    assert not spark_log, done.stderr[-3000:]


def preempted_train(cfg, at: int, ctx):
    """`tfspark train`'s worker whose chief is preempted at step `at` of each fit call in the
    second epoch, after the checkpoint of that step (every attempt of the stage: the run
    fails with its checkpoints kept)."""
    import keras

    import tfspark.keras.fitting as fitting
    from tfspark.cli.train_cluster import _worker_train

    class Preempted(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, step, logs=None):
            if ctx.is_chief and self.epoch == 1 and step + 1 == at:
                raise RuntimeError("preempted")

    original = fitting.resumable_fit

    def fit(*args, callbacks=None, **kwargs):
        return original(*args, callbacks=[*(callbacks or []), Preempted()], **kwargs)

    fitting.resumable_fit = fit
    return _worker_train(cfg, ctx)


def test_train_resumes_a_run_of_two_workers_on_one(spark, tmp_path, capsys, monkeypatch):
    """`tfspark train --workers 2` preempted mid-epoch, then rerun with --workers 1: the one
    worker trains the rest of that epoch (the rows the two had not trained on, in batches of
    the same global size) and the epochs after, from the checkpoint's weights. (A string
    feature: one TensorFlow worker reads it as tensors too.)"""
    import functools

    from pyspark.sql import functions as F

    from tfspark.cli.config import TrainConfig
    from tfspark.cli.main import main
    from tfspark.cli.train_cluster import _absolute, record_run
    from tfspark.keras.resume import latest, reader_states

    data = str(tmp_path / "ds")
    df = spark.range(2000).select("id", (F.col("id") % 2).alias("y"),
                                  (F.col("id") * 0.5 % 7).alias("x"),
                                  F.concat(F.lit("c"), F.col("id") % 3).alias("c"))
    tfspark.write_tfrecords(df, data, label_cols=["y"], split={"train": 0.8, "validation": 0.2},
                            split_key="id")
    model_out, ckpt = tmp_path / "m.keras", tmp_path / "m.checkpoints"
    cfg = _absolute(TrainConfig.from_mapping({
        "data": data, "workers": 2, "epochs": 2, "label": "y", "batch_size": 64,
        "checkpoint_every": 2, "bench_batches": 0, "verbose": 0, "model_out": str(model_out),
        "exclude": ["id"]}))
    record_run(cfg)  # (what train_distributed does first)
    with pytest.raises(TrainingError, match="preempted"):
        tfspark.train_on_spark(spark, functools.partial(preempted_train, cfg, 4), 2,
                               checkpoint_dir=str(ckpt), shared_paths=[data])
    epochs, step, path = latest(str(ckpt))
    assert epochs == 1 and step and step % 4 == 0, (epochs, step)
    assert len(reader_states(path)) == 2
    # what the two workers read in an epoch: their shards' rows (even: as many each)
    per_worker = sum(len(x["x"]) for x, _ in tfspark.read_batches(
        data, 32, split="train", shard=(2, 0), columns=["x", "y"]))
    left = 2 * per_worker - 2 * step * 32
    monkeypatch.chdir(tmp_path)
    code = main(["train", data, "--workers", "1", "--epochs", "2", "--label", "y",
                 "--batch-size", "64", "--model-out", str(model_out), "--checkpoint-every",
                 "4", "--config", str(_config(tmp_path))])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (f"resuming an earlier run from its checkpoint of epoch 1, step {step} (it trained "
            f"on 2 workers; the global batch stays 64, 64 a worker here)") in out, out
    log = (ckpt / "logs" / "worker-0.log").read_text()
    assert f"resumed from the checkpoint of epoch 1, step {step}" in log, log
    assert f"begun on another number of workers: {-(-left // 64)} steps on each" in log, log
    assert "final: " in out and model_out.exists() and not list(ckpt.glob("epoch-*"))


def _config(tmp_path):
    conf = tmp_path / "train.toml"
    conf.write_text('exclude = ["id"]\nbench_batches = 0\nverbose = 0\n')
    return conf
