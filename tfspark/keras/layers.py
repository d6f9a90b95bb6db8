"""Keras 3 layers for every backend (JAX, PyTorch, TensorFlow): keras.ops only, no TensorFlow.

    PooledEmbedding   integer ids per row (a lookup's output) -> the mean of their embeddings
    PooledMean        numbers per row -> the mean of the normalized values (and how many)
    MeanImputation    a number, NaN where missing -> its normalized value (the mean where
                      missing) and an is-missing indicator
    VocabularyIds     the ids read_batches(strings="ids") gives a string feature, as they are,
                      with the vocabulary they number (what a StringLookup would map)

The pooling layers take dense [batch, n] input on every backend, and the tf.RaggedTensor
rows make_dataset yields on the TensorFlow backend (the only one with ragged tensors; 2-D
ragged rows pool over all their values; empty rows pool to zeros). Registered with Keras, so
a saved model loads with `keras.saving.load_model` once tfspark is
imported.
"""

from __future__ import annotations

import sys
from typing import Any

import keras


def _ragged(x: Any) -> Any:
    """TensorFlow when x is a tf.RaggedTensor (only the TensorFlow backend has them), else
    None: dense input goes through keras.ops on any backend."""
    tf = sys.modules.get("tensorflow")
    return tf if tf is not None and isinstance(x, tf.RaggedTensor) else None


def _flat(x: Any) -> Any:
    """[batch, None, None] -> [batch, None]: a row's values, all of them (2-D ragged rows
    and SequenceExample steps pool over every value)."""
    if _ragged(x) is not None and x.ragged_rank > 1:
        return x.merge_dims(1, -1)
    return x


def _counts(x: Any, dtype: Any) -> Any:
    """Values per row of a ragged or dense [batch, n] tensor, as dtype [batch, 1]."""
    tf = _ragged(x)
    if tf is not None:
        return tf.cast(x.row_lengths(), dtype)[:, None]
    ops = keras.ops
    return ops.full((ops.shape(x)[0], 1), ops.shape(x)[1], dtype=dtype)


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
        tf = _ragged(ids)
        if tf is not None:
            total = tf.reduce_sum(tf.ragged.map_flat_values(tf.gather, self.embeddings, ids),
                                  axis=1)
        else:
            total = keras.ops.sum(keras.ops.take(self.embeddings, ids, axis=0), axis=1)
        return total / keras.ops.maximum(_counts(ids, total.dtype), 1.0)

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
        tf = _ragged(x)
        if tf is not None:
            z = tf.ragged.map_flat_values(
                lambda v: (tf.cast(v, "float32") - self.mean) / std, x)
            total = tf.reduce_sum(z, axis=1)[:, None]
        else:
            z = (keras.ops.cast(x, "float32") - self.mean) / std
            total = keras.ops.sum(z, axis=1, keepdims=True)
        n = _counts(x, "float32")
        pooled = total / keras.ops.maximum(n, 1.0)
        return keras.ops.concatenate([pooled, keras.ops.log1p(n)], axis=1)

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


@keras.saving.register_keras_serializable(package="tfspark")
class VocabularyIds(keras.layers.Layer):
    """A string feature read as ids (read_batches(strings="ids"): k + 1 for vocabulary[k], 0
    out of vocabulary, as keras.layers.StringLookup numbers them) -> the same ids as int32,
    those past this layer's vocabulary (when max_tokens cut it) as 0.
    What keras_preprocessing(strings="ids") gives such a feature in place of a StringLookup,
    with the same vocabulary_size() and get_vocabulary(), so an Embedding or one-hot layer
    after it is sized alike; it needs no TensorFlow (StringLookup does)."""

    def __init__(self, vocabulary: list[str] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.vocabulary = [str(v) for v in vocabulary or []]

    def call(self, ids: Any) -> Any:
        """The ids, as int32; those past the vocabulary (a longer one read them) as 0."""
        ids = keras.ops.cast(ids, "int32")
        return keras.ops.where(ids < self.vocabulary_size(), ids, keras.ops.zeros_like(ids))

    def vocabulary_size(self) -> int:
        """The vocabulary and the out-of-vocabulary id: ids run from 0 to this minus 1."""
        return len(self.vocabulary) + 1

    def get_vocabulary(self) -> list[str]:
        """As StringLookup gives it: the out-of-vocabulary token first."""
        return ["[UNK]", *self.vocabulary]

    def compute_output_shape(self, input_shape: Any) -> tuple:
        """The input's shape."""
        return tuple(input_shape)

    def get_config(self) -> dict[str, Any]:
        """What load_model needs to build the layer again."""
        return {**super().get_config(), "vocabulary": self.vocabulary}
