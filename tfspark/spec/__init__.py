"""What each column becomes: Feature, FeatureSpec, the kinds, their JSON form, and the mapping
from Spark schemas (infer_spec). No pyspark and no TensorFlow are imported here."""

from tfspark.spec.from_spark import infer_spec
from tfspark.spec.kinds import (
    DTYPES,
    ENCODINGS,
    KINDS,
    RAGGED_LENGTHS,
    RAGGED_VALUES,
    DType,
    Encoding,
    Kind,
)
from tfspark.spec.model import Feature, FeatureSpec

__all__ = ["DTYPES", "ENCODINGS", "KINDS", "RAGGED_LENGTHS", "RAGGED_VALUES", "DType",
           "Encoding", "Feature", "FeatureSpec", "Kind", "infer_spec"]
