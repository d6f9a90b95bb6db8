"""train_on_spark(): Keras training on the Spark cluster's executors, one barrier task per worker.

Spark's barrier execution mode starts the N tasks together; each picks a free port, the tasks
exchange host:port with allGather, and each starts a training process with
CUDA_VISIBLE_DEVICES set to the GPUs Spark gave the task: tfspark.tf.worker (TensorFlow,
TF_CONFIG naming every worker) or tfspark.keras.jax_worker (JAX, worker 0's address as the
coordinator). A worker that fails fails the stage; Spark then retries the whole stage (up to
spark.stage.maxConsecutiveAttempts), and the run goes on from its last checkpoint. This module
never imports TensorFlow or JAX: the training process does.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tfspark.errors import OptionError, TrainingError, scrubbed
from tfspark.spark.meanwhile import same_python
from tfspark.store.fs import locate
from tfspark.store.uris import local_directory, redact

_EXCEPTION_LINE = re.compile(r"^[A-Za-z_.]*(Error|Exception): ")
_TAIL = 30  # lines of a failed worker's output quoted in the error
# How a worker fails when a peer died first (gloo and TensorFlow's collectives, JAX's
# coordination service): its task reports that a little later, so that the stage fails on
# the peer's own error (Spark shows the first failed task's) when that peer has one.
_LOST_PEER = re.compile(r"closed by peer|reset by peer|Socket closed|Broken pipe|"
                        r"failed to connect to all addresses|Collective ops is aborted|"
                        r"another task died|Shutdown barrier has failed|UnavailableError")
_LOST_PEER_GRACE_S = 5.0
# The training process of each backend= (Keras 3's backend of the same name).
WORKERS = {"tensorflow": "tfspark.tf.worker", "jax": "tfspark.keras.jax_worker"}


@scrubbed
def train_on_spark(spark: Any, train_fn: Callable[[Any], Any], num_workers: int, *,
                   backend: str = "tensorflow", checkpoint_dir: str | None = None,
                   shared_paths: Iterable[str] = (), env: dict[str, str] | None = None,
                   filesystem: Any = None) -> Any:
    """Run train_fn(ctx) on num_workers Spark tasks at once, one Keras model trained by all.

    Args:
        spark: the SparkSession whose executors train.
        train_fn: a picklable function of a tfspark.keras.worker.WorkerContext (ctx.scope(),
            ctx.shard, ctx.is_chief, ctx.checkpoint(), ctx.log); it builds and compiles the
            model under `with ctx.scope():`, reads its shard (`make_dataset(...,
            shard=ctx.shard)` or `read_batches(..., shard=ctx.shard)`) and fits. It runs in a
            fresh Python process per worker on the executors, so it must not use the
            SparkSession.
        num_workers: tasks, each one replica (one GPU each where
            spark.task.resource.gpu.amount is set, else CPU). At most the cluster's task
            slots (executor cores / spark.task.cpus, and GPUs): barrier tasks start together
            or not at all.
        backend: Keras 3's backend in the training processes. "tensorflow":
            MultiWorkerMirroredStrategy (ctx.strategy), fed by make_dataset. "jax": a
            keras.distribution.DataParallel over every worker's devices (ctx.distribution),
            fed by read_batches (each worker's batch is its share of the global batch); the
            executors need jax, not TensorFlow.
        checkpoint_dir: a directory every executor and the driver share (a mounted or network
            filesystem); ctx.checkpoint() saves each epoch there, and a retried stage
            resumes. The workers' output is appended to <checkpoint_dir>/logs/worker-<i>.log.
        shared_paths: paths (a data set, ...) the workers must see; checked before training
            starts by a short job of one task per slot (and checkpoint_dir by a marker file
            written here).
        env: extra environment variables for the training processes (KERAS_BACKEND is always
            `backend`).
        filesystem: where shared_paths are, as make_dataset's filesystem= (pickled to the
            executors for the check). Default: from each path.

    Returns:
        The chief's (worker 0's) return value.

    Raises:
        OptionError: before any training task starts, for bad arguments, too few slots, or a
            path the executors cannot see.
        TrainingError: the stage failed more times than Spark retries it (quoting the failed
            worker's last output lines).

    Examples:
        >>> def train(ctx):
        ...     return f"worker {ctx.index} of {ctx.num_workers}"
        >>> tfspark.train_on_spark(spark, train, num_workers=1, backend="jax")
        'worker 0 of 1'
    """
    if backend not in WORKERS:
        raise OptionError(f"backend={backend!r}: train_on_spark trains on "
                          f"{' or '.join(map(repr, WORKERS))} (Keras 3's backend of that name)")
    same_python(spark)  # (a local master's Python workers: this interpreter)
    sc = _barrier_context(spark, train_fn, num_workers)
    slots = task_slots(sc)
    if num_workers > slots:
        raise OptionError(
            f"num_workers={num_workers} but the cluster has {slots} task slot(s) (executor "
            f"cores / spark.task.cpus, and GPUs per task): barrier tasks must all run at once; "
            f"lower the number of workers or add executors")
    if checkpoint_dir is not None:
        checkpoint_dir = local_directory(checkpoint_dir, "checkpoint_dir")
    shared = [str(p) for p in shared_paths]
    for p in shared:
        locate(p, filesystem)  # a bad URI fails here, with its own message
    _check_visible(sc, shared, checkpoint_dir, slots, filesystem)
    job = _task(_pickled(train_fn), num_workers, checkpoint_dir, dict(env or {}), backend)
    # The barrier stage writes shuffle output that one more task collects: Spark retries a
    # failed barrier stage only when it is a shuffle-map stage (a result stage is aborted).
    rdd = sc.parallelize(range(num_workers), num_workers).barrier().mapPartitions(job) \
        .repartition(1)
    sc.setJobDescription(f"tfspark train_on_spark: {num_workers} workers ({backend})")
    try:
        out = rdd.collect()
    except Exception as e:  # noqa: BLE001 - Py4JJavaError: the stage failed for good
        raise TrainingError(f"distributed training failed ({num_workers} workers): "
                            f"{_worker_error(str(e))}") from e
    finally:
        sc.setJobDescription(None)
    return pickle.loads(out[0]) if out else None


def _barrier_context(spark: Any, train_fn: Any, num_workers: Any) -> Any:
    """The SparkContext barrier tasks run on, after the arguments and the session are
    checked: a function, a positive number of workers, classic Spark, no dynamic allocation."""
    if not callable(train_fn):
        raise OptionError(f"train_fn must be a function of the worker context, got "
                          f"{type(train_fn).__name__}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise OptionError(f"num_workers must be a positive int, got {num_workers!r}")
    try:
        sc = spark.sparkContext
    except Exception as e:  # noqa: BLE001 - Spark Connect: no SparkContext, no barrier mode
        raise OptionError("train_on_spark needs a classic SparkSession (barrier execution "
                          "mode runs on the SparkContext, which Spark Connect sessions do not "
                          "have): run it where spark.sparkContext works") from e
    if sc.getConf().get("spark.dynamicAllocation.enabled", "false").lower() == "true" \
            and not sc.master.startswith("local"):
        raise OptionError("barrier tasks do not run under dynamic allocation: start this "
                          "application with spark.dynamicAllocation.enabled=false")
    return sc


def _pickled(train_fn: Any) -> bytes:
    """train_fn as cloudpickle bytes for the training processes, or why it cannot be sent."""
    from pyspark import cloudpickle

    try:
        return bytes(cloudpickle.dumps(train_fn))
    except Exception as e:  # noqa: BLE001 - a lock, a SparkSession, an open file in its closure
        raise OptionError(f"train_fn cannot be sent to the executors ({e}); keep sessions, "
                          f"locks and open files out of what it refers to") from e


def task_slots(sc: Any) -> int:
    """Tasks the cluster can run at once in the default resource profile."""
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # noqa: BLE001 - a Spark without that (private) method: a lower bound
        return int(sc.defaultParallelism)


def _check_visible(sc: Any, paths: list[str], checkpoint_dir: str | None, slots: int,
                   filesystem: Any = None) -> None:
    """Every executor sees `paths` (on `filesystem`) and the driver's checkpoint_dir (a marker
    written here, on local disk)."""
    marker = None
    if checkpoint_dir is not None:
        marker = os.path.join(checkpoint_dir, f".visible-{uuid.uuid4().hex}")
        with open(marker, "w"):
            pass
    wanted = paths + ([marker] if marker else [])
    if not wanted:
        return

    def check(_: Iterable[int]) -> Iterator[tuple[str, str]]:
        host = socket.gethostname()
        for p in wanted:
            try:
                seen = locate(p, None if p == marker else filesystem).exists()
            except Exception:  # noqa: BLE001 - e.g. no credentials on this executor
                seen = False
            if not seen:
                yield host, p

    try:
        sc.setJobDescription("tfspark train_on_spark: are the paths shared?")
        missing = sc.parallelize(range(slots), slots).mapPartitions(check).collect()
    finally:
        sc.setJobDescription(None)
        if marker is not None:
            os.remove(marker)
    if missing:
        host, p = missing[0]
        what = f"checkpoint_dir {checkpoint_dir!r}" if p == marker else repr(redact(p))
        raise OptionError(f"the executor on {host} cannot see {what}: use a path every "
                          f"executor shares (a mounted or network filesystem)")


def _task(payload: bytes, num_workers: int, checkpoint_dir: str | None,
          env: dict[str, str], backend: str) -> Callable[[Iterable[int]], Iterator[bytes]]:
    """The barrier task: exchange addresses, start this worker's training process, wait."""

    @scrubbed
    def run(_: Iterable[int]) -> Iterator[bytes]:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        index = ctx.partitionId()
        host = ctx.getTaskInfos()[index].address.rsplit(":", 1)[0]
        with _reserved_port(host) as port:  # held while the others pick theirs
            workers = ctx.allGather(f"{host}:{port}")
        child_env = {**os.environ, **env, "KERAS_BACKEND": backend,
                     "TFSPARK_TASK_PID": str(os.getpid())}
        if backend == "tensorflow":
            child_env["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers},
                                                 "task": {"type": "worker", "index": index}})
        gpus = ctx.resources().get("gpu")
        if gpus is not None:
            child_env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus.addresses)
        work = tempfile.mkdtemp(prefix="tfspark-train-")
        try:
            job, result = os.path.join(work, "job.pkl"), os.path.join(work, "result.pkl")
            with open(job, "wb") as f:
                f.write(pickle.dumps({"fn": payload, "num_workers": num_workers,
                                      "index": index, "task_id": ctx.taskAttemptId(),
                                      "checkpoint_dir": checkpoint_dir,
                                      "workers": list(workers)}))
            tail = _run_worker([sys.executable, "-m", WORKERS[backend], job, result],
                               child_env, checkpoint_dir, index)
            if tail is not None:
                if _LOST_PEER.search(tail):
                    time.sleep(_LOST_PEER_GRACE_S)  # Spark kills this task if a peer fails
                raise RuntimeError(tail)
            if index == 0:
                with open(result, "rb") as f:
                    yield f.read()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    return run


