"""tfspark: tabular data (Spark DataFrames, Arrow and pandas) as TFRecord files of
tf.train.Example with a parquet copy of the same rows, read fast by Keras, JAX, PyTorch and Grain.

The package's top level holds the verbs, the spec and result types and the errors; the rest
lives in its namespace: tfspark.keras (Keras layers, resumable_fit), tfspark.tf (tf.io parsing
specs), tfspark.arrow (encode_batch), tfspark.spark (spark_filesystem). Names are imported on
first use, so `import tfspark` stays cheap and never pulls in Spark's JVM side or TensorFlow; a
name whose extra is not installed fails on use with one line naming the extra.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
# The distribution on PyPI (`tfspark` there is another project); the import package and the
# command stay `tfspark`. Every install line tfspark prints names it.
DISTRIBUTION = "pyspark-tfrecord"

if TYPE_CHECKING:  # what IDEs and type checkers see; at run time __getattr__ loads on use
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
    from tfspark.keras.inputs import keras_inputs
    from tfspark.keras.preprocessing import keras_preprocessing
    from tfspark.numpy import Ragged, read_batches
    from tfspark.numpy.frameworks import grain_dataset, torch_dataset
    from tfspark.spark.distributed import train_on_spark
    from tfspark.spark.export import write_tfrecords
    from tfspark.spark.source import register
    from tfspark.spec import Feature, FeatureSpec, infer_spec
    from tfspark.store.dali import dali_index
    from tfspark.store.dataset_writer import write_dataset
    from tfspark.store.integrity import VerifyReport, verify
    from tfspark.store.manifest import Manifest, read_manifest
    from tfspark.store.tfx import tfdv_statistics, tfmd_schema, validate
    from tfspark.store.write import WriteResult
    from tfspark.tf.dataset import make_dataset

_API = {
    # writing
    "register": "tfspark.spark.source",
    "write_tfrecords": "tfspark.spark.export",
    "write_dataset": "tfspark.store.dataset_writer",
    "infer_spec": "tfspark.spec",
    "WriteResult": "tfspark.store.write",
    # the data set
    "read_manifest": "tfspark.store.manifest",
    "Manifest": "tfspark.store.manifest",
    "verify": "tfspark.store.integrity",
    "VerifyReport": "tfspark.store.integrity",
    "tfdv_statistics": "tfspark.store.tfx",
    "tfmd_schema": "tfspark.store.tfx",
    "validate": "tfspark.store.tfx",
    "dali_index": "tfspark.store.dali",
    "FeatureSpec": "tfspark.spec",
    "Feature": "tfspark.spec",
    # reading
    "make_dataset": "tfspark.tf.dataset",
    "read_batches": "tfspark.numpy",
    "Ragged": "tfspark.numpy",
    "torch_dataset": "tfspark.numpy.frameworks",
    "grain_dataset": "tfspark.numpy.frameworks",
    "make_converter": "tfspark.converter",
    "Converter": "tfspark.converter",
    # training
    "keras_inputs": "tfspark.keras.inputs",
    "keras_preprocessing": "tfspark.keras.preprocessing",
    "train_on_spark": "tfspark.spark.distributed",
    **{name: "tfspark.errors" for name in (
        "TfsparkError", "AccessError", "SchemaError", "EncodeError", "OptionError",
        "CorruptRecordError", "ManifestError", "WriteConflictError", "CountMismatchError",
        "MissingExtraError", "TrainingError")},
}

__all__ = [  # a literal list, so linters and IDEs see the TYPE_CHECKING imports as the API
    "AccessError", "Converter", "CorruptRecordError", "CountMismatchError", "EncodeError",
    "dali_index",
    "Feature", "FeatureSpec", "Manifest", "ManifestError", "MissingExtraError", "OptionError",
    "Ragged", "SchemaError", "TfsparkError", "TrainingError", "VerifyReport",
    "WriteConflictError", "WriteResult", "grain_dataset", "infer_spec", "keras_inputs",
    "keras_preprocessing", "make_converter", "make_dataset", "read_batches", "read_manifest",
    "register", "tfdv_statistics", "tfmd_schema", "torch_dataset", "train_on_spark",
    "validate", "verify", "write_dataset", "write_tfrecords"]

# Names of earlier releases: (where the name lives now, its name there, what to write instead).
# They still work, with a DeprecationWarning saying that.
_MOVED = {
    "encode_batch": ("tfspark.arrow", "encode_batch", "tfspark.arrow.encode_batch"),
    "parsing_spec": ("tfspark.tf", "parsing_spec", "tfspark.tf.parsing_spec"),
    "sequence_parsing_spec": ("tfspark.tf", "sequence_parsing_spec",
                              "tfspark.tf.sequence_parsing_spec"),
    "resumable_fit": ("tfspark.keras", "resumable_fit", "tfspark.keras.resumable_fit"),
    **{name: ("tfspark.keras", name, f"tfspark.keras.{name}") for name in (
        "PooledEmbedding", "PooledMean", "VocabularyIds", "MeanImputation")},
    "spark_filesystem": ("tfspark.spark.hadoop_stores", "spark_filesystem",
                         "tfspark.spark.spark_filesystem"),
    "Report": ("tfspark.store.integrity", "VerifyReport", "tfspark.VerifyReport"),
    "ReadOptions": ("tfspark.store.options", "ReadOptions",
                    "the keyword arguments of the readers"),
    "WriteOptions": ("tfspark.store.options", "WriteOptions",
                     "the keyword arguments of write_tfrecords and write_dataset"),
    # modules that were reachable as attributes of the package
    "manifest": ("tfspark.store.manifest", None, "tfspark.read_manifest and tfspark.Manifest"),
    "options": ("tfspark.store.options", None, "the writers' and readers' keyword arguments"),
    "integrity": ("tfspark.store.integrity", None, "tfspark.verify"),
    "read_plan": ("tfspark.store.read_plan", None, "the readers"),
}


# Subpackages, reachable as attributes once imported as Python does, and here before too.
_SUBPACKAGES = ("arrow", "cli", "errors", "keras", "numpy", "paths", "spark", "spec", "store",
                "tf", "wire")


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is not None:
        return getattr(import_module(module), name)
    if name in _SUBPACKAGES:
        return import_module(f"tfspark.{name}")
    moved = _MOVED.get(name)
    if moved is not None:
        where, attr, instead = moved
        warnings.warn(f"tfspark.{name} is deprecated and goes in the next release: use "
                      f"{instead}", DeprecationWarning, stacklevel=2)
        found = import_module(where)
        return found if attr is None else getattr(found, attr)
    raise AttributeError(f"module 'tfspark' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
