"""tfspark: Spark DataFrames -> TFRecord files of tf.train.Example, a parquet copy, and tf.data.

The public API is small; names are imported on first use so `import tfspark` stays cheap and
never pulls in Spark's JVM side or TensorFlow. A name whose extra is not installed fails on use
with one line naming the extra (tfspark[spark] for register, write_tfrecords and
make_converter, tfspark[tf] for make_dataset, tfspark[keras] for keras_inputs and
keras_preprocessing, tfspark[torch] for torch_dataset, tfspark[grain] for grain_dataset).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
# The distribution on PyPI (`tfspark` there is another project); the import package and the
# command stay `tfspark`. Every install line tfspark prints names it.
DISTRIBUTION = "pyspark-tfrecord"

if TYPE_CHECKING:  # what IDEs and type checkers see; at run time __getattr__ loads on use
    from tfspark.arrow.encode import encode_batch
    from tfspark.converter import Converter, make_converter
    from tfspark.errors import (
        AccessError,
        CorruptRecordError,
        CountMismatchError,
        EncodeError,
        ManifestError,
        MissingExtraError,
        OptionError,
        SchemaError,
        TfsparkError,
        TrainingError,
        WriteConflictError,
    )
    from tfspark.keras.fitting import resumable_fit
    from tfspark.keras.inputs import keras_inputs
    from tfspark.keras.layers import MeanImputation, PooledEmbedding, PooledMean, VocabularyIds
    from tfspark.keras.preprocessing import keras_preprocessing
    from tfspark.numpy import Ragged, read_batches
    from tfspark.numpy.frameworks import grain_dataset, torch_dataset
    from tfspark.spark.distributed import train_on_spark
    from tfspark.spark.export import write_tfrecords
    from tfspark.spark.hadoop_stores import spark_filesystem
    from tfspark.spark.source import register
    from tfspark.spec import Feature, FeatureSpec, infer_spec
    from tfspark.store.dataset_writer import write_dataset
    from tfspark.store.integrity import Report, verify
    from tfspark.store.options import ReadOptions, WriteOptions
    from tfspark.store.write import WriteResult
    from tfspark.tf.dataset import make_dataset
    from tfspark.tf.parsing import parsing_spec, sequence_parsing_spec

_API = {
    "FeatureSpec": "tfspark.spec",
    "Feature": "tfspark.spec",
    "infer_spec": "tfspark.spec",
    "encode_batch": "tfspark.arrow.encode",
    "make_converter": "tfspark.converter",
    "Converter": "tfspark.converter",
    "make_dataset": "tfspark.tf.dataset",
    "read_batches": "tfspark.numpy",
    "Ragged": "tfspark.numpy",
    "torch_dataset": "tfspark.numpy.frameworks",
    "grain_dataset": "tfspark.numpy.frameworks",
    "keras_inputs": "tfspark.keras.inputs",
    "keras_preprocessing": "tfspark.keras.preprocessing",
    "resumable_fit": "tfspark.keras.fitting",
    "parsing_spec": "tfspark.tf.parsing",
    "sequence_parsing_spec": "tfspark.tf.parsing",
    "PooledEmbedding": "tfspark.keras.layers",
    "PooledMean": "tfspark.keras.layers",
    "VocabularyIds": "tfspark.keras.layers",
    "MeanImputation": "tfspark.keras.layers",
    "register": "tfspark.spark.source",
    "write_tfrecords": "tfspark.spark.export",
    "write_dataset": "tfspark.store.dataset_writer",
    "train_on_spark": "tfspark.spark.distributed",
    "spark_filesystem": "tfspark.spark.hadoop_stores",
    "WriteResult": "tfspark.store.write",
    "WriteOptions": "tfspark.store.options",
    "ReadOptions": "tfspark.store.options",
    "verify": "tfspark.store.integrity",
    "Report": "tfspark.store.integrity",
    **{name: "tfspark.errors" for name in (
        "TfsparkError", "AccessError", "SchemaError", "EncodeError", "OptionError",
        "CorruptRecordError", "ManifestError", "WriteConflictError", "CountMismatchError",
        "MissingExtraError", "TrainingError")},
}

__all__ = [  # a literal list, so linters and IDEs see the TYPE_CHECKING imports as the API
    "AccessError", "Converter", "CorruptRecordError", "CountMismatchError", "EncodeError",
    "Feature", "FeatureSpec", "ManifestError", "MeanImputation", "MissingExtraError", "OptionError",
    "PooledEmbedding", "PooledMean", "Ragged", "ReadOptions", "Report", "SchemaError",
    "TfsparkError", "TrainingError", "VocabularyIds", "WriteConflictError", "WriteOptions",
    "WriteResult", "encode_batch", "grain_dataset", "infer_spec", "keras_inputs",
    "keras_preprocessing", "make_converter", "make_dataset", "parsing_spec", "read_batches",
    "register", "resumable_fit", "sequence_parsing_spec", "spark_filesystem", "torch_dataset",
    "train_on_spark", "verify", "write_dataset", "write_tfrecords"]
# Submodules reachable as attributes without an import (tfspark.store.manifest.read_manifest(...)).
# None is named like a function above: importing it would shadow that function.
_MODULES = {"spec": "tfspark.spec", "errors": "tfspark.errors", "store": "tfspark.store",
            **{name: f"tfspark.store.{name}" for name in (
                "manifest", "options", "integrity", "read_plan")}}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return import_module(_MODULES[name])
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'tfspark' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
