"""Decoded canonical columns -> the Arrow types Spark expects for a schema.

The mirror of arrow.encode's conversions: arrow.encode turns booleans, dates, timestamps,
decimals and vectors into int64 / float32 / bytes; arrow.decode reads those back as canonical
columns (int64, float32, large_binary; lists; lists of lists); this module turns them into what the
target Spark type needs (`to_arrow_schema(schema, timezone="UTC")`, the exact types a Python
data source must yield):

    int64   -> tinyint/smallint/int/bigint (checked casts), boolean (!= 0), date (days),
               timestamp / timestamp_ntz (microseconds, UTC)
    float32 -> float, double (widened), decimal(p, s) (via float64, rounded to the scale)
    bytes   -> string (UTF-8 checked), binary
    list    -> array; list of lists -> array of arrays; float list -> ml Vector (dense:
               struct<type=1, size=null, indices=null, values>)
    features `a.b`, `a.c` -> struct `a`, null where all its leaves are absent

A user schema may ask for other types: any Arrow cast that succeeds is allowed, a scalar
feature read as an array gives one-element arrays, and a list read as a scalar must hold at
most one value per record. Columns with no feature come back null.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from tfspark.errors import SchemaError
from tfspark.spec import Feature, FeatureSpec
from tfspark.spec.from_spark import is_vector

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_VECTOR_FIELDS = ["type", "size", "indices", "values"]


def restore(batch: pa.RecordBatch, spec: FeatureSpec, schema: T.StructType,
            constants: Mapping[str, Any] | None = None) -> pa.RecordBatch:
    """A decode_records batch (one column per spec feature) as a batch of `schema`'s Arrow
    types; constants: {column: Python value} for partition columns."""
    cols = {f.path: batch.column(i) for i, f in enumerate(spec.features)}
    return Restorer(schema, constants or {}).restore(cols, batch.num_rows)


class Restorer:
    """Turns decoded feature columns back into the Arrow types of a Spark schema (narrow ints,
    dates, timestamps, structs, ...); partition columns come from `constants`.
    """

    def __init__(self, schema: T.StructType, constants: Mapping[str, Any]):
        from pyspark.sql.pandas.types import to_arrow_schema

        self.schema = schema
        self.target = to_arrow_schema(schema, timezone="UTC")
        self.constants = dict(constants)

    def restore(self, cols: Mapping[tuple[str, ...], pa.Array], n: int) -> pa.RecordBatch:
        """A batch of n rows in the schema's Arrow types, from {feature path: decoded column}."""
        out = []
        for sf, af in zip(self.schema.fields, self.target):
            if sf.name in self.constants:
                value = self.constants[sf.name]
                arr = (pa.nulls(n, af.type) if value is None
                       else pa.repeat(pa.scalar(value, af.type), n))
                arr = _fit(arr, af.type, sf.name)
            else:
                arr = _build(sf.dataType, af.type, (sf.name,), cols, n, sf.nullable)
            if not sf.nullable and arr.null_count:
                row = int(np.argmin(arr.is_valid().to_numpy(zero_copy_only=False)))
                raise SchemaError(f"column {sf.name!r} is not nullable in the schema but record "
                                  f"{row} of a batch has no value for it; read it with a "
                                  f"nullable schema (.schema(...))")
            out.append(arr)
        return pa.RecordBatch.from_arrays(out, schema=self.target)


def _build(dtype: T.DataType, target: pa.DataType, path: tuple[str, ...],
           cols: Mapping[tuple[str, ...], pa.Array], n: int, nullable: bool = True) -> pa.Array:
    """The column at `path` with exactly the Arrow type `target`. A struct is null where all
    its leaves are absent, unless it is not nullable: a null struct and one of null fields
    are stored alike, so only the schema tells them apart."""
    name = ".".join(path)
    if path in cols:
        return _fit(_convert(cols[path], dtype, name), target, name)
    if isinstance(dtype, T.StructType) and not is_vector(dtype):
        leaves = [a for p, a in cols.items() if p[:len(path)] == path]
        if leaves:
            children = [_build(f.dataType, target.field(i).type, path + (f.name,), cols, n,
                               f.nullable) for i, f in enumerate(dtype.fields)]
            if not nullable:
                return pa.StructArray.from_arrays(children, fields=list(target))
            valid = leaves[0].is_valid()
            for a in leaves[1:]:
                valid = pc.or_(valid, a.is_valid())
            # Built, not cast: a non-nullable field may hold nulls under a null struct.
            return pa.StructArray.from_arrays(children, fields=list(target),
                                              mask=pc.invert(valid))
    return pa.nulls(n, target)


def _convert(arr: pa.Array, dtype: T.DataType, name: str) -> pa.Array:
    if is_vector(dtype):
        return _vector(arr, name)
    if isinstance(dtype, T.ArrayType):
        if not _is_list(arr.type):
            arr = _wrap(arr)
        return _relist(arr, _convert(arr.values, dtype.elementType, name))
    if _is_list(arr.type):
        arr = _unwrap(arr, dtype, name)
    return _leaf(arr, dtype, name)


