"""Keras layers that pool variable-length and ragged features (what make_dataset yields as
tf.RaggedTensor [batch, None] or [batch, None, None]) into one fixed-size vector per row, and
one that imputes missing numbers.

    PooledEmbedding   integer ids (a lookup layer's output) -> the mean of their embeddings
    PooledMean        numbers -> the mean of the normalized values (and how many there were)
    MeanImputation    a number, NaN where missing -> its normalized value (the mean where
                      missing) and an is-missing indicator

The pooling layers take ragged or dense input; ragged input needs the TensorFlow backend
(Keras 3 has ragged tensors only there). Empty and absent rows pool to zeros. Registered with
Keras, so a saved model loads with `keras.saving.load_model` once tfspark is imported.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf


def _flat(x: Any) -> Any:
    """[batch, None, None] -> [batch, None]: a row's values, all of them (2-D ragged rows
    and SequenceExample steps pool over every value)."""
    if isinstance(x, tf.RaggedTensor) and x.ragged_rank > 1:
        return x.merge_dims(1, -1)
    return x


def _counts(x: Any, dtype: Any) -> Any:
    """Values per row of a ragged or dense [batch, n] tensor, as dtype [batch, 1]."""
    n = x.row_lengths() if isinstance(x, tf.RaggedTensor) else tf.fill(
        tf.shape(x)[:1], tf.shape(x, out_type=tf.int64)[1])
    return tf.cast(n, dtype)[:, None]


@keras.saving.register_keras_serializable(package="tfspark")
class PooledEmbedding(keras.layers.Layer):
    """Ids in [0, input_dim) per row (ragged or dense) -> the mean of their embeddings,
    [batch, output_dim]; zeros for a row without ids."""

    def __init__(self, input_dim: int, output_dim: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)

    def build(self, input_shape: Any) -> None:
        """The embedding table, input_dim x output_dim."""
        self.embeddings = self.add_weight(shape=(self.input_dim, self.output_dim),
                                          initializer="uniform", name="embeddings")

    def call(self, ids: Any) -> Any:
        """[batch, output_dim]: the mean embedding of each row's ids."""
        ids = _flat(ids)
        if isinstance(ids, tf.RaggedTensor):
            vectors = tf.ragged.map_flat_values(tf.gather, self.embeddings, ids)
        else:
            vectors = tf.gather(self.embeddings, ids)
        total = tf.reduce_sum(vectors, axis=1)
        return total / tf.maximum(_counts(ids, total.dtype), 1.0)

    def compute_output_shape(self, input_shape: Any) -> tuple:
        """(batch, output_dim)."""
        return (input_shape[0], self.output_dim)

    def get_config(self) -> dict[str, Any]:
        """What load_model needs to build the layer again."""
        return {**super().get_config(), "input_dim": self.input_dim,
                "output_dim": self.output_dim}


@keras.saving.register_keras_serializable(package="tfspark")
class PooledMean(keras.layers.Layer):
    """Numbers per row (ragged or dense) -> [batch, 2]: the mean of (x - mean) / std over the
    row's values, and log1p of how many there were; zeros for an empty row. mean and variance
    are of the elements (tfspark's statistics give them without adapt())."""

    def __init__(self, mean: float = 0.0, variance: float = 1.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.mean, self.variance = float(mean), float(variance)

    def call(self, x: Any) -> Any:
        """[batch, 2]: the pooled normalized mean and log1p of the count of each row."""
        x = _flat(x)
        std = max(self.variance, 1e-12) ** 0.5
        if isinstance(x, tf.RaggedTensor):
            z = tf.ragged.map_flat_values(
                lambda v: (tf.cast(v, "float32") - self.mean) / std, x)
        else:
            z = (tf.cast(x, "float32") - self.mean) / std
        n = _counts(x, "float32")
        pooled = tf.reduce_sum(z, axis=1)[:, None] / tf.maximum(n, 1.0)
        return tf.concat([pooled, tf.math.log1p(n)], axis=1)

    def compute_output_shape(self, input_shape: Any) -> tuple:
        """(batch, 2)."""
        return (input_shape[0], 2)

    def get_config(self) -> dict[str, Any]:
        """What load_model needs to build the layer again."""
        return {**super().get_config(), "mean": self.mean, "variance": self.variance}


@keras.saving.register_keras_serializable(package="tfspark")
class MeanImputation(keras.layers.Layer):
    """A number per row, NaN or infinite where it is missing -> [batch, 2]: the normalized
    value ((x - mean) / std, the mean where missing, so 0) and 1.0 where it was missing (the
    impute-and-indicate practice). mean and variance are of the finite values. Keras ops only:
    every backend."""

    def __init__(self, mean: float = 0.0, variance: float = 1.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.mean, self.variance = float(mean), float(variance)

    def call(self, x: Any) -> Any:
        """[batch, 2]: the imputed normalized value and the is-missing indicator."""
        ops = keras.ops
        x = ops.reshape(ops.cast(x, "float32"), (-1,))
        missing = ops.logical_not(ops.isfinite(x))
        std = max(self.variance, 1e-12) ** 0.5
        z = ops.where(missing, ops.zeros_like(x), (x - self.mean) / std)
        return ops.stack([z, ops.cast(missing, "float32")], axis=-1)

    def compute_output_shape(self, input_shape: Any) -> tuple:
        """(batch, 2)."""
        return (input_shape[0], 2)

    def get_config(self) -> dict[str, Any]:
        """What load_model needs to build the layer again."""
        return {**super().get_config(), "mean": self.mean, "variance": self.variance}
