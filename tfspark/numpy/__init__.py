"""The NumPy reader: read_batches() yields batches of NumPy arrays from tfspark output, for JAX,
PyTorch and every Keras 3 backend. Base install only: never imports pyspark or TensorFlow."""

from tfspark.numpy.batches import BatchReader, read_batches
from tfspark.numpy.columns import Ragged

__all__ = ["BatchReader", "Ragged", "read_batches"]