def _leaf(arr: pa.Array, dtype: T.DataType, name: str) -> pa.Array:
    t = arr.type
    try:
        if isinstance(dtype, T.BooleanType) and pa.types.is_integer(t):
            return pc.not_equal(arr, 0)
        if isinstance(dtype, T.DateType) and pa.types.is_integer(t):
            return arr.cast(pa.int32()).view(pa.date32())
        if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)) and pa.types.is_integer(t):
            return arr.cast(pa.int64()).view(_arrow(dtype))
        if isinstance(dtype, T.DecimalType) and pa.types.is_floating(t):
            return arr.cast(pa.float64()).cast(_arrow(dtype))
        if isinstance(dtype, T.DecimalType) and (pa.types.is_binary(t) or
                                                 pa.types.is_large_binary(t)):
            return arr.cast(pa.large_string()).cast(_arrow(dtype))  # decimal_as="string"
        return arr.cast(_arrow(dtype))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        hint = ("read it as binary" if isinstance(dtype, T.StringType) and "UTF8" in str(e)
                else "give the column a type that fits its stored values")
        raise SchemaError(f"column {name!r}: cannot read its stored {t} values as "
                          f"{dtype.simpleString()} ({e}); {hint}") from None


def _vector(arr: pa.Array, name: str) -> pa.Array:
    if not _is_list(arr.type):
        raise SchemaError(f"column {name!r} is an ml Vector but its feature holds {arr.type}, "
                          f"not a list of floats")
    n = len(arr)
    values = _relist(arr, arr.values.cast(pa.float64()))
    parts = [pa.array(np.ones(n, np.int8)), pa.nulls(n, pa.int32()),
             pa.nulls(n, pa.list_(pa.int32())), values]
    mask = pc.invert(arr.is_valid()) if arr.null_count else None
    return pa.StructArray.from_arrays(parts, names=_VECTOR_FIELDS, mask=mask)


def _wrap(arr: pa.Array) -> pa.Array:
    """Scalars -> one-element lists (nulls stay null)."""
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(arr) + 1, np.int32)
    np.cumsum(valid, out=offsets[1:])
    mask = pa.array(~valid) if arr.null_count else None
    return pa.ListArray.from_arrays(pa.array(offsets), arr.drop_null(), mask=mask)


def _unwrap(arr: pa.Array, dtype: T.DataType, name: str) -> pa.Array:
    """Lists of at most one value -> scalars (empty or null lists -> null)."""
    offsets = arr.offsets.to_numpy()
    lengths = np.diff(offsets)
    if (lengths > 1).any():
        raise SchemaError(f"column {name!r} is {dtype.simpleString()} in the schema but its "
                          f"feature holds up to {int(lengths.max())} values per record; read it "
                          f"as an array")
    take = (lengths == 1) & arr.is_valid().to_numpy(zero_copy_only=False)
    return arr.values.take(pa.array(offsets[:-1], mask=~take))


def _relist(like: pa.Array, values: pa.Array) -> pa.Array:
    mask = pc.invert(like.is_valid()) if like.null_count else None
    cls = pa.LargeListArray if pa.types.is_large_list(like.type) else pa.ListArray
    return cls.from_arrays(like.offsets, values, mask=mask)


def _fit(arr: pa.Array, target: pa.DataType, name: str) -> pa.Array:
    if arr.type.equals(target):
        return arr
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"column {name!r}: cannot give its values ({arr.type}) the schema's "
                          f"type {target} ({e})") from None


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _arrow(dtype: T.DataType) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(dtype, timezone="UTC")


# ---------------------------------------------------------------- partition values, types

def partition_value(text: Any, dtype: T.DataType, name: str) -> Any:
    """A partition directory's value (a string in the manifest) as a Python value of dtype."""
    if text is None:
        return None
    if isinstance(text, bool):
        text = "true" if text else "false"
    text = str(text)
    try:
        if isinstance(dtype, T.BooleanType):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if isinstance(dtype, _INTEGRAL):
            return int(text)
        if isinstance(dtype, T.DateType):
            return dt.date.fromisoformat(text)
        if isinstance(dtype, T.StringType):
            return text
        return pa.scalar(text).cast(_arrow(dtype)).as_py()
    except (ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise SchemaError(f"partition column {name!r}: value {text!r} is not a "
                          f"{dtype.simpleString()}; read the column as a string") from None


_SIMPLE = {"boolean": T.BooleanType(), "tinyint": T.ByteType(), "smallint": T.ShortType(),
           "int": T.IntegerType(), "bigint": T.LongType(), "float": T.FloatType(),
           "double": T.DoubleType(), "string": T.StringType(), "binary": T.BinaryType(),
           "date": T.DateType(), "timestamp": T.TimestampType(),
           "timestamp_ntz": T.TimestampNTZType()}
_BY_DTYPE = {"int64": T.LongType(), "float32": T.FloatType(), "string": T.StringType()}


def spark_type_of(f: Feature) -> T.DataType:
    """A feature's Spark type from its source_type (for specs without a source schema)."""
    return _parse(f.source_type, f)


def _parse(text: str, f: Feature) -> T.DataType:
    if text.startswith("array<") and text.endswith(">"):
        return T.ArrayType(_parse(text[len("array<"):-1], f))
    if text == "vector":
        from pyspark.ml.linalg import VectorUDT

        return VectorUDT()
    m = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", text)
    if m:
        return T.DecimalType(int(m.group(1)), int(m.group(2)))
    if text.startswith(("char(", "varchar(")):
        return T.StringType()
    return _SIMPLE.get(text, _BY_DTYPE[f.dtype])
