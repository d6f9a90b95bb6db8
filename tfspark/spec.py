"""Spark schema -> FeatureSpec: what each column becomes in a tf.train.Example, and how to parse it.

Pure: imports pyspark.sql.types only (no SparkSession) and TensorFlow only inside
`parsing_spec()`. The type mapping is the table `_SCALARS` below; everything not in it is
refused with a SchemaError naming the column. The JSON form is validated by hand here and
described by `schemas/feature_spec.schema.json` (tests keep the two in agreement).
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import types as T

from tfspark.errors import SchemaError

FORMAT = "tfspark.feature_spec"
VERSION = 1
KINDS = ("fixed", "varlen", "ragged")
DTYPES = ("int64", "float32", "string")
# Suffixes of the two Example keys a 2-D ragged feature is stored under.
RAGGED_VALUES = "/values"
RAGGED_LENGTHS = "/row_lengths"

# Spark scalar type -> (encoding, stored dtype). Encodings tell encode.py how to convert:
#   int: integer as is; bool: 0/1; float: to float32; decimal: to float32;
#   bytes: UTF-8 text or raw binary; date: days since 1970-01-01; timestamp: microseconds UTC.
_SCALARS: dict[type, tuple[str, str]] = {
    T.BooleanType: ("bool", "int64"),
    T.ByteType: ("int", "int64"),
    T.ShortType: ("int", "int64"),
    T.IntegerType: ("int", "int64"),
    T.LongType: ("int", "int64"),
    T.FloatType: ("float", "float32"),
    T.DoubleType: ("float", "float32"),
    T.DecimalType: ("decimal", "float32"),
    T.StringType: ("bytes", "string"),
    T.CharType: ("bytes", "string"),
    T.VarcharType: ("bytes", "string"),
    T.BinaryType: ("bytes", "string"),
    T.DateType: ("date", "int64"),
    T.TimestampType: ("timestamp", "int64"),
    T.TimestampNTZType: ("timestamp", "int64"),
}
ENCODINGS = ("bool", "int", "float", "decimal", "bytes", "date", "timestamp", "vector")
_TYPE_DEFAULTS = {"int64": 0, "float32": 0.0, "string": ""}
F32_MAX = 3.4028234663852886e38  # largest finite float32

# What to tell the user for types we refuse, by Spark type name.
_ADVICE = {
    "map": "convert it with to_json(col) or split it into map_keys/map_values array columns",
    "struct": "select the fields you need; arrays of structs are not supported",
    "array": "only 1-D arrays and 2-D arrays (arrays of arrays) of scalars are supported",
    "void": "cast the column to a concrete type, e.g. col.cast('string')",
}


@dataclass(frozen=True)
class Feature:
    """One feature of the Example. `path` is the column path in the source schema."""

    name: str
    path: tuple[str, ...]
    kind: str  # fixed | varlen | ragged
    dtype: str  # int64 | float32 | string
    encoding: str  # how the source values become dtype (see _SCALARS)
    source_type: str  # Spark simpleString of the source column, e.g. "decimal(10,2)"
    shape: tuple[int, ...] = ()  # fixed: () scalar or (n,) array
    nullable: bool = True
    default: Any = None  # fill value at parse time for nullable fixed features
    label: bool = False

    @property
    def keys(self) -> tuple[str, ...]:
        """The Example feature keys this feature is stored under."""
        if self.kind == "ragged":
            return (self.name + RAGGED_VALUES, self.name + RAGGED_LENGTHS)
        return (self.name,)

    def to_dict(self) -> dict[str, Any]:
        """The feature as its JSON object in the spec format (see FeatureSpec.to_dict)."""
        out = {
            "name": self.name,
            "path": list(self.path),
            "kind": self.kind,
            "dtype": self.dtype,
            "encoding": self.encoding,
            "source_type": self.source_type,
            "shape": list(self.shape),
            "nullable": self.nullable,
            "label": self.label,
        }
        if self.default is not None:
            out["default"] = _json_float(self.default) if self.dtype == "float32" else self.default
        return out


@dataclass(frozen=True)
class FeatureSpec:
    """The immutable description of a TFRecord data set: features in Example key order."""

    features: tuple[Feature, ...]
    source_schema: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_unique_keys(self.features)

    @property
    def names(self) -> list[str]:
        """Feature names, in spec order."""
        return [f.name for f in self.features]

    @property
    def label_names(self) -> list[str]:
        """Names of the label features, in spec order."""
        return [f.name for f in self.features if f.label]

    def __getitem__(self, name: str) -> Feature:
        for f in self.features:
            if f.name == name:
                return f
        raise KeyError(f"no feature {name!r} in the spec; features are {self.names}")

    def with_labels(self, label_cols: Iterable[str]) -> FeatureSpec:
        """A copy whose labels are exactly `label_cols` (SchemaError for a name not in the spec)."""
        wanted = _check_labels(self.features, label_cols)
        return replace(self, features=tuple(replace(f, label=f.name in wanted)
                                            for f in self.features))

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready dict: format, version and the features in order."""
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION,
                               "features": [f.to_dict() for f in self.features]}
        if self.source_schema is not None:
            out["source_schema"] = dict(self.source_schema)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """The spec as JSON text; FeatureSpec.from_json(spec.to_json()) == spec."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> FeatureSpec:
        """Parse a spec from JSON text; raises SchemaError for invalid JSON or an invalid spec."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise SchemaError(f"feature spec is not valid JSON: {e}") from None
        return cls.from_dict(doc)

    @classmethod
    def from_dict(cls, doc: Any) -> FeatureSpec:
        """Parse a spec from its JSON object (as in a manifest's "spec"); raises SchemaError naming
        the field that is wrong.
        """
        from tfspark.spec_json import parse_spec_dict

        return parse_spec_dict(doc)

    def parsing_spec(self) -> dict[str, Any]:
        """{name: tf.io.FixedLenFeature | VarLenFeature | RaggedFeature} for tf.io.parse_example."""
        import tensorflow as tf

        dtypes = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}
        out: dict[str, Any] = {}
        for f in self.features:
            dt = dtypes[f.dtype]
            if f.kind == "fixed":
                if f.default is None:
                    out[f.name] = tf.io.FixedLenFeature(f.shape, dt)
                else:
                    fill = _tf_default(f)
                    default = [fill] * f.shape[0] if f.shape else fill
                    out[f.name] = tf.io.FixedLenFeature(f.shape, dt, default_value=default)
            elif f.kind == "varlen":
                out[f.name] = tf.io.VarLenFeature(dt)
            else:
                values_key, lengths_key = f.keys
                out[f.name] = tf.io.RaggedFeature(
                    dt, value_key=values_key,
                    partitions=[tf.io.RaggedFeature.RowLengths(lengths_key)],
                    row_splits_dtype=tf.int64)
        return out


