"""What every training process of train_on_spark shares, on any backend: the context train_fn
gets, the job file it reads, and the watch that ends it with its Spark task.

The Spark task (tfspark.spark.distributed) starts `python -m tfspark.tf.worker JOB RESULT`
(TensorFlow) or `python -m tfspark.keras.jax_worker JOB RESULT` (JAX) in a fresh process,
because both frameworks read their cluster set-up once per process and a Spark Python worker
is reused across tasks and stage retries. JOB is a pickle of {"fn" (train_fn, cloudpickled),
"num_workers", "index", "task_id", "checkpoint_dir", "workers" (every worker's host:port)}; the
chief pickles fn's return value into RESULT.
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class WorkerContext:
    """What train_fn gets: how to build the model and this worker's place.

    backend: "tensorflow" or "jax" (train_on_spark's backend=).
    strategy: TensorFlow: a tf.distribute.MultiWorkerMirroredStrategy over every worker (one
      replica per worker, on its GPU when the task was given one); build and compile the model
      under `with ctx.scope():`. JAX: None.
    distribution: JAX: the keras.distribution.DataParallel over every worker's devices, already
      set for this process; each worker feeds its own batches (read_batches(..., shard=
      ctx.shard)), which Keras joins into the global batch. TensorFlow: None.
    shard: (num_workers, index), for make_dataset's or read_batches's shard=: each worker reads
      its own part, every worker the same number of batches.
    checkpoint_dir: the shared directory of this run's checkpoints, or None.
    fit(model, batches, epochs, every=N): model.fit that resumes exactly, mid-epoch too.
    save(model, path): the chief's model.save, as each backend needs it (call it on every
      worker).
    task_id: the Spark task's id (new for every attempt: a retried stage runs new tasks).
    """

    num_workers: int
    index: int
    task_id: int = 0
    checkpoint_dir: str | None = None
    backend: str = "tensorflow"
    strategy: Any = None
    distribution: Any = None
    differs: Callable[[int], bool] | None = None  # does any worker hold another value?
    source: Callable[[Any], Any] | None = None  # what fit reads of a Feed (resumable_fit)

    @property
    def is_chief(self) -> bool:
        """Worker 0: the one that saves the model and whose return value reaches the driver."""
        return self.index == 0

    @property
    def shard(self) -> tuple[int, int]:
        """(num_workers, index): the readers' shard= for this worker's part of the data."""
        return (self.num_workers, self.index)

    def scope(self) -> Any:
        """Where to build and compile the model: the strategy's scope (TensorFlow), or nothing
        (JAX: the distribution is set for the whole process)."""
        import contextlib

        return self.strategy.scope() if self.strategy is not None else contextlib.nullcontext()

    def checkpoint(self) -> Any:
        """The resume callback for model.fit (tfspark.keras.resume.epoch_checkpoint); None
        without a checkpoint_dir."""
        if self.checkpoint_dir is None:
            return None
        from tfspark.keras.resume import epoch_checkpoint

        return epoch_checkpoint(self.checkpoint_dir, **self._saving())

    def fit(self, model: Any, batches: Any, epochs: int, *, every: int | None = None,
            **fit_kwargs: Any) -> Any:
        """model.fit from this worker's read_batches reader that a retried stage resumes
        exactly (mid-epoch with every=N steps between checkpoints): tfspark.keras.resumable_fit with
        this worker's place and checkpoint_dir. Returns its Resumed (history, resumed_at)."""
        from tfspark.keras.fitting import resumable_fit

        return resumable_fit(model, batches, epochs, self.checkpoint_dir, every=every,
                             worker=self.index, workers=self.num_workers,
                             source=self.source, **self._saving(), **fit_kwargs)

    def _saving(self) -> dict[str, Any]:
        """How this worker takes part in saving and restoring checkpoints (keras.resume)."""
        return {"is_chief": self.is_chief,
                "differs": self.differs if self.num_workers > 1 else None,
                "every_worker_saves": self.backend == "jax", "log": self.log}

    def save(self, model: Any, path: str) -> None:
        """model.save(path) by the chief. On JAX, where saving reads values that span the
        processes, every worker must save at once: the others save to a scratch file that is
        removed at once (a save by the chief alone waits for them, or fails as they go on)."""
        if self.is_chief:
            model.save(path)
        elif self.backend == "jax":
            import tempfile

            with tempfile.TemporaryDirectory(prefix="tfspark-save-") as scratch:
                model.save(os.path.join(scratch, os.path.basename(path)))

    def log(self, message: str) -> None:
        """A line on this worker's log (the executor's stderr), marked with its index."""
        print(f"[tfspark worker {self.index}/{self.num_workers} task {self.task_id}] "
              f"{message}", file=sys.stderr, flush=True)


def exit_with_parent() -> None:
    """End this process when the Spark task's process is gone (killed, or the task cancelled):
    on Linux by the kernel's parent-death signal, and by a thread watching the parent.

    The task passes its pid (TFSPARK_TASK_PID): one killed before this process got here has
    already left it with another parent, which os.getppid() at this point would not show."""
    parent = int(os.environ.get("TFSPARK_TASK_PID") or os.getppid())
    if sys.platform.startswith("linux"):  # the kernel's signal needs no Python thread: one
        # blocked in native code that holds the GIL (TensorFlow's strategy waiting for a
        # worker that never came) never ran the watch below, and the process stayed for good
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # DEATHSIG
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(70)

    threading.Thread(target=watch, name="tfspark-exit-with-parent", daemon=True).start()


def one_line_warning(message: Warning | str, category: type[Warning], filename: str,
                     lineno: int, line: str | None = None) -> str:
    """A warning as one line, where it came from at its end: each line of a training process
    reaches the driver's terminal tagged with the worker's index (Python's own form adds the
    source line, which reads there as a stray line of its own)."""
    return f"{category.__name__}: {message} ({os.path.basename(filename)}:{lineno})\n"


def read_job(argv: list[str], module: str) -> dict[str, Any] | None:
    """The job of `python -m <module> JOB RESULT`, after the parent watch is started and
    warnings are set to print as one line; None (and a usage line) for other arguments."""
    if len(argv) != 2:
        print(f"usage: python -m {module} JOB RESULT", file=sys.stderr)
        return None
    exit_with_parent()
    warnings.formatwarning = one_line_warning
    with open(argv[0], "rb") as f:
        job: dict[str, Any] = pickle.load(f)
    return job


def run_job(job: dict[str, Any], ctx: WorkerContext, result_path: str) -> None:
    """train_fn(ctx); the chief's return value pickled to result_path. A train_fn that
    raises ends this process at once, its traceback printed, status 1: a normal exit would
    wait on its peers first (JAX's coordination service holds a shutdown barrier for
    minutes, and the peers sit in a collective for this worker's step), so the stage would
    fail minutes later on a peer killed by a signal instead of on this exception."""
    try:
        result = pickle.loads(job["fn"])(ctx)
    except Exception:  # noqa: BLE001 - whatever train_fn raises ends this worker now
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    if ctx.is_chief:
        with open(result_path, "wb") as f:
            pickle.dump(result, f)
