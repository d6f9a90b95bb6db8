"""Spark schema -> FeatureSpec: the one place that reads Spark types.

Spark types are read by their `typeName()` and `simpleString()`, so this module imports no
pyspark: the schema object a caller passes is all it needs. The type mapping is the table
`SCALARS` below; everything not in it is refused with a SchemaError naming the column.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tfspark.errors import SchemaError
from tfspark.spec.kinds import DECIMAL_AS, RECORD_TYPES, TYPE_DEFAULTS, fits_float32
from tfspark.spec.model import Feature, FeatureSpec, check_labels

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

# Spark type name -> (encoding, stored dtype); see kinds.Encoding for what each encoding does.
SCALARS: dict[str, tuple[str, str]] = {
    "boolean": ("bool", "int64"),
    "byte": ("int", "int64"),
    "short": ("int", "int64"),
    "integer": ("int", "int64"),
    "long": ("int", "int64"),
    "float": ("float", "float32"),
    "double": ("float", "float32"),
    "decimal": ("decimal", "float32"),
    "string": ("bytes", "string"),
    "char": ("bytes", "string"),
    "varchar": ("bytes", "string"),
    "binary": ("bytes", "string"),
    "date": ("date", "int64"),
    "timestamp": ("timestamp", "int64"),
    "timestamp_ntz": ("timestamp", "int64"),
}

# What to tell the user for types we refuse, by Spark type name.
_ADVICE = {
    "map": "convert it with to_json(col) or split it into map_keys/map_values array columns",
    "struct": "select the fields you need; arrays of structs are not supported",
    "array": "only 1-D arrays and 2-D arrays (arrays of arrays) of scalars are supported",
    "void": "cast the column to a concrete type, e.g. col.cast('string')",
}
_ADVICE_GENERIC = ("cast it to a supported type (numeric, string, binary, date, timestamp) or "
                   "drop it")


def infer_spec(schema: StructType, label_cols: Iterable[str] = (),
               shapes: Mapping[str, Iterable[int]] | None = None,
               defaults: Mapping[str, Any] | None = None,
               decimal_as: str = "float32", record_type: str = "Example") -> FeatureSpec:
    """The FeatureSpec of a Spark schema (df.schema) or an Arrow schema.

    Arrow types are read as the Spark types of the same columns (a pyarrow Table's schema, or
    a pandas DataFrame's through pyarrow); a fixed-size list is a fixed-length array. Feature
    names are column paths joined by "." (struct fields are flattened).

    Args:
        schema: a pyspark StructType or a pyarrow Schema.
        label_cols: the columns marked as labels.
        shapes: {feature name: [n]} makes an array or vector column FixedLen([n]).
        defaults: {feature name: value} overrides the fill value of a nullable column.
        decimal_as: "float32" (decimals stored as float32, refused at write time when a value
            would not come back exactly) or "string" (their exact text, a tf.string; Spark
            reads them back as decimals).
        record_type: "Example", or "SequenceExample", where every array<array<T>> column
            becomes a feature list (one Feature per step) and every other column a context
            feature, as the JVM connectors do.

    Returns:
        The FeatureSpec: each feature's name, kind (fixed, varlen, ...), dtype and default.

    Raises:
        SchemaError: a column type tfspark cannot store, an unknown label, shape or default
            column, or a bad shape or default.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> schema = pa.schema({"tags": pa.list_(pa.string()), "y": pa.int32()})
        >>> [(f.name, f.kind, f.dtype) for f in tfspark.infer_spec(schema, ["y"]).features]
        [('tags', 'varlen', 'string'), ('y', 'fixed', 'int64')]
    """
    if type(schema).__module__.startswith("pyarrow") and type(schema).__name__ == "Schema":
        from tfspark.spec.from_arrow import fixed_lengths, spark_schema

        shapes = {**fixed_lengths(schema), **dict(shapes or {})}
        schema = spark_schema(schema)  # type: ignore[assignment]
    if _type(schema) != "struct" or not hasattr(schema, "fields"):
        raise SchemaError(f"infer_spec needs a pyspark StructType (df.schema) or a pyarrow "
                          f"Schema, got {type(schema).__name__}")
    if decimal_as not in DECIMAL_AS:
        raise SchemaError(f"decimal_as={decimal_as!r} is not valid; use one of {list(DECIMAL_AS)}")
    if record_type not in RECORD_TYPES:
        raise SchemaError(f"record_type={record_type!r} is not valid; use one of "
                          f"{list(RECORD_TYPES)}")
    fixed = {k: _shape_of(k, v) for k, v in (shapes or {}).items()}
    defaults = dict(defaults or {})
    scalars = {**SCALARS, "decimal": ("decimal_string", "string")} if decimal_as == "string" \
        else SCALARS
    features: list[Feature] = []
    for sf in schema.fields:
        features.extend(_features_of(sf.dataType, (sf.name,), sf.nullable, shapes=fixed,
                                     defaults=defaults, scalars=scalars,
                                     steps=record_type == "SequenceExample"))
    names = {f.name for f in features}
    given_names: tuple[tuple[str, Mapping[str, Any]], ...] = (("shapes", fixed),
                                                              ("defaults", defaults))
    for what, given in given_names:
        unknown = sorted(set(given) - names)
        if unknown:
            raise SchemaError(f"{what} names unknown feature(s) {unknown}; features are "
                              f"{sorted(names)}")
    labels = check_labels(features, label_cols)
    features = [replace(f, label=f.name in labels) for f in features]
    features.sort(key=lambda f: f.keys[0])
    return FeatureSpec(tuple(features), source_schema=schema.jsonValue(),
                       record_type=record_type)


def _type(dt: Any) -> str:
    name = getattr(dt, "typeName", None)
    return name() if callable(name) else ""


def is_vector(dt: Any) -> bool:
    """Whether a Spark type is an ml/mllib VectorUDT (matched by name: no pyspark.ml needed)."""
    return type(dt).__name__ == "VectorUDT"


def _features_of(dt: DataType, path: tuple[str, ...], nullable: bool, *,
                 shapes: Mapping[str, tuple[int, ...]], defaults: Mapping[str, Any],
                 scalars: Mapping[str, tuple[str, str]], steps: bool = False) -> list[Feature]:
    name = ".".join(path)
    if not path[-1]:
        raise SchemaError(f"a column or struct field has an empty name (path {list(path)}); "
                          f"an Example key cannot be empty: rename it with alias()")
    kind = _type(dt)
    if kind == "struct":
        out: list[Feature] = []
        for sf in dt.fields:  # type: ignore[attr-defined]
            # A null struct makes every leaf absent, so leaves under a nullable struct are nullable.
            out.extend(_features_of(sf.dataType, path + (sf.name,), nullable or sf.nullable,
                                    shapes=shapes, defaults=defaults, scalars=scalars,
                                    steps=steps))
        if not out:
            raise SchemaError(f"column {name!r} is an empty struct; drop it")
        return out
    if is_vector(dt):
        return [_make(name, path, "vector", "float32", dt, nullable=nullable,
                      shape=shapes.get(name), defaults=defaults)]
    if kind == "array":
        inner = dt.elementType  # type: ignore[attr-defined]
        if _type(inner) == "array":
            enc, dtype = _scalar(inner.elementType, name, dt, scalars)
            what = "a feature list (one step per inner array)" if steps else "2-D ragged"
            if name in shapes:
                raise SchemaError(f"column {name!r} ({dt.simpleString()}) is {what}; a "
                                  f"fixed shape is only for 1-D arrays and vectors")
            if name in defaults:
                raise SchemaError(f"column {name!r} ({dt.simpleString()}) is {what}; a "
                                  f"null row parses as an empty one, so it takes no default")
            two_d = "sequence" if steps else "ragged"
            return [Feature(name, path, two_d, dtype, enc,  # type: ignore[arg-type]
                            dt.simpleString(), nullable=nullable)]
        enc, dtype = _scalar(inner, name, dt, scalars)
        return [_make(name, path, enc, dtype, dt, nullable=nullable, shape=shapes.get(name),
                      defaults=defaults)]
    enc, dtype = _scalar(dt, name, dt, scalars)
    if name in shapes:
        raise SchemaError(f"column {name!r} is a scalar ({dt.simpleString()}); shapes are "
                          f"only for array and vector columns")
    return [_make(name, path, enc, dtype, dt, nullable=nullable, shape=None, defaults=defaults)]


def _make(name: str, path: tuple[str, ...], enc: str, dtype: str, dt: DataType, *,
          nullable: bool, shape: tuple[int, ...] | None,
          defaults: Mapping[str, Any]) -> Feature:
    is_list = _type(dt) == "array" or enc == "vector"
    if is_list and shape is None:
        if name in defaults:
            raise SchemaError(f"column {name!r} is a variable-length array; a default is only "
                              f"used for fixed-length features (give shapes={{{name!r}: [n]}})")
        return Feature(name, path, "varlen", dtype, enc, type_name(dt),  # type: ignore[arg-type]
                       nullable=nullable)
    if shape is not None and (len(shape) != 1 or shape[0] < 0):
        raise SchemaError(f"shape for {name!r} must be [n] with n >= 0, got {list(shape)}")
    default = None
    if nullable:
        default = _check_default(name, dtype, defaults.get(name, TYPE_DEFAULTS[dtype]))
    elif name in defaults:
        raise SchemaError(f"column {name!r} is not nullable, so it has no default; drop it "
                          f"from defaults")
    return Feature(name, path, "fixed", dtype, enc, type_name(dt),  # type: ignore[arg-type]
                   shape=shape or (), nullable=nullable, default=default)


def _scalar(dt: DataType, name: str, whole: DataType,
            scalars: Mapping[str, tuple[str, str]]) -> tuple[str, str]:
    hit = scalars.get(_type(dt))
    if hit is None:
        tname = type_name(whole)
        advice = _ADVICE.get(tname.split("<")[0].split("(")[0], _ADVICE_GENERIC)
        raise SchemaError(f"column {name!r} has type {tname}, which tfspark cannot store in a "
                          f"tf.train.Example: {advice}")
    return hit


def type_name(dt: Any) -> str:
    """The source_type a spec records for a Spark type: its simpleString, "vector" for Vectors."""
    return "vector" if is_vector(dt) else dt.simpleString()


def _shape_of(name: str, value: Any) -> tuple[int, ...]:
    try:
        return tuple(operator.index(n) for n in value)
    except TypeError:
        raise SchemaError(f"shape for {name!r} must be a list of ints like [n], got "
                          f"{value!r}") from None


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
