"""Keras 3 on any backend (JAX, PyTorch, TensorFlow): Inputs from the spec (keras_inputs),
preprocessing layers from the statistics (keras_preprocessing), the layers they are built of,
and resumable_fit (model.fit that resumes mid-epoch from its checkpoints). Needs Keras, never
TensorFlow; never imports pyspark. Array features pooled from ragged tensors need the
TensorFlow backend. Names are imported on first use (Keras picks its backend when imported)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tfspark.errors import require
from tfspark.quiet import quiet_import

require("keras", "tfspark.keras (keras_inputs, keras_preprocessing)", "keras",
        "; with a backend: pip install jax, or torch, or tensorflow")

if TYPE_CHECKING:
    from tfspark.keras.fitting import resumable_fit
    from tfspark.keras.inputs import keras_inputs
    from tfspark.keras.layers import MeanImputation, PooledEmbedding, PooledMean, VocabularyIds
    from tfspark.keras.preprocessing import keras_preprocessing

_NAMES = {"keras_inputs": "inputs", "keras_preprocessing": "preprocessing",
          "resumable_fit": "fitting", "MeanImputation": "layers", "PooledEmbedding": "layers",
          "PooledMean": "layers", "VocabularyIds": "layers"}
__all__ = ["MeanImputation", "PooledEmbedding", "PooledMean", "VocabularyIds", "keras_inputs",
           "keras_preprocessing", "resumable_fit"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'tfspark.keras' has no attribute {name!r}")
    quiet_import("keras")  # on the TensorFlow backend, without its C++ side's start-up notices
    return getattr(import_module(f"tfspark.keras.{_NAMES[name]}"), name)