def infer_spec(schema: T.StructType, label_cols: Iterable[str] = (),
               shapes: Mapping[str, Iterable[int]] | None = None,
               defaults: Mapping[str, Any] | None = None) -> FeatureSpec:
    """Map a Spark schema to a FeatureSpec.

    shapes: {feature name: [n]} makes an array or vector column FixedLen([n]).
    defaults: {feature name: value} overrides the fill value of a nullable column.
    Feature names are column paths joined by "." (struct fields are flattened).
    Raises SchemaError for a column type tfspark cannot store, an unknown label, shape or
    default column, or a bad shape or default.
    """
    if not isinstance(schema, T.StructType):
        raise SchemaError(f"infer_spec needs a pyspark StructType (df.schema), got "
                          f"{type(schema).__name__}")
    fixed = {k: _shape_of(k, v) for k, v in (shapes or {}).items()}
    defaults = dict(defaults or {})
    features: list[Feature] = []
    for sf in schema.fields:
        features.extend(_features_of(sf.dataType, (sf.name,), sf.nullable, fixed, defaults))
    names = {f.name for f in features}
    given_names: tuple[tuple[str, Mapping[str, Any]], ...] = (("shapes", fixed),
                                                              ("defaults", defaults))
    for what, given in given_names:
        unknown = sorted(set(given) - names)
        if unknown:
            raise SchemaError(f"{what} names unknown feature(s) {unknown}; features are "
                              f"{sorted(names)}")
    labels = _check_labels(features, label_cols)
    features = [replace(f, label=f.name in labels) for f in features]
    features.sort(key=lambda f: f.keys[0])
    return FeatureSpec(tuple(features), source_schema=schema.jsonValue())


def _features_of(dt: T.DataType, path: tuple[str, ...], nullable: bool,
                 shapes: Mapping[str, tuple[int, ...]],
                 defaults: Mapping[str, Any]) -> list[Feature]:
    name = ".".join(path)
    if not path[-1]:
        raise SchemaError(f"a column or struct field has an empty name (path {list(path)}); "
                          f"an Example key cannot be empty: rename it with alias()")
    if isinstance(dt, T.StructType):
        out: list[Feature] = []
        for sf in dt.fields:
            # A null struct makes every leaf absent, so leaves under a nullable struct are nullable.
            out.extend(_features_of(sf.dataType, path + (sf.name,), nullable or sf.nullable,
                                    shapes, defaults))
        if not out:
            raise SchemaError(f"column {name!r} is an empty struct; drop it")
        return out
    if _is_vector(dt):
        shape = shapes.get(name)
        return [_make(name, path, "vector", "float32", dt, nullable, shape, defaults)]
    if isinstance(dt, T.ArrayType):
        inner = dt.elementType
        if isinstance(inner, T.ArrayType):
            enc, dtype = _scalar(inner.elementType, name, dt)
            if name in shapes:
                raise SchemaError(f"column {name!r} ({dt.simpleString()}) is 2-D ragged; a "
                                  f"fixed shape is only for 1-D arrays and vectors")
            if name in defaults:
                raise SchemaError(f"column {name!r} ({dt.simpleString()}) is 2-D ragged; a "
                                  f"null row parses as an empty one, so it takes no default")
            return [Feature(name, path, "ragged", dtype, enc, dt.simpleString(),
                            nullable=nullable)]
        enc, dtype = _scalar(inner, name, dt)
        return [_make(name, path, enc, dtype, dt, nullable, shapes.get(name), defaults)]
    enc, dtype = _scalar(dt, name, dt)
    if name in shapes:
        raise SchemaError(f"column {name!r} is a scalar ({dt.simpleString()}); shapes are "
                          f"only for array and vector columns")
    return [_make(name, path, enc, dtype, dt, nullable, None, defaults)]


