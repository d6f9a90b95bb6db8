"""`tfspark train --workers 2` on the loopback standalone cluster (master + 2 workers, CPU
TensorFlow): two barrier tasks, one per executor, train one model whose validation AUC matches
single-process training on the same data; each worker's log shows its share of the steps; a
worker's training process killed in the middle of an epoch fails the stage, Spark retries it,
and the run finishes from its last checkpoint (checkpoint_every: mid-epoch) with every epoch
counted once. The same for Keras on JAX (train_on_spark(backend="jax")), fed by read_batches
through ctx.fit: two workers, one of them killed in the middle of an epoch, resume at the step
of the last checkpoint and reach one worker's validation AUC.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

import tfspark
from tfspark.cli.config import TrainConfig
from tfspark.cli.train import train
from tfspark.cli.train_cluster import train_distributed
from tfspark.keras.resume import checkpoint_name
from tfspark.store.fs import locate
from tfspark.store.manifest import read_manifest

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.tf, pytest.mark.slow]
# The JAX test's train_fn travels by value: the executors cannot import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ROWS = 40_000
needs_proc = pytest.mark.skipif(not Path("/proc/self/environ").exists(),
                                reason="finds the training processes through /proc (Linux)")


@pytest.fixture(scope="module")
def dataset(cluster_spark, tmp_path_factory) -> str:
    """40,000 rows, a label that depends on two numbers and a category (with noise)."""
    from pyspark.sql import functions as F

    df = cluster_spark.range(ROWS, numPartitions=4).select(
        "id", (F.rand(1) * 2 - 1).alias("x1"), F.randn(2).alias("x2"),
        F.element_at(F.array(*map(F.lit, "abcd")), (F.col("id") % 4 + 1).cast("int"))
        .alias("cat"))
    logit = 2.5 * F.col("x1") - 1.5 * F.col("x2") + F.when(F.col("cat") == "a", 1.5) \
        .otherwise(-0.5)
    df = df.withColumn("label", (F.rand(3) < 1 / (1 + F.exp(-logit))).cast("long"))
    out = str(tmp_path_factory.mktemp("train-data") / "ds")
    tfspark.write_tfrecords(df, out, label_cols=["label"], split={"train": 0.8,
                            "validation": 0.2}, split_key="id")
    return out


def config(dataset: str, tmp_path: Path, **kw: Any) -> TrainConfig:
    settings: dict[str, Any] = {"epochs": 4, "batch_size": 128, "learning_rate": 0.003,
                                "exclude": ("id",), "bench_batches": 20, "verbose": 2, **kw}
    return TrainConfig(data=dataset, model_out=str(tmp_path / "model.keras"), **settings)


def test_two_workers_train_as_well_as_one(cluster_spark, dataset, tmp_path, timings):
    started = time.perf_counter()
    one = train(config(dataset, tmp_path / "one"), echo=lambda _: None)
    one_s = time.perf_counter() - started
    cfg = config(dataset, tmp_path / "two", workers=2)
    lines: list[str] = []
    started = time.perf_counter()
    two = train_distributed(cfg, echo=lines.append, spark=cluster_spark)
    two_s = time.perf_counter() - started
    timings.update({"train_1_process_s": round(one_s, 1), "train_2_workers_s": round(two_s, 1),
                    "train_1_process_epoch_s": round(min(one["epoch_seconds"]), 2),
                    "train_2_workers_epoch_s": round(min(two["epoch_seconds"]), 2),
                    "val_auc_1": round(one["final"]["val_auc"], 4),
                    "val_auc_2": round(two["final"]["val_auc"], 4)})
    assert two["workers"] == 2 and len(two["history"]["val_auc"]) == 4
    # The same model on the same data: validation AUC within noise of one process's.
    assert one["final"]["val_auc"] > 0.8
    assert abs(two["final"]["val_auc"] - one["final"]["val_auc"]) < 0.02, (one, two)
    assert Path(two["model_path"]).exists() and two["model_path"] == cfg.model_out
    # Each worker took its half of the examples: as many steps as one process, at half the
    # batch (the global batch is the same), on its own shard.
    one_steps = -(-sum(f.records for f in read_manifest(locate(dataset)).files
                       if f.split == "train") // 128)
    logs = Path(str(cfg.model_out).replace(".keras", ".checkpoints")) / "logs"
    for i in (0, 1):
        log = (logs / f"worker-{i}.log").read_text()
        m = re.search(rf"worker {i} of 2: shard {i} of the train at 64 examples per step "
                      rf"\(global batch 128\), (\d+) steps per epoch", log)
        assert m, log[-2000:]
        steps = int(m.group(1))
        assert one_steps - 2 <= steps <= one_steps, (steps, one_steps)
        assert len(re.findall(rf"^{steps}/{steps} - ", log, re.M)) == 4  # 4 epochs of them
    assert not any(p.name.startswith("epoch-") for p in logs.parent.iterdir())  # cleaned up


def _training_processes(index: int, checkpoint_dir: Path | None = None) -> list[int]:
    """Pids of the tfspark.tf.worker processes of worker `index` (from TF_CONFIG), of the run
    with this checkpoint_dir (from the job file it was given) when one is named."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"tfspark.tf.worker" not in cmd:
                continue
            env = Path(f"/proc/{pid}/environ").read_bytes()
            if checkpoint_dir is not None:
                job = pickle.loads(Path(os.fsdecode(cmd[cmd.index(b"tfspark.tf.worker") + 1]))
                                   .read_bytes())
                if job["checkpoint_dir"] != str(checkpoint_dir):
                    continue
        except (OSError, ValueError, IndexError, EOFError, pickle.UnpicklingError):
            continue
        if f'"task": {{"type": "worker", "index": {index}}}'.encode() in env:
            found.append(int(pid))
    return found


