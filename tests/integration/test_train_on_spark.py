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
    assert "ValueError: column 'age' is not in the data set" in text


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