def _run_worker(cmd: list[str], env: dict[str, str], checkpoint_dir: str | None,
                index: int) -> str | None:
    """Run the training process, its output to the executor's stderr (and to
    <checkpoint_dir>/logs/worker-<index>.log); None when it succeeded, else the error text.
    On stderr each line says whose it is: in local mode every worker writes to the one
    terminal, where Keras's "Epoch 1/2" came once per worker with nothing to tell them apart
    (its own lines carry tfspark's tag already; the log file is the worker's alone)."""
    tag = f"[tfspark worker {index}] "
    log = None
    if checkpoint_dir is not None:
        os.makedirs(os.path.join(checkpoint_dir, "logs"), exist_ok=True)
        log = open(os.path.join(checkpoint_dir, "logs", f"worker-{index}.log"), "a")
    tail: deque[str] = deque(maxlen=_TAIL)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", start_new_session=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line)
            sys.stderr.write(line if line.startswith("[tfspark worker ") else tag + line)
            if log is not None:
                log.write(line)
                log.flush()
        code = proc.wait()
    finally:
        if proc.poll() is None:  # this task was cancelled: take the training process along
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if log is not None:
            log.close()
    if code == 0:
        return None
    how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
    # The exception it died of on the first line: a command line shows only that one.
    raised = next((ln.strip() for ln in reversed(tail) if _EXCEPTION_LINE.match(ln)), None)
    return (f"tfspark training worker {index} {how}" + (f" ({raised})" if raised else "")
            + "\nits last output lines:\n" + "".join(tail))


@contextlib.contextmanager
def _reserved_port(host: str) -> Iterator[int]:
    """A port free on this host, held (bound) until the block ends; the training process binds
    it a moment later. Held while the workers exchange addresses: two workers on one host that
    each took a free port and let it go at once were given the same one, and the second's
    training process could not start its server while the first waited for it for ever."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("" if host in ("localhost",) else host, 0))
        yield int(s.getsockname()[1])


def _worker_error(message: str) -> str:
    """The part of Spark's error text that a training worker wrote."""
    start = message.find("tfspark training worker")
    if start < 0:  # failed before training started: the Python exception's own line
        lines = [ln for ln in message.splitlines() if _EXCEPTION_LINE.match(ln)]
        first = message.strip().splitlines()[0] if message.strip() else "unknown error"
        return lines[0] if lines else first
    text = message[start:]
    end = text.find("\n\tat ")  # the JVM stack trace after the Python one
    return (text if end < 0 else text[:end]).rstrip()
