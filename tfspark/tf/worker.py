"""One TensorFlow training worker of train_on_spark: `python -m tfspark.tf.worker JOB RESULT`.

Started by the Spark task with TF_CONFIG and CUDA_VISIBLE_DEVICES set (what the job file holds
and why a fresh process: tfspark.keras.worker). train_fn builds its model under
MultiWorkerMirroredStrategy (ctx.strategy, ctx.scope()).
"""

from __future__ import annotations

import sys
from typing import Any

from tfspark.keras.worker import WorkerContext, read_job, run_job

__all__ = ["WorkerContext", "main"]


def _differs(strategy: Any) -> Any:
    """Whether any worker holds another value of an int than this one: through the strategy's
    collectives, as the spread around the mean (the same answer on every worker)."""
    import tensorflow as tf

    def differs(value: int) -> bool:
        v = tf.constant(float(value), tf.float64)
        mean = strategy.reduce("MEAN", v, axis=None)
        return float(strategy.reduce("SUM", tf.square(v - mean), axis=None)) > 0

    return differs


def main(argv: list[str]) -> int:
    """Run the job's train_fn under MultiWorkerMirroredStrategy; the exit status is 0 when it
    returned (and the chief's value is in RESULT)."""
    job = read_job(argv, "tfspark.tf.worker")
    if job is None:
        return 2
    import tensorflow as tf

    from tfspark.tf.multiworker import fix_keras_multiworker

    fix_keras_multiworker()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ctx = WorkerContext(job["num_workers"], job["index"], job["task_id"], job["checkpoint_dir"],
                        backend="tensorflow", strategy=strategy, differs=_differs(strategy))
    ctx.log(f"started: {strategy.num_replicas_in_sync} replicas in sync")
    run_job(job, ctx, argv[1])
    # Leave together: the chief hosts TensorFlow's coordination service, and a worker still
    # busy when it exits logs connection errors (the chief saves the model meanwhile).
    strategy.reduce("SUM", tf.constant(1.0), axis=None)
    ctx.log("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
