"""Arrow schema -> the Spark types the same columns have in Spark, so that one mapping (Spark's
types -> features, spec.from_spark) serves data sets written with Spark and without it.

Arrow types are read as Spark reads them from Arrow (pandas and Arrow frames given to
`spark.createDataFrame`): int8/16/32/64 -> byte/short/integer/long, unsigned ints one size up
(uint64 as long: a value beyond int64 is refused when written), float16/32 -> float, float64
-> double, decimal -> decimal(p, s), strings -> string, binaries -> binary, date32/64 -> date,
timestamps with a time zone -> timestamp, without -> timestamp_ntz, lists (also large and
fixed-size ones) -> array, structs -> struct, dictionaries -> their values' type. A
fixed-size list of n values is an array of fixed length n. The spec keeps these Spark types as
its source types, so `spark.read.format("tfrecord")` restores them, and the data set reads as
if Spark had written it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from tfspark.errors import SchemaError

_INTS = {8: ("byte", "tinyint"), 16: ("short", "smallint"), 32: ("integer", "int"),
         64: ("long", "bigint")}
_ADVICE = ("cast it to a supported type (numbers, strings, binary, date, timestamp, lists and "
           "structs of them), or leave it out")


class SparkType:
    """A Spark data type as from_spark reads one: typeName(), simpleString(), jsonValue(), and
    `fields` (struct) or `elementType` (array)."""

    def __init__(self, name: str, simple: str | None = None, json: Any = None,
                 fields: list[SparkField] | None = None, element: SparkType | None = None,
                 contains_null: bool = True):
        self._name, self._simple, self._json = name, simple or name, json
        self.fields = fields or []
        self.elementType = element
        self.containsNull = contains_null

    def typeName(self) -> str:  # noqa: N802 - Spark's name
        """Spark's name of the type ("long", "array", "struct", ...)."""
        return self._name

    def simpleString(self) -> str:  # noqa: N802 - Spark's name
        """The type as Spark writes it in a schema ("bigint", "array<int>", ...)."""
        if self._name == "array":
            assert self.elementType is not None
            return f"array<{self.elementType.simpleString()}>"
        if self._name == "struct":
            return "struct<" + ",".join(f"{f.name}:{f.dataType.simpleString()}"
                                        for f in self.fields) + ">"
        return self._simple

    def jsonValue(self) -> Any:  # noqa: N802 - Spark's name
        """The type in Spark's JSON form of a schema."""
        if self._name == "array":
            assert self.elementType is not None
            return {"type": "array", "elementType": self.elementType.jsonValue(),
                    "containsNull": self.containsNull}
        if self._name == "struct":
            return {"type": "struct", "fields": [f.jsonValue() for f in self.fields]}
        return self._json if self._json is not None else self._name

    @property
    def names(self) -> list[str]:
        """The field names of a struct (as StructType.names)."""
        return [f.name for f in self.fields]


class SparkField:
    """A struct's field as from_spark reads one: name, dataType, nullable."""

    def __init__(self, name: str, data_type: SparkType, nullable: bool):
        self.name, self.dataType, self.nullable = name, data_type, nullable

    def jsonValue(self) -> dict[str, Any]:  # noqa: N802 - Spark's name
        """The field in Spark's JSON form of a schema."""
        return {"name": self.name, "type": self.dataType.jsonValue(),
                "nullable": self.nullable, "metadata": {}}


def spark_schema(schema: pa.Schema) -> SparkType:
    """The Spark struct type of an Arrow schema's columns. SchemaError names a column whose
    type has no Spark equivalent tfspark stores."""
    return SparkType("struct", fields=[_field(f, (f.name,)) for f in schema])


def fixed_lengths(schema: pa.Schema) -> dict[str, list[int]]:
    """{feature: [n]} of the fixed-size list columns (struct fields as "parent.child")."""
    found: dict[str, list[int]] = {}

    def walk(fields: Iterable[pa.Field], path: tuple[str, ...]) -> None:
        for f in fields:
            t = f.type
            if pa.types.is_dictionary(t):
                t = t.value_type
            if pa.types.is_struct(t):
                walk(list(t), path + (f.name,))
            elif pa.types.is_fixed_size_list(t) and not _is_list(t.value_type):
                found[".".join(path + (f.name,))] = [t.list_size]

    walk(schema, ())
    return found


def _field(f: pa.Field, path: tuple[str, ...]) -> SparkField:
    return SparkField(f.name, _type(f.type, path), f.nullable)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
        or getattr(pa.types, "is_list_view", lambda _: False)(t) \
        or getattr(pa.types, "is_large_list_view", lambda _: False)(t)


def _type(t: pa.DataType, path: tuple[str, ...]) -> SparkType:
    name = ".".join(path)
    if pa.types.is_dictionary(t):
        return _type(t.value_type, path)
    if pa.types.is_boolean(t):
        return SparkType("boolean")
    if pa.types.is_integer(t):
        bits = t.bit_width * (2 if pa.types.is_unsigned_integer(t) and t.bit_width < 64 else 1)
        type_name, simple = _INTS[bits]
        return SparkType(type_name, simple)
    if pa.types.is_floating(t):
        return SparkType("double") if t.bit_width == 64 else SparkType("float")
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaError(f"column {name!r} has type {t}, wider than Spark's decimals "
                              f"(precision 38 at most): cast it to decimal128(38, s), double or "
                              f"string")
        text = f"decimal({t.precision},{t.scale})"
        return SparkType("decimal", text, text)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or \
            getattr(pa.types, "is_string_view", lambda _: False)(t):
        return SparkType("string")
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or \
            pa.types.is_fixed_size_binary(t) or \
            getattr(pa.types, "is_binary_view", lambda _: False)(t):
        return SparkType("binary")
    if pa.types.is_date(t):
        return SparkType("date")
    if pa.types.is_timestamp(t):
        return SparkType("timestamp") if t.tz else SparkType("timestamp_ntz")
    if _is_list(t):
        element = t.value_field
        return SparkType("array", element=_type(element.type, path),
                         contains_null=element.nullable)
    if pa.types.is_struct(t):
        return SparkType("struct", fields=[_field(f, path + (f.name,)) for f in t])
    if pa.types.is_null(t):
        raise SchemaError(f"column {name!r} has Arrow type null (every value missing, no "
                          f"type): cast it to a concrete type, or leave it out")
    if pa.types.is_map(t):
        raise SchemaError(f"column {name!r} has type {t}, which tfspark cannot store in a "
                          f"tf.train.Example: split it into a list of keys and a list of "
                          f"values, or leave it out")
    raise SchemaError(f"column {name!r} has Arrow type {t}, which tfspark cannot store in a "
                      f"tf.train.Example: {_ADVICE}")
