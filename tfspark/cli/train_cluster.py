"""`tfspark train --workers N`: the train job on N Spark tasks at once (tfspark.train_on_spark).

Each worker runs tfspark.cli.train.train on its shard under MultiWorkerMirroredStrategy (or a
keras.distribution.DataParallel with backend = "jax"); the chief saves the model and its result
(history, rates) comes back to the driver. Checkpoints go to a shared directory after every
epoch, so a stage that Spark retries resumes; they are removed when the run succeeds (a rerun
trains from scratch), kept when it fails (a rerun resumes, also on another number of workers:
the global batch stays, each worker's is the global batch / workers). The workers' output is in
<checkpoint_dir>/logs/worker-<i>.log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import sys
from collections.abc import Callable
from typing import Any

from tfspark import paths
from tfspark.cli.config import TrainConfig
from tfspark.cli.train import check, train
from tfspark.errors import OptionError
from tfspark.store.fs import store_filesystem
from tfspark.store.uris import redact


def train_distributed(cfg: TrainConfig, echo: Callable[[str], None] = print,
                      spark: Any = None, spark_log: bool = True) -> dict[str, Any]:
    """Train on cfg.workers Spark tasks; spark: the session (None: spark-submit's, else one on
    cfg.master). spark_log=False (the command line without --verbose): a session made here
    leaves out Spark's log of each failed task, which repeats what the workers' own lines and
    the error already say, with a JVM stack trace, for each worker of each attempt."""
    from tfspark.keras.resume import latest, reader_states, remove_checkpoints
    from tfspark.spark.distributed import train_on_spark

    # a bad setting: one line now, before Spark starts any task (the label resolved, so that
    # naming the one found by itself is no change to the run)
    cfg = _absolute(cfg)
    cfg = dataclasses.replace(cfg, label=check(cfg, cfg.workers))
    assert cfg.checkpoint_dir is not None
    at = latest(cfg.checkpoint_dir)  # (epochs done, steps into the next, path)
    if at is None:  # a fresh run: the logs of earlier runs go
        shutil.rmtree(os.path.join(cfg.checkpoint_dir, "logs"), ignore_errors=True)
        record_run(cfg)
    else:
        same_run(cfg)
    if spark is None:
        spark = _session(cfg.master, cfg.workers, spark_log)
    master = spark.conf.get("spark.master", "?")  # a Connect session has no sparkContext
    before = len(reader_states(at[2])) if at else 0
    echo(f"training on {cfg.workers} Spark task{'s' if cfg.workers > 1 else ''} ({master}); "
         f"checkpoints and worker logs in {cfg.checkpoint_dir}"
         + (f"; resuming an earlier run from its checkpoint of epoch {at[0]}"
            + (f", step {at[1]}" if at[1] else "") if at else "")
         + (f" (it trained on {before} workers; the global batch stays {cfg.batch_size}, "
            f"{cfg.batch_size // cfg.workers} a worker here)"
            if before and before != cfg.workers else ""))
    result = train_on_spark(spark, functools.partial(_worker_train, cfg), cfg.workers,
                            backend=cfg.backend, checkpoint_dir=cfg.checkpoint_dir,
                            shared_paths=[cfg.data],
                            filesystem=store_filesystem(cfg.data, cfg.store, "the train config"))
    remove_checkpoints(cfg.checkpoint_dir)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(cfg.checkpoint_dir, RUN))
    echo("final: " + ", ".join(f"{k}={v:.4f}" for k, v in result["final"].items()))
    echo(f"model saved to {result['model_path']} by worker 0")
    return result


# The settings of the run whose checkpoints a checkpoint directory holds, and those a rerun may
# change and still resume it (how long, where, how loud, what it validates on); any other makes
# another model or other batches, which the checkpoint cannot continue.
RUN = "run.json"
_MAY_CHANGE = frozenset({"epochs", "verbose", "model_out", "checkpoint_dir", "checkpoint_every",
                         "master", "bench_batches", "store", "validation_split", "workers"})


def _settings(cfg: TrainConfig) -> dict[str, Any]:
    """cfg's settings that a resumed run must share, as JSON reads them back (no [store]: it
    may hold credentials; the data path without a URI's secrets)."""
    kept = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _MAY_CHANGE}
    return dict(json.loads(json.dumps({**kept, "data": redact(cfg.data)})))


