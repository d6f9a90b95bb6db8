"""Keras 3's model.fit under tf.distribute.MultiWorkerMirroredStrategy with several workers.

Keras 3 (3.0 to at least 3.15, TensorFlow backend) cannot fit under that strategy once there is
more than one worker (keras-team/keras#20585, tensorflow/tensorflow#72388): two helpers of its
TF trainer reduce values with `strategy.reduce(..., axis=0)` or on whole structures, which the
multi-worker collectives refuse ("Attempt to convert a value (PerReplica...)", "Invalid
reduction dimension 0 for input with 0 dimensions"). `fix_keras_multiworker()` replaces those
two helpers in the process it runs in (tfspark's training workers call it; nothing else does):
  - the build before fit (optimizer, loss and metric state) runs this worker's own first batch
    once instead of a mean of every worker's batches as placeholders (which also turned ragged
    inputs dense);
  - the per-step logs (metric results, already the same on every worker because Keras's metric
    variables aggregate across replicas) are averaged across workers one value at a time.
Everything else of fit is Keras's own. A Keras whose helpers changed is left alone, with a
warning. `whole_worker_batches(strategy)` makes the strategy hand each worker's own shard to
its replica batch by batch, where tf.distribute cut every batch into 1/n pieces.
"""

from __future__ import annotations

import warnings
from typing import Any

from tfspark.errors import OptionError
from tfspark.quiet import quiet_import

_applied = False


def fix_keras_multiworker() -> None:
    """Make keras.Model.fit/evaluate work under a multi-worker MultiWorkerMirroredStrategy.

    Idempotent. Raises OptionError without Keras 3's TensorFlow trainer (Keras 2, or another
    backend). A Keras 3 whose helpers changed is left as it is, with a warning: a release that
    changed them may have fixed keras-team/keras#20585.
    """
    global _applied
    if _applied:
        return
    import keras
    quiet_import("tensorflow")
    import tensorflow as tf

    try:
        from keras.src.backend.tensorflow import trainer as tf_trainer
    except ImportError as e:  # pragma: no cover - Keras 2 or a moved module
        raise OptionError(f"Keras {keras.__version__} has no TensorFlow trainer module; "
                          f"tfspark's multi-worker training needs Keras 3 with the TensorFlow "
                          f"backend (KERAS_BACKEND=tensorflow)") from e
    cls = getattr(tf_trainer, "TensorFlowTrainer", None)
    original = getattr(tf_trainer, "reduce_per_replica", None)
    multi = getattr(tf_trainer, "_collective_all_reduce_multi_worker", None)
    if cls is None or original is None or multi is None \
            or not hasattr(cls, "_maybe_symbolic_build"):
        warnings.warn(f"Keras {keras.__version__} changed the trainer helpers tfspark mends "
                      f"for multi-worker training, so they are left as they are; if fit fails "
                      f"with 'Attempt to convert a value (PerReplica', pin keras<=3.15",
                      RuntimeWarning, stacklevel=2)
        _applied = True
        return
    from keras import tree

    def local(value: Any, strategy: Any) -> Any:
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    def maybe_symbolic_build(self: Any, iterator: Any = None, data_batch: Any = None) -> None:
        if self._distribute_strategy is None:
            return  # built when the step function is traced, as Keras does
        strategy = self.distribute_strategy
        if iterator is not None:
            for _, _, it in iterator:
                data_batch = tree.map_structure(lambda v: local(v, strategy), next(it))
                break
        # Build the optimizer, loss and metrics by running this worker's batch once, eagerly,
        # then forget the metric values (Keras's own build turns ragged inputs into dense
        # placeholders, which pooling layers refuse).
        x, y, weights = keras.utils.unpack_x_y_sample_weight(data_batch)
        with strategy.scope():
            if self.optimizer is not None and not self.optimizer.built:
                self.optimizer.build(self.trainable_variables)
            y_pred = self(x, training=False)
            if y is not None:
                self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=weights,
                                  training=False)
                self.compute_metrics(x, y, y_pred, sample_weight=weights)
            self.reset_metrics()

    def reduce_per_replica(values: Any, strategy: Any, reduction: str) -> Any:
        if reduction in ("auto", "mean") and multi(strategy):
            return tree.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), values)
        return original(values, strategy, reduction)

    cls._maybe_symbolic_build = maybe_symbolic_build
    tf_trainer.reduce_per_replica = reduce_per_replica
    _applied = True


def whole_worker_batches(strategy: Any) -> None:
    """Make `strategy` (this process's MultiWorkerMirroredStrategy, one replica per worker)
    hand a dataset its own shard already (auto-shard policy OFF: make_dataset(shard=...))
    to this worker's replica batch by batch, as each worker reads it.

    tf.distribute treats every dataset as one of global batches: it cut each of a worker's
    batches into 1/n pieces, and Keras, counting the steps from the dataset's cardinality,
    then trained each epoch on the first 1/n of every worker's shard at 1/n of the batch
    (measured with 2 workers: 32 steps of half batches for 32 batches; 64 steps without a
    known cardinality). Other datasets go to TensorFlow's own distribution as before."""
    quiet_import("tensorflow")
    import tensorflow as tf

    original = strategy.experimental_distribute_dataset
    off = tf.data.experimental.AutoShardPolicy.OFF

    def distribute(dataset: Any, options: Any = None) -> Any:
        mine = dataset.options().experimental_distribute.auto_shard_policy == off
        if mine and options is None and len(strategy.extended.worker_devices) == 1:
            return strategy.distribute_datasets_from_function(lambda _: dataset)
        return original(dataset, options)

    strategy.experimental_distribute_dataset = distribute
