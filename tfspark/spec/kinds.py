"""The vocabulary of a feature spec: kinds, stored dtypes, encodings, as Literal types and tuples.

One place for the names the spec, the JSON format (schemas/feature_spec.schema.json), the
encoders and the readers agree on.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

FORMAT = "tfspark.feature_spec"
VERSION = 1

# sequence: a SequenceExample feature list, one Feature per step (array<array<T>> columns).
Kind = Literal["fixed", "varlen", "ragged", "sequence"]
DType = Literal["int64", "float32", "string"]
# How source values become the stored dtype: int as is; bool 0/1; float and decimal to
# float32 (decimals only when they come back exactly); decimal_string: decimals as their exact
# text; bytes UTF-8 text or raw binary; date days and timestamp microseconds since 1970 (UTC);
# vector an ml Vector, dense.
Encoding = Literal["bool", "int", "float", "decimal", "decimal_string", "bytes", "date",
                   "timestamp", "vector"]
DECIMAL_AS = ("float32", "string")  # infer_spec's decimal_as: float32 storage or exact text
NULL_ELEMENT_POLICIES = ("error", "drop")  # the encoders' null_elements: a null in an array

# Example: one Features map per record. SequenceExample: a context map (every kind but
# sequence) and a feature_lists map (the sequence features).
RecordType = Literal["Example", "SequenceExample"]

KINDS: tuple[Kind, ...] = get_args(Kind)
RECORD_TYPES: tuple[RecordType, ...] = get_args(RecordType)
# What a data set's records can be: a spec's record types, or ByteArray (raw records, no spec).
STORED_RECORD_TYPES = (*RECORD_TYPES, "ByteArray")
DTYPES: tuple[DType, ...] = get_args(DType)
ENCODINGS: tuple[Encoding, ...] = get_args(Encoding)

# Suffixes of the two Example keys a 2-D ragged feature is stored under.
RAGGED_VALUES = "/values"
RAGGED_LENGTHS = "/row_lengths"

TYPE_DEFAULTS = {"int64": 0, "float32": 0.0, "string": ""}
F32_MAX = 3.4028234663852886e38  # largest finite float32


def fits_float32(value: float) -> bool:
    """NaN, +-inf, or a finite number within float32 range (a default must not overflow)."""
    try:
        x = float(value)
    except OverflowError:
        return False
    return not math.isfinite(x) or abs(x) <= F32_MAX


def json_float(x: float) -> float | str:
    """A float for JSON, which has no NaN/Infinity: those become strings (lossless round trip)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


FLOAT_WORDS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def float_of_json(x: float | int | str) -> float:
    """The float json_float wrote: a number, or one of the FLOAT_WORDS."""
    return float(FLOAT_WORDS.get(x, x)) if isinstance(x, str) else float(x)
