"""Everything that needs TensorFlow: make_dataset (a tf.data pipeline of a data set), and the
tf.io parsing specs of a FeatureSpec for your own tf.io.parse_example (parsing_spec,
sequence_parsing_spec, and the block layout's block_parsing_spec and block_rows). Never imports
pyspark."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tfspark.errors import require

require("tensorflow", "tfspark.tf (make_dataset, keras_inputs)", "tf",
        "; on a GPU box that gives TensorFlow's GPU build, tensorflow-cpu works too")

if TYPE_CHECKING:
    from tfspark.tf.dataset import make_dataset
    from tfspark.tf.parsing import (
        block_parsing_spec,
        block_rows,
        parsing_spec,
        sequence_parsing_spec,
    )

_NAMES = {"make_dataset": "dataset", "parsing_spec": "parsing",
          "sequence_parsing_spec": "parsing", "block_parsing_spec": "parsing",
          "block_rows": "parsing"}
__all__ = ["block_parsing_spec", "block_rows", "make_dataset", "parsing_spec",
           "sequence_parsing_spec"]


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'tfspark.tf' has no attribute {name!r}")
    return getattr(import_module(f"tfspark.tf.{_NAMES[name]}"), name)
