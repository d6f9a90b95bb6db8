"""One training worker of train_on_spark: `python -m tfspark.tf.worker JOB RESULT`.

The Spark task (tfspark.spark.distributed) starts this in a fresh process with TF_CONFIG and
CUDA_VISIBLE_DEVICES set, because TensorFlow reads both once per process and a Spark Python
worker is reused across tasks and stage retries. JOB is a pickle of {"fn" (train_fn,
cloudpickled), "num_workers", "index", "task_id", "checkpoint_dir"}; the chief pickles fn's
return value into RESULT. The process ends itself when the task's process dies, so a killed or
cancelled task leaves no training process behind.
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class WorkerContext:
    """What train_fn gets: the strategy to build the model under and this worker's place.

    strategy: a tf.distribute.MultiWorkerMirroredStrategy over every worker (one replica per
      worker, on its GPU when the task was given one); build and compile the model under
      `with ctx.strategy.scope():`.
    shard: (num_workers, index), for make_dataset(..., shard=ctx.shard): each worker reads its
      own part, every worker the same number of batches.
    checkpoint_dir: the shared directory of this run's checkpoints, or None.
    task_id: the Spark task's id (new for every attempt: a retried stage runs new tasks).
    """

    strategy: Any
    num_workers: int
    index: int
    task_id: int = 0
    checkpoint_dir: str | None = None

    @property
    def is_chief(self) -> bool:
        """Worker 0: the one that saves the model and whose return value reaches the driver."""
        return self.index == 0

    @property
    def shard(self) -> tuple[int, int]:
        """(num_workers, index): make_dataset's shard= for this worker's part of the data."""
        return (self.num_workers, self.index)

    def checkpoint(self) -> Any:
        """The resume callback for model.fit (tfspark.tf.resume.epoch_checkpoint); None without
        a checkpoint_dir."""
        if self.checkpoint_dir is None:
            return None
        from tfspark.tf.resume import epoch_checkpoint

        return epoch_checkpoint(self.checkpoint_dir, is_chief=self.is_chief,
                                strategy=self.strategy, log=self.log)

    def log(self, message: str) -> None:
        """A line on this worker's log (the executor's stderr), marked with its index."""
        print(f"[tfspark worker {self.index}/{self.num_workers} task {self.task_id}] "
              f"{message}", file=sys.stderr, flush=True)


def _exit_with_parent() -> None:
    """End this process when the Spark task's process is gone (killed, or the task cancelled).

    The task passes its pid (TFSPARK_TASK_PID): one killed before this process got here has
    already left it with another parent, which os.getppid() at this point would not show."""
    parent = int(os.environ.get("TFSPARK_TASK_PID") or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(70)

    threading.Thread(target=watch, name="tfspark-exit-with-parent", daemon=True).start()


def main(argv: list[str]) -> int:
    """Run the job's train_fn under MultiWorkerMirroredStrategy; the exit status is 0 when it
    returned (and the chief's value is in RESULT)."""
    if len(argv) != 2:
        print("usage: python -m tfspark.tf.worker JOB RESULT", file=sys.stderr)
        return 2
    _exit_with_parent()
    with open(argv[0], "rb") as f:
        job = pickle.load(f)
    import tensorflow as tf

    from tfspark.tf.multiworker import fix_keras_multiworker

    fix_keras_multiworker()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ctx = WorkerContext(strategy, job["num_workers"], job["index"], job["task_id"],
                        job["checkpoint_dir"])
    ctx.log(f"started: {strategy.num_replicas_in_sync} replicas in sync")
    result = pickle.loads(job["fn"])(ctx)
    if ctx.is_chief:
        with open(argv[1], "wb") as f:
            pickle.dump(result, f)
    # Leave together: the chief hosts TensorFlow's coordination service, and a worker still
    # busy when it exits logs connection errors (the chief saves the model meanwhile).
    strategy.reduce("SUM", tf.constant(1.0), axis=None)
    ctx.log("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
