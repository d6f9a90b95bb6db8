"""The NumPy reader: read_batches() yields batches of NumPy arrays from tfspark output, for JAX,
PyTorch and every Keras 3 backend. Base install only: never imports pyspark or TensorFlow."""

from tfspark.numpy.batches import BatchReader
from tfspark.numpy.columns import Ragged
from tfspark.numpy.read import read_batches

__all__ = ["BatchReader", "Ragged", "read_batches"]