def _make(name: str, path: tuple[str, ...], enc: str, dtype: str, dt: T.DataType,
          nullable: bool, shape: tuple[int, ...] | None,
          defaults: Mapping[str, Any]) -> Feature:
    is_list = isinstance(dt, T.ArrayType) or enc == "vector"
    if is_list and shape is None:
        if name in defaults:
            raise SchemaError(f"column {name!r} is a variable-length array; a default is only "
                              f"used for fixed-length features (give shapes={{{name!r}: [n]}})")
        return Feature(name, path, "varlen", dtype, enc, _type_name(dt), nullable=nullable)
    if shape is not None and (len(shape) != 1 or shape[0] < 0):
        raise SchemaError(f"shape for {name!r} must be [n] with n >= 0, got {list(shape)}")
    default = None
    if nullable:
        default = _check_default(name, dtype, defaults.get(name, _TYPE_DEFAULTS[dtype]))
    elif name in defaults:
        raise SchemaError(f"column {name!r} is not nullable, so it has no default; drop it "
                          f"from defaults")
    return Feature(name, path, "fixed", dtype, enc, _type_name(dt), shape=shape or (),
                   nullable=nullable, default=default)


def _scalar(dt: T.DataType, name: str, whole: T.DataType) -> tuple[str, str]:
    hit = _SCALARS.get(type(dt))
    if hit is None:
        tname = _type_name(whole)
        advice = _ADVICE.get(tname.split("<")[0].split("(")[0], _ADVICE_GENERIC)
        raise SchemaError(f"column {name!r} has type {tname}, which tfspark cannot store in a "
                          f"tf.train.Example: {advice}")
    return hit


_ADVICE_GENERIC = ("cast it to a supported type (numeric, string, binary, date, timestamp) or "
                   "drop it")


def _is_vector(dt: T.DataType) -> bool:
    # ml and mllib VectorUDT; imported by name so pyspark.ml is not needed here.
    return isinstance(dt, T.UserDefinedType) and type(dt).__name__ == "VectorUDT"


def _type_name(dt: T.DataType) -> str:
    return "vector" if _is_vector(dt) else dt.simpleString()


def _shape_of(name: str, value: Any) -> tuple[int, ...]:
    try:
        return tuple(operator.index(n) for n in value)
    except TypeError:
        raise SchemaError(f"shape for {name!r} must be a list of ints like [n], got "
                          f"{value!r}") from None


def fits_float32(value: float) -> bool:
    """NaN, +-inf, or a finite number within float32 range (a default must not overflow)."""
    try:
        x = float(value)
    except OverflowError:
        return False
    return not math.isfinite(x) or abs(x) <= F32_MAX


def _check_default(name: str, dtype: str, value: Any) -> Any:
    ok = {
        "int64": isinstance(value, int) and not isinstance(value, bool)
        and -(2**63) <= value < 2**63,
        "float32": isinstance(value, (int, float)) and not isinstance(value, bool)
        and fits_float32(value),
        "string": isinstance(value, str),
    }[dtype]
    if not ok:
        want = {"int64": "an int in int64 range", "string": "a str",
                "float32": "a number within float32 range (|x| <= 3.4e38), NaN or inf"}[dtype]
        raise SchemaError(f"default for {name!r} must be a {dtype} value ({want}), got "
                          f"{type(value).__name__} {value!r}")
    return float(value) if dtype == "float32" else value


def _check_labels(features: Iterable[Feature], label_cols: Iterable[str]) -> set[str]:
    if isinstance(label_cols, str):
        label_cols = [label_cols]
    names = {f.name for f in features}
    wanted = list(label_cols)
    missing = [c for c in wanted if c not in names]
    if missing:
        raise SchemaError(f"label column(s) {missing} not found; columns are {sorted(names)}")
    return set(wanted)


def _check_unique_keys(features: Iterable[Feature]) -> None:
    seen: dict[str, str] = {}
    for f in features:
        for key in f.keys:
            if key in seen:
                raise SchemaError(f"features {seen[key]!r} and {f.name!r} both map to Example "
                                  f"key {key!r}; rename one of the columns")
            seen[key] = f.name


def _tf_default(f: Feature) -> Any:
    if f.dtype == "float32":
        import numpy as np

        # Not a Python float: TF caches eager constants of Python scalars by value, and
        # -0.0 == 0.0, so a -0.0 default could come back as 0.0 (or 0.0 as -0.0).
        return np.float32(f.default)
    return f.default.encode() if f.dtype == "string" else f.default


def _json_float(x: float) -> float | str:
    # JSON has no NaN/Infinity; keep them as strings so the round trip is lossless.
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x
