"""decode.py against encode.py: what encode_batch writes, decode_with_spec gives back.

No Spark session and no TensorFlow: the schemas are pyspark type objects, the data Arrow.
"""

from __future__ import annotations

import math
import struct
from datetime import date, datetime, timezone

import numpy as np
import pyarrow as pa
import pytest
from protobytes import entry, example, ld, varint
from pyspark.sql import types as T

from tfspark import encode_batch, infer_spec
from tfspark.errors import CorruptRecordError
from tfspark.wire.example_py import decode_example, decode_with_spec

F32 = np.float32


def _round_trip(schema: T.StructType, arrow: pa.Table, **spec_kw) -> list[dict]:
    spec = infer_spec(schema, **spec_kw)
    return [decode_with_spec(r, spec, fill_defaults=False) for r in encode_batch(arrow, spec)]


def _column(name, spark_type, arrow_type, values, nullable=True):
    schema = T.StructType([T.StructField(name, spark_type, nullable)])
    table = pa.table({name: pa.array(values, type=arrow_type)})
    return [row[name] for row in _round_trip(schema, table)]


# Spark type, Arrow type, values in, values expected out (None = null = absent feature).
CASES = {
    "long": (T.LongType(), pa.int64(), [0, -1, 2**63 - 1, -(2**63), None],
             [0, -1, 2**63 - 1, -(2**63), None]),
    "int": (T.IntegerType(), pa.int32(), [5, -300, None], [5, -300, None]),
    "bool": (T.BooleanType(), pa.bool_(), [True, False, None], [True, False, None]),
    "double": (T.DoubleType(), pa.float64(), [1.5, -0.1, 1e30, None],
               [1.5, float(F32(-0.1)), float(F32(1e30)), None]),
    "string": (T.StringType(), pa.string(), ["a", "", "héllo", None], ["a", "", "héllo", None]),
    "binary": (T.BinaryType(), pa.binary(), [b"\x00\xff", b"", None], [b"\x00\xff", b"", None]),
    "date": (T.DateType(), pa.date32(), [date(1970, 1, 2), date(1969, 12, 31), None],
             [1, -1, None]),
    "timestamp": (T.TimestampType(), pa.timestamp("us", tz="UTC"),
                  [datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc), None], [1_000_000, None]),
    "array<int>": (T.ArrayType(T.IntegerType()), pa.list_(pa.int32()),
                   [[1, -2, 3], [], None, [-(2**31)]], [[1, -2, 3], [], None, [-(2**31)]]),
    "array<string>": (T.ArrayType(T.StringType()), pa.list_(pa.string()),
                      [["x", ""], [], None], [["x", ""], [], None]),
    "array<array<long>>": (T.ArrayType(T.ArrayType(T.LongType())), pa.list_(pa.list_(pa.int64())),
                           [[[1, 2], [], [-3]], [], None, [[]]],
                           [[[1, 2], [], [-3]], [], None, [[]]]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip(case):
    spark_type, arrow_type, values, expected = CASES[case]
    assert _column("c", spark_type, arrow_type, values) == expected


def test_float_specials():
    out = _column("f", T.FloatType(), pa.float32(), [math.nan, math.inf, -math.inf, -0.0])
    assert math.isnan(out[0]) and out[1:3] == [math.inf, -math.inf]
    assert math.copysign(1.0, out[3]) == -1.0


def test_several_columns_nulls_and_defaults():
    schema = T.StructType([
        T.StructField("id", T.LongType(), False),
        T.StructField("age", T.IntegerType(), True),
        T.StructField("emb", T.ArrayType(T.FloatType()), True),
        T.StructField("name", T.StringType(), True),
        T.StructField("y", T.IntegerType(), False),
    ])
    table = pa.table({
        "id": pa.array([1, 2], pa.int64()),
        "age": pa.array([30, None], pa.int32()),
        "emb": pa.array([[0.5, 1.0], None], pa.list_(pa.float32())),
        "name": pa.array([None, "bo"], pa.string()),
        "y": pa.array([1, 0], pa.int32()),
    })
    spec = infer_spec(schema, label_cols=["y"], shapes={"emb": [2]}, defaults={"age": -1})
    records = encode_batch(table, spec)
    first = decode_with_spec(records[0], spec)
    second = decode_with_spec(records[1], spec)
    assert first == {"age": 30, "emb": [0.5, 1.0], "id": 1, "name": "", "y": 1}
    # Absent nullable fixed features get the spec's defaults, as tf.io.parse_example fills in.
    assert second == {"age": -1, "emb": [0.0, 0.0], "id": 2, "name": "bo", "y": 0}
    assert decode_with_spec(records[1], spec, fill_defaults=False)["age"] is None
    assert list(first) == spec.names


def test_decode_example_raw_keys():
    schema = T.StructType([T.StructField("h", T.ArrayType(T.ArrayType(T.IntegerType())))])
    table = pa.table({"h": pa.array([[[7], [8, 9]]], pa.list_(pa.list_(pa.int32())))})
    (record,) = encode_batch(table, infer_spec(schema))
    assert decode_example(record) == {"h/values": [7, 8, 9], "h/row_lengths": [1, 2]}


def example_of(key: bytes, feature: bytes) -> bytes:
    return example(entry(key, feature))


def test_unpacked_lists_and_unknown_fields():
    ints = ld(3, b"\x08" + varint(5) + b"\x08" + varint(-2))  # unpacked int64
    floats = ld(2, b"\x0d" + struct.pack("<f", 2.5) + b"\x0d" + struct.pack("<f", -1.0))
    unknown = varint(9 << 3 | 0) + varint(123)  # field 9 varint, skipped
    record = example_of(b"i", ints) + unknown
    assert decode_example(record) == {"i": [5, -2]}
    assert decode_example(example_of(b"f", floats)) == {"f": [2.5, -1.0]}
    assert decode_example(b"") == {}


@pytest.mark.parametrize("data, where", [
    (b"\x0a\x05\x0a\x03", 0),  # length runs past the end
    (b"\x0a", 1),  # truncated length varint
    (b"\x0b", 0),  # wire type 3 (start group)
    (b"\x0a\x03\x0a\x05\x00", 2),  # nested length runs past its parent
    (b"\x00\x00", 0),  # field number 0
])
def test_malformed_bytes(data, where):
    with pytest.raises(CorruptRecordError, match=f"byte {where}") as info:
        decode_example(data)
    assert info.value.offset == where


def test_wrong_count_for_fixed_shape():
    schema = T.StructType([T.StructField("x", T.LongType(), False)])
    spec = infer_spec(schema)
    record = example_of(b"x", ld(3, ld(1, varint(1) + varint(2))))
    with pytest.raises(CorruptRecordError, match="'x' has 2 values"):
        decode_with_spec(record, spec)


def test_bad_ragged_lengths():
    schema = T.StructType([T.StructField("h", T.ArrayType(T.ArrayType(T.LongType())))])
    spec = infer_spec(schema)
    feats = (ld(1, ld(1, b"h/row_lengths") + ld(2, ld(3, ld(1, varint(3)))))
             + ld(1, ld(1, b"h/values") + ld(2, ld(3, ld(1, varint(1))))))
    with pytest.raises(CorruptRecordError, match="'h'"):
        decode_with_spec(ld(1, feats), spec)
