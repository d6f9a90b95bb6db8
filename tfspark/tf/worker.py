"""One TensorFlow training worker of train_on_spark: `python -m tfspark.tf.worker JOB RESULT`.

Started by the Spark task with TF_CONFIG and CUDA_VISIBLE_DEVICES set (what the job file holds
and why a fresh process: tfspark.keras.worker). train_fn builds its model under
MultiWorkerMirroredStrategy (ctx.strategy, ctx.scope()).
"""

from __future__ import annotations

import sys
from typing import Any

from tfspark.errors import scrubbed
from tfspark.keras.worker import WorkerContext, read_job, run_job
from tfspark.quiet import quiet_import

__all__ = ["WorkerContext", "main"]


def _differs(strategy: Any) -> Any:
    """Whether any worker holds another value of an int than this one: through the strategy's
    collectives, as the spread around the mean (the same answer on every worker)."""
    quiet_import("tensorflow")
    import tensorflow as tf

    def differs(value: int) -> bool:
        v = tf.constant(float(value), tf.float64)
        mean = strategy.reduce("MEAN", v, axis=None)
        return float(strategy.reduce("SUM", tf.square(v - mean), axis=None)) > 0

    return differs


def unsharded_batches(feed: Any) -> Any:
    """A Feed's batches (tfspark.keras.fitting) as a tf.data.Dataset this worker reads alone
    (auto-shard policy OFF): Keras would shard a Python iterable again, taking every n-th
    batch of a reader that is this worker's shard already; whole_worker_batches then hands
    each batch whole to the worker's replica. The element spec is the first batch's (it is
    read, then given back)."""
    quiet_import("tensorflow")
    import tensorflow as tf

    first = next(iter(feed.batches()), None)
    feed.rewind()
    if first is None:  # no data: fit says so
        return feed.batches()
    spec = _spec(_to_tf(first))

    @scrubbed
    def batches() -> Any:
        feed.rewind()  # a new iteration starts with what an earlier one read and did not train
        for batch in feed.batches():
            yield _to_tf(batch)

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return tf.data.Dataset.from_generator(batches, output_signature=spec).with_options(options)


def _to_tf(value: Any) -> Any:
    """A read_batches batch with its Ragged columns as tf.RaggedTensor (the rest as it is)."""
    quiet_import("tensorflow")
    import tensorflow as tf

    if hasattr(value, "row_splits"):  # tfspark.numpy.Ragged (a sibling tier: not imported)
        return tf.RaggedTensor.from_row_splits(_to_tf(value.values), value.row_splits)
    if isinstance(value, dict):
        return {k: _to_tf(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_to_tf(v) for v in value)
    return value


def _spec(value: Any) -> Any:
    """The type spec of a batch, any number of rows."""
    quiet_import("tensorflow")
    import tensorflow as tf

    if isinstance(value, dict):
        return {k: _spec(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_spec(v) for v in value)
    if isinstance(value, tf.RaggedTensor):
        return tf.RaggedTensorSpec([None, *value.shape[1:]], value.dtype, value.ragged_rank,
                                   value.row_splits.dtype)
    t = tf.convert_to_tensor(value)
    return tf.TensorSpec([None, *t.shape[1:]], t.dtype)


def main(argv: list[str]) -> int:
    """Run the job's train_fn under MultiWorkerMirroredStrategy; the exit status is 0 when it
    returned (and the chief's value is in RESULT)."""
    job = read_job(argv, "tfspark.tf.worker")
    if job is None:
        return 2
    quiet_import("tensorflow")
    import tensorflow as tf

    from tfspark.tf.multiworker import fix_keras_multiworker, whole_worker_batches

    fix_keras_multiworker()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    if job["num_workers"] > 1:
        whole_worker_batches(strategy)
    ctx = WorkerContext(job["num_workers"], job["index"], job["task_id"], job["checkpoint_dir"],
                        backend="tensorflow", strategy=strategy, differs=_differs(strategy),
                        source=unsharded_batches)  # (also one worker: strings as tensors)
    ctx.log(f"started: {strategy.num_replicas_in_sync} replicas in sync")
    run_job(job, ctx, argv[1])
    # Leave together: the chief hosts TensorFlow's coordination service, and a worker still
    # busy when it exits logs connection errors (the chief saves the model meanwhile).
    strategy.reduce("SUM", tf.constant(1.0), axis=None)
    ctx.log("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