def _training_processes_of(checkpoint_dir: Path) -> list[int]:
    """Pids of any training process (either backend) of the run with this checkpoint_dir."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            at = next(i for i, c in enumerate(cmd) if c.endswith(b"_worker") or
                      c == b"tfspark.tf.worker")
            job = pickle.loads(Path(os.fsdecode(cmd[at + 1])).read_bytes())
        except (OSError, ValueError, IndexError, EOFError, StopIteration,
                pickle.UnpicklingError):
            continue
        if job["checkpoint_dir"] == str(checkpoint_dir):
            found.append(int(pid))
    return found


def _parent(pid: int) -> int | None:
    """The parent pid of a live process (None once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the name in (...) may hold spaces


def _logs(ckpt: Path) -> str:
    """The workers' logs so far (what a failed assertion needs to be understood)."""
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}"
                     for p in sorted((ckpt / "logs").glob("*.log")))


@needs_proc
def test_a_killed_worker_resumes_from_its_checkpoint(cluster_spark, dataset, tmp_path,
                                                      fault_log):
    # 250 steps per epoch: a checkpoint every 25 steps, the kill in the third epoch.
    cfg = config(dataset, tmp_path, workers=2, epochs=5, bench_batches=0, checkpoint_every=25)
    ckpt = Path(str(cfg.model_out).replace(".keras", ".checkpoints"))
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = train_distributed(cfg, echo=lambda _: None, spark=cluster_spark)
        except Exception as e:  # noqa: BLE001 - reported by the assertions below
            out["error"] = e

    # a process of the previous training may still be on its way out (a loaded machine)
    earlier = set(_training_processes(1))
    thread = threading.Thread(target=run)
    started = time.perf_counter()
    thread.start()
    deadline = time.monotonic() + 300
    while not (ckpt / checkpoint_name(2, 25)).exists():  # 25 steps into the third epoch
        assert thread.is_alive(), out
        assert time.monotonic() < deadline, "no checkpoint 25 steps into epoch 3 within 300 s"
        time.sleep(0.05)
    found = [p for p in _training_processes(1, ckpt) if p not in earlier]
    # a child it forks (to run a program) carries its command line until it execs: not it
    victims = [p for p in found if _parent(p) not in found]
    assert len(victims) == 1, (found, earlier, _logs(ckpt))
    killed_after = time.perf_counter() - started
    os.kill(victims[0], signal.SIGKILL)
    thread.join(timeout=600)
    assert not thread.is_alive(), "training did not finish within 600 s of the kill"
    assert "error" not in out, out.get("error")
    result = out["result"]
    fault_log.append({"fault": "train-worker", "round": 1, "killed_after_s": killed_after,
                      "job_s": time.perf_counter() - started, "failed_tasks": 1,
                      "rows": ROWS, "lost": 0, "duplicated": 0, "stray_files": 0})
    # The retried stage started from a checkpoint inside the third epoch (the kill lands a
    # few steps after the one at step 25), and every epoch is in the history once.
    log0 = (ckpt / "logs" / "worker-0.log").read_text()
    resumed = re.search(r"resumed from the checkpoint of epoch (\d+), step (\d+)", log0)
    assert resumed and result["resumed_from"] == int(resumed.group(1)) == 2, _logs(ckpt)
    assert int(resumed.group(2)) % 25 == 0 and int(resumed.group(2)) >= 25, resumed.group(0)
    assert all(len(v) == 5 for v in result["history"].values()), result["history"]
    assert result["final"]["val_auc"] > 0.8
    # Started twice, as new Spark tasks: the first stage attempt, then the retry.
    tasks = re.findall(r"^\[tfspark worker 0/2 task (\d+)\] started: 2 replicas in sync$", log0,
                       re.M)
    assert len(tasks) == 2 and tasks[0] != tasks[1], tasks
    log1 = (ckpt / "logs" / "worker-1.log").read_text()
    assert log1.count("] started: 2 replicas in sync") == 2
    assert not _training_processes(0, ckpt) and not _training_processes(1, ckpt)  # none left


