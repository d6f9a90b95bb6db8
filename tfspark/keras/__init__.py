"""Keras 3 on any backend (JAX, PyTorch, TensorFlow): Inputs from the spec (inputs.py),
preprocessing layers from the statistics (preprocessing.py), layers built from keras.ops
(layers.py). Needs Keras, never TensorFlow; never imports pyspark. Array features pooled from
ragged tensors need the TensorFlow backend."""

from tfspark.errors import require

require("keras", "tfspark.keras (keras_inputs, keras_preprocessing)", "keras",
        "; with a backend: pip install jax, or torch, or tensorflow")
