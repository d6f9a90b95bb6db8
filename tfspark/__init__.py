"""tfspark: Spark DataFrames -> TFRecord files of tf.train.Example, a parquet copy, and tf.data.

The public API is small; names are imported on first use so `import tfspark` stays cheap and
never pulls in Spark's JVM side or TensorFlow.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_API = {
    "FeatureSpec": "tfspark.spec",
    "Feature": "tfspark.spec",
    "infer_spec": "tfspark.spec",
    "encode_batch": "tfspark.encode",
    "make_dataset": "tfspark.dataset",
    "keras_inputs": "tfspark.kerasio",
    "register": "tfspark.datasource",
    "write_tfrecords": "tfspark.workflow",
    "WriteResult": "tfspark.workflow",
    "TfsparkError": "tfspark.errors",
    "SchemaError": "tfspark.errors",
    "EncodeError": "tfspark.errors",
    "OptionError": "tfspark.errors",
    "CorruptRecordError": "tfspark.errors",
}

__all__ = sorted(_API)


# Not "kerasio" or any module named like a function: importing a submodule sets an attribute
# on the package that would shadow the function of the same name.
_MODULES = {"spec", "encode", "decode", "framing", "manifest", "datasource", "workflow",
            "dataset", "verify", "errors"}


def __getattr__(name: str) -> Any:
    if name in _MODULES:  # tfspark.manifest etc. without an explicit import
        return import_module(f"tfspark.{name}")
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'tfspark' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