def fit_on_jax(path: str, epochs: int, kill_in: int | None, ctx: Any) -> dict[str, Any]:
    """A logistic regression on the data set's numbers (normalized from its statistics) and a
    weight per category, fed by read_batches (each worker its shard, at its share of a global
    batch of 128) through ctx.fit, a checkpoint every third of an epoch; its validation AUC
    over every worker's shard. kill_in: worker 1 kills its own process once, in that epoch
    (counted from 0), once the checkpoint a third into it is saved."""
    import keras

    columns = ["x1", "x2", "cat", "label"]
    layers = tfspark.keras_preprocessing(path, split="train", strings="ids", skip=["id"],
                                         impute=False)
    with ctx.scope():
        inputs = tfspark.keras_inputs(path, names=columns[:3], strings="ids")
        numbers = keras.ops.concatenate(
            [layers[n](keras.ops.cast(keras.ops.reshape(inputs[n], (-1, 1)), "float32"))
             for n in ("x1", "x2")], axis=1)
        cat = layers["cat"]
        weight = keras.layers.Embedding(cat.vocabulary_size(), 1)
        logit = keras.layers.Dense(1)(numbers) + \
            keras.ops.reshape(weight(cat(inputs["cat"])), (-1, 1))
        model = keras.Model(inputs, logit)
        model.compile(keras.optimizers.Adam(0.01),
                      keras.losses.BinaryCrossentropy(from_logits=True),
                      metrics=[keras.metrics.AUC(from_logits=True, name="auc")])
    batch = 128 // ctx.num_workers

    def read(split: str, **kw: Any) -> Any:
        return tfspark.read_batches(path, batch, split=split, columns=columns, strings="ids",
                                    vocabulary="train", label_cols=["label"], shard=ctx.shard,
                                    **kw)

    train_batches = read("train", epochs=None, seed=0)
    every = max(1, train_batches.steps_per_epoch() // 3)
    callbacks = []
    marker = Path(ctx.checkpoint_dir or ".") / "killed-once"
    if kill_in is not None and ctx.index == 1 and not marker.exists():
        class KillOnce(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
                self.epoch = epoch

            def on_train_batch_end(self, step: int, logs: Any = None) -> None:
                if self.epoch == kill_in and step + 1 == every:
                    saved = Path(ctx.checkpoint_dir) / checkpoint_name(kill_in, every)
                    for _ in range(600):  # the chief saves it at the same time
                        if (saved / "state.json").exists():
                            break
                        time.sleep(0.1)
                    marker.write_text("1")
                    ctx.log(f"killing this process at step {every} of epoch {kill_in + 1}")
                    os.kill(os.getpid(), signal.SIGKILL)

        callbacks.append(KillOnce())
    done = ctx.fit(model, train_batches, epochs, every=every, callbacks=callbacks, verbose=0)
    validation = read("validation")
    metrics = model.evaluate(iter(validation), steps=validation.steps_per_epoch(), verbose=0,
                             return_dict=True)
    return {"val_auc": float(metrics["auc"]), "steps": train_batches.steps_per_epoch(),
            "every": every, "history": done.history, "resumed_at": done.resumed_at}


@needs_proc
def test_jax_workers_train_as_well_as_one_and_resume_after_a_kill(cluster_spark, dataset,
                                                                  tmp_path, timings):
    import functools

    started = time.perf_counter()
    one = tfspark.train_on_spark(cluster_spark, functools.partial(fit_on_jax, dataset, 4, None),
                                 1, backend="jax")
    one_s = time.perf_counter() - started
    ckpt = tmp_path / "ckpt"
    started = time.perf_counter()
    two = tfspark.train_on_spark(cluster_spark, functools.partial(fit_on_jax, dataset, 4, 2), 2,
                                 backend="jax", checkpoint_dir=str(ckpt), shared_paths=[dataset])
    timings.update({"jax_train_1_process_s": round(one_s, 1),
                    "jax_train_2_workers_killed_once_s": round(time.perf_counter() - started, 1),
                    "jax_val_auc_1": round(one["val_auc"], 4),
                    "jax_val_auc_2": round(two["val_auc"], 4)})
    assert (ckpt / "killed-once").exists(), _logs(ckpt)
    log1 = (ckpt / "logs" / "worker-1.log").read_text()
    assert f"killing this process at step {two['every']} of epoch 3" in log1
    # Worker 1 started twice (the stage retried), and the run resumed in the third epoch at
    # the step of the checkpoint: four epochs in the history, each once.
    assert log1.count("] started: 2 processes, 2 devices in sync") == 2, _logs(ckpt)
    assert tuple(two["resumed_at"]) == (2, two["every"]), _logs(ckpt)
    assert f"resumed from the checkpoint of epoch 2, step {two['every']}" in log1
    assert all(len(v) == 4 for v in two["history"].values()), two["history"]
    # Each worker took its half of the examples at half the batch: as many steps as one.
    assert one["steps"] - 2 <= two["steps"] <= one["steps"], (one["steps"], two["steps"])
    assert one["val_auc"] > 0.8
    assert abs(two["val_auc"] - one["val_auc"]) < 0.01, (one, two)
    assert not [p for p in _training_processes_of(ckpt)]  # none left
