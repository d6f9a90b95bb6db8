"""`tfspark train --workers 2` on the loopback standalone cluster (master + 2 workers, CPU
TensorFlow): two barrier tasks, one per executor, train one model whose validation AUC matches
single-process training on the same data; each worker's log shows its share of the steps; a
worker's training process killed mid-training fails the stage, Spark retries it, and the run
finishes from its last checkpoint with every epoch counted once.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import tfspark
from tfspark.cli.config import TrainConfig
from tfspark.cli.train import train
from tfspark.cli.train_cluster import train_distributed
from tfspark.store.fs import locate
from tfspark.store.manifest import read_manifest

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.tf, pytest.mark.slow]

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
    cfg = config(dataset, tmp_path, workers=2, epochs=5, bench_batches=0)
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
    while not (ckpt / "epoch-00002").exists():  # two epochs done and saved
        assert thread.is_alive(), out
        assert time.monotonic() < deadline, "no checkpoint of epoch 2 within 300 s"
        time.sleep(0.2)
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
    # The retried stage started from the checkpoint of epoch 2 or later (the kill may land
    # after the chief saved epoch 3), and every epoch is in the history once.
    assert result["resumed_from"] >= 2
    assert all(len(v) == 5 for v in result["history"].values()), result["history"]
    assert result["final"]["val_auc"] > 0.8
    log0 = (ckpt / "logs" / "worker-0.log").read_text()
    assert f"resumed from the checkpoint of epoch {result['resumed_from']}" in log0
    # Started twice, as new Spark tasks: the first stage attempt, then the retry.
    tasks = re.findall(r"^\[tfspark worker 0/2 task (\d+)\] started: 2 replicas in sync$", log0,
                       re.M)
    assert len(tasks) == 2 and tasks[0] != tasks[1], tasks
    log1 = (ckpt / "logs" / "worker-1.log").read_text()
    assert log1.count("] started: 2 replicas in sync") == 2
    assert not _training_processes(0, ckpt) and not _training_processes(1, ckpt)  # none left