def unfinished(cfg: TrainConfig) -> bool:
    """Whether cfg's checkpoint directory holds a checkpoint of an unfinished run on Spark
    workers (which a rerun resumes, on any number of workers)."""
    ckpt = _absolute(cfg).checkpoint_dir
    assert ckpt is not None
    from tfspark.keras.resume import latest_checkpoint

    return os.path.exists(os.path.join(ckpt, RUN)) and latest_checkpoint(ckpt) is not None


def record_run(cfg: TrainConfig) -> None:
    """Write cfg's settings into its checkpoint directory, for a rerun to compare, with the
    data set's last write (a rerun on data written to since cannot resume)."""
    assert cfg.checkpoint_dir is not None
    os.makedirs(cfg.checkpoint_dir, exist_ok=True)
    with open(os.path.join(cfg.checkpoint_dir, RUN), "w") as f:
        json.dump({**_settings(cfg), _DATA: _data_write(cfg)}, f, indent=1, sort_keys=True)


_DATA = "data_last_write"  # in run.json: the data set's last write when the run began


def _data_write(cfg: TrainConfig) -> str | None:
    """The id of the last write to cfg's data set (None: not found)."""
    from tfspark.store.partitions import read_data_set_manifest

    try:
        return read_data_set_manifest(cfg.data, store_filesystem(
            cfg.data, cfg.store, "the train config")).last_write
    except Exception:  # noqa: BLE001 - the workers' own checks name what is wrong
        return None


def same_run(cfg: TrainConfig) -> None:
    """OptionError, before any task starts, when the checkpoints kept in cfg's directory are
    of a run with other settings: every worker would fail on them, on every stage attempt."""
    assert cfg.checkpoint_dir is not None
    try:
        with open(os.path.join(cfg.checkpoint_dir, RUN)) as f:
            saved = json.load(f)
    except FileNotFoundError:  # kept by a version without this file: the workers check
        return
    now = _settings(cfg)
    began_on, now_on = saved.pop(_DATA, None), _data_write(cfg)
    if None not in (began_on, now_on) and began_on != now_on:  # (None: not read; the workers
        #                                                        say what is wrong)
        raise OptionError(
            f"{cfg.checkpoint_dir!r} holds the checkpoints of an unfinished run on "
            f"{redact(cfg.data)!r}, which was written to since (an append or an overwrite): "
            f"they cannot resume on other rows; remove that directory (or give another "
            f"--checkpoint-dir) to train on the data set as it is now")
    saved = {k: v for k, v in saved.items() if k not in _MAY_CHANGE}
    changed = [f"{k} {saved.get(k)!r} there, {now.get(k)!r} here"
               for k in sorted(now.keys() | saved.keys()) if saved.get(k) != now.get(k)]
    if changed:
        raise OptionError(
            f"{cfg.checkpoint_dir!r} holds the checkpoints of an unfinished run with other "
            f"settings ({'; '.join(changed)}): rerun with those to resume it, or remove that "
            f"directory (or give another --checkpoint-dir) to start afresh")


def _worker_train(cfg: TrainConfig, ctx: Any) -> dict[str, Any]:
    """What each worker runs (in its own process, see tfspark.tf.worker)."""
    return train(cfg, echo=ctx.log, worker=ctx)


def _absolute(cfg: TrainConfig) -> TrainConfig:
    """Local paths made absolute: the workers run in the executors' directories."""
    def fix(path: str) -> str:
        return path if paths.scheme(path) else os.path.abspath(path)

    ckpt = cfg.checkpoint_dir or cfg.model_out[: -len(".keras")] + ".checkpoints"
    return dataclasses.replace(cfg, data=fix(cfg.data), model_out=fix(cfg.model_out),
                               checkpoint_dir=fix(ckpt))


def _session(master: str, workers: int, spark_log: bool) -> Any:
    """Under spark-submit its session; else one on `master` whose Python workers run this
    interpreter. Without spark_log, the task failures' loggers are off."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"tfspark-train-{workers}-workers")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        if master.startswith("local"):  # else Spark warns the hostname is a loopback address
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The stage's bar would stand for the whole training and overwrite the final lines:
        # the workers' own lines show the progress.
        builder = builder.master(master).config("spark.pyspark.python", python) \
            .config("spark.ui.showConsoleProgress", "false")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not spark_log:
        jvm: Any = spark.sparkContext._jvm
        log4j = jvm.org.apache.logging.log4j
        for name in ("org.apache.spark.executor.Executor",  # "Exception in task" (local mode)
                     "org.apache.spark.scheduler.TaskSetManager"):  # "Lost task" (the driver)
            log4j.core.config.Configurator.setLevel(name, log4j.Level.OFF)
    return spark
