"""Round trips through real files, with TensorFlow as the oracle (TFDS FeatureExpectationItem).

Each Case is one column: a Spark type, one Python value per row (None for null), options, and
either the tensor TensorFlow must parse back or the error (class + message regex) tfspark must
raise. The harness builds the schema, the Arrow batch exactly as Spark sends it, infers the spec,
encodes framed records, writes them with RecordWriter, reads them with tf.data.TFRecordDataset
and parses them with tf.io.parse_example(tfspark.tf.parsing_spec(spec)).
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.ml.linalg import DenseVector, SparseVector, Vectors, VectorUDT
from pyspark.sql import types as T

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

import tfspark  # noqa: E402
from tfspark import encode_batch, infer_spec  # noqa: E402
from tfspark.arrow.encode import encode_records  # noqa: E402
from tfspark.errors import EncodeError, SchemaError  # noqa: E402
from tfspark.spec import FeatureSpec  # noqa: E402
from tfspark.store.integrity import verify  # noqa: E402
from tfspark.wire.stream import RecordWriter  # noqa: E402

pytestmark = pytest.mark.tf

UTC = dt.timezone.utc
F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.float32(1e-45))  # the smallest float32 subnormal


# ---------------------------------------------------------------- Spark type -> Arrow type

_ARROW_SCALARS = {
    T.BooleanType: pa.bool_(), T.ByteType: pa.int8(), T.ShortType: pa.int16(),
    T.IntegerType: pa.int32(), T.LongType: pa.int64(), T.FloatType: pa.float32(),
    T.DoubleType: pa.float64(), T.StringType: pa.string(), T.CharType: pa.string(),
    T.VarcharType: pa.string(), T.BinaryType: pa.binary(), T.DateType: pa.date32(),
    T.TimestampType: pa.timestamp("us", tz="UTC"), T.TimestampNTZType: pa.timestamp("us"),
}
VECTOR_ARROW = pa.struct([
    pa.field("type", pa.int8(), nullable=False), pa.field("size", pa.int32()),
    pa.field("indices", pa.list_(pa.field("element", pa.int32(), nullable=False))),
    pa.field("values", pa.list_(pa.field("element", pa.float64(), nullable=False))),
])


def arrow_type(t: T.DataType) -> pa.DataType:
    """The Arrow type Spark's Arrow conversion sends for a Spark type (session TZ = UTC)."""
    if isinstance(t, VectorUDT):
        return VECTOR_ARROW
    if isinstance(t, T.DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, T.ArrayType):
        return pa.list_(pa.field("element", arrow_type(t.elementType), t.containsNull))
    if isinstance(t, T.StructType):
        return pa.struct([pa.field(f.name, arrow_type(f.dataType), f.nullable) for f in t.fields])
    return _ARROW_SCALARS[type(t)]


def arrow_value(t: T.DataType, v: Any) -> Any:
    """A Python value as pa.array takes it for Spark type t (ml Vectors -> their struct)."""
    if v is None:
        return None
    if isinstance(t, VectorUDT):
        return dict(zip([f.name for f in VECTOR_ARROW], t.serialize(v)))
    if isinstance(t, T.StructType):
        return {f.name: arrow_value(f.dataType, v[f.name]) for f in t.fields}
    if isinstance(t, T.ArrayType):
        return [arrow_value(t.elementType, x) for x in v]
    return v


def arrow_values(t: T.DataType, values: list) -> list:
    return [arrow_value(t, v) for v in values]


# ---------------------------------------------------------------- the harness

@dataclass(frozen=True)
class Case:
    id: str
    spark_type: T.DataType
    values: list
    # What parse_example returns for column "c" (or {feature name: value} for several):
    # a list per row; fixed features as nested lists, varlen/ragged as lists of row lists.
    expected: Any = None
    error: type[Exception] | None = None
    match: str | None = None
    nullable: bool = True
    shapes: dict | None = None
    defaults: dict | None = None
    null_elements: str = "error"
    arrow: pa.DataType | None = None  # the Arrow type to send, when not Spark's own
    mutate: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None
    check: Callable[[dict], None] | None = None  # extra assertions on the parsed tensors
    dtype: str | None = None  # expected spec dtype of "c"
    kw: dict = field(default_factory=dict)


def case_batch(case: Case) -> tuple[pa.RecordBatch, FeatureSpec]:
    """The case's column as Spark sends it, and the spec inferred for it."""
    schema = T.StructType([T.StructField("c", case.spark_type, case.nullable)])
    spec = infer_spec(schema, shapes=case.shapes, defaults=case.defaults, **case.kw)
    values = case.values if case.arrow else arrow_values(case.spark_type, case.values)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(values, type=case.arrow or arrow_type(case.spark_type))], names=["c"])
    return (case.mutate(batch) if case.mutate is not None else batch), spec


def run_case(case: Case, path: str) -> dict:
    batch, spec = case_batch(case)
    buf, offsets = encode_records(batch, spec, framed=True, null_elements=case.null_elements)
    assert offsets.shape == (batch.num_rows + 1,) and offsets[-1] == buf.size
    return parse_file(write_file(path, buf), spec, batch.num_rows)


def write_file(path: str, framed: np.ndarray, compression: str | None = None) -> str:
    with open(path, "wb") as fh, RecordWriter(fh, compression=compression) as w:
        w.write_framed(framed)
    return path


def parse_file(path: str, spec: FeatureSpec, n: int, compression: str | None = None) -> dict:
    ds = tf.data.TFRecordDataset(path, compression_type=compression or "").batch(n)
    serialized = ds.get_single_element()
    assert serialized.shape == (n,)
    return tf.io.parse_example(serialized, tfspark.tf.parsing_spec(spec))


def to_rows(t: Any, n: int) -> list:
    """A parsed tensor as Python lists, one item per row; SparseTensor -> per-row lists."""
    if isinstance(t, tf.SparseTensor):
        assert t.dense_shape.shape == (2,)
        rows: list[list] = [[] for _ in range(n)]
        for (r, c), v in zip(t.indices.numpy().tolist(), t.values.numpy().tolist()):
            assert c == len(rows[r])  # VarLen indices are [row, position], in order
            rows[r].append(v)
        return rows
    if isinstance(t, tf.RaggedTensor):
        return t.to_list()
    return t.numpy().tolist()


def same(got: Any, want: Any, where: str = "") -> None:
    """Deep equality with float32 semantics: NaN == NaN, and the sign of zero counts."""
    if isinstance(want, (list, tuple)):
        assert isinstance(got, list), f"{where}: got {got!r}, want a list {want!r}"
        assert len(got) == len(want), f"{where}: got {got!r}, want {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert isinstance(got, float), f"{where}: got {got!r}, want float {want!r}"
        w = float(np.float32(want))
        if math.isnan(w):
            assert math.isnan(got), f"{where}: got {got!r}, want NaN"
        else:
            assert got == w and math.copysign(1, got) == math.copysign(1, w), \
                f"{where}: got {got!r}, want {w!r} (float32 of {want!r})"
    else:
        assert type(got) is type(want) and got == want, f"{where}: got {got!r}, want {want!r}"


TF_DTYPES = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}


def days(d: dt.date) -> int:
    return (d - dt.date(1970, 1, 1)).days


def micros(t: dt.datetime) -> int:
    epoch = dt.datetime(1970, 1, 1, tzinfo=t.tzinfo)
    return (t - epoch) // dt.timedelta(microseconds=1)


def signbits(name: str, want: list[bool]) -> Callable[[dict], None]:
    def check(out: dict) -> None:
        assert np.signbit(out[name].numpy()).tolist() == want
    return check


I64 = 2**63
STRUCT = T.StructType([T.StructField("a", T.IntegerType(), False),
                       T.StructField("b", T.StringType()),
                       T.StructField("in", T.StructType([T.StructField("x", T.DoubleType())]))])
D_NEG = dt.date(1969, 12, 31)
TS_NEG = dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
TS_OLD = dt.datetime(1900, 1, 1, 12, 30, tzinfo=UTC)
TS_NOW = dt.datetime(2024, 2, 29, 1, 2, 3, 456789, tzinfo=UTC)


def _rename(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([batch.column(0)], names=["other"])


def _add_column(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.append_column("extra", pa.array(range(batch.num_rows), pa.int64()))


CASES = [
    # ---- integers, booleans
    Case("bool", T.BooleanType(), [True, False, None], [1, 0, 0], dtype="int64"),
    Case("bool default", T.BooleanType(), [None, True], [1, 1], defaults={"c": 1}),
    Case("byte extremes", T.ByteType(), [-128, 127, 0, None], [-128, 127, 0, 0]),
    Case("short extremes", T.ShortType(), [-32768, 32767, None], [-32768, 32767, 0]),
    Case("int extremes", T.IntegerType(), [-(2**31), 2**31 - 1, -1, None],
         [-(2**31), 2**31 - 1, -1, 0]),
    Case("long extremes", T.LongType(), [-I64, I64 - 1, 0, -1, 1, None],
         [-I64, I64 - 1, 0, -1, 1, 0]),
    Case("long custom default", T.LongType(), [None, 5, None], [-I64, 5, -I64],
         defaults={"c": -I64}),
    Case("long not nullable", T.LongType(), [3, 2**40], [3, 2**40], nullable=False),
    # ---- floats
    Case("float specials", T.FloatType(),
         [1.5, float("nan"), float("inf"), float("-inf"), -0.0, 0.0, F32_MAX, -F32_MAX,
          F32_TINY, None],
         [1.5, float("nan"), float("inf"), float("-inf"), -0.0, 0.0, F32_MAX, -F32_MAX,
          F32_TINY, 0.0],
         check=signbits("c", [False, False, False, True, True, False, False, True, False,
                              False]), dtype="float32"),
    Case("double rounds to float32", T.DoubleType(),
         [0.1, 1 / 3, 2.0**24 + 1, 1e-46, -1e-46, 1e38, -2.5, math.pi, None],
         [float(np.float32(0.1)), float(np.float32(1 / 3)), 2.0**24, 0.0, -0.0,
          float(np.float32(1e38)), -2.5, float(np.float32(math.pi)), 0.0],
         check=signbits("c", [False] * 4 + [True, False, True, False, False])),
    Case("double nan, inf, -0", T.DoubleType(), [float("nan"), -math.inf, -0.0, None],
         [float("nan"), -math.inf, -0.0, 0.0], check=signbits("c", [False, True, True, False])),
    Case("double custom NaN default", T.DoubleType(), [None, 1.0], [float("nan"), 1.0],
         defaults={"c": float("nan")}),
    Case("double custom -0.0 default", T.DoubleType(), [None], [-0.0],
         defaults={"c": -0.0}, check=signbits("c", [True])),
    Case("double custom -inf default", T.DoubleType(), [None, 2.0], [-math.inf, 2.0],
         defaults={"c": -math.inf}),
    # Decimals are float32 only when they come back exactly: else refused, or kept
    # exactly as text with decimal_as="string".
    Case("decimal", T.DecimalType(10, 2),
         [Decimal("1.50"), Decimal("-1234.99"), Decimal("0.00"), Decimal("0.01"), None],
         [1.5, float(np.float32(-1234.99)), 0.0, float(np.float32(0.01)), 0.0],
         dtype="float32"),
    Case("decimal beyond float32", T.DecimalType(10, 2),
         [Decimal("1.50"), Decimal("-12345678.99")], error=EncodeError,
         match=r"'c' value -12345678.99 at row 1 does not survive float32.*-12345679\.00.*"
               r"decimal_as='string'"),
    Case("decimal beyond float32 range of its precision", T.DecimalType(9, 0),
         [Decimal("999999999")], error=EncodeError, match=r"'c' value 999999999 at row 0.*"
                                                          r"1e\+09, beyond decimal\(9,0\)"),
    Case("decimal as text", T.DecimalType(10, 2),
         [Decimal("1.50"), Decimal("-12345678.99"), None],
         [b"1.50", b"-12345678.99", b""], dtype="string", kw={"decimal_as": "string"}),
    Case("decimal wide", T.DecimalType(38, 18), [Decimal("1E-18"), Decimal("-0.5"), None],
         [float(np.float32(1e-18)), -0.5, 0.0]),
    Case("decimal wide beyond float32", T.DecimalType(38, 18),
         [Decimal("1E-18"), Decimal("-12345678901234567890.123456789012345678")],
         error=EncodeError, match=r"'c' value -12345678901234567890.123456789012345678 at row 1"),
    Case("decimal default", T.DecimalType(5, 1), [None, Decimal("2.5")], [0.5, 2.5],
         defaults={"c": 0.5}),
    # ---- text and bytes
    Case("string", T.StringType(), ["", "abc", "é ü 漢字 🙂", "a\x00b", None],
         [b"", b"abc", "é ü 漢字 🙂".encode(), b"a\x00b", b""], dtype="string"),
    Case("string default", T.StringType(), [None, "x"], ["n/a é".encode(), b"x"],
         defaults={"c": "n/a é"}),
    Case("large_string from Arrow", T.StringType(), ["big", None], [b"big", b""],
         arrow=pa.large_string()),
    Case("char", T.CharType(3), ["ab ", None], [b"ab ", b""]),
    Case("varchar", T.VarcharType(5), ["abcde", ""], [b"abcde", b""]),
    Case("binary with NULs", T.BinaryType(),
         [b"\x00", b"\x00\xff\x00", b"", bytes(range(256)), None],
         [b"\x00", b"\x00\xff\x00", b"", bytes(range(256)), b""]),
    Case("long string", T.StringType(), ["x" * 70_000, "y"], [b"x" * 70_000, b"y"]),
    # ---- dates and timestamps
    Case("date", T.DateType(),
         [dt.date(1970, 1, 1), D_NEG, dt.date(1, 1, 1), dt.date(9999, 12, 31), None],
         [0, -1, days(dt.date(1, 1, 1)), days(dt.date(9999, 12, 31)), 0], dtype="int64"),
    Case("timestamp UTC", T.TimestampType(),
         [dt.datetime(1970, 1, 1, tzinfo=UTC), TS_NEG, TS_OLD, TS_NOW, None],
         [0, -1, micros(TS_OLD), micros(TS_NOW), 0]),
    Case("timestamp default", T.TimestampType(), [None, TS_NOW], [-1, micros(TS_NOW)],
         defaults={"c": -1}),
    Case("timestamp ntz", T.TimestampNTZType(),
         [dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(2000, 1, 1), None],
         [-1_000_000, 946_684_800_000_000, 0]),
    # ---- 1-D arrays
    Case("varlen int", T.ArrayType(T.IntegerType()), [[1, -2, 3], [], None, [2**31 - 1]],
         [[1, -2, 3], [], [], [2**31 - 1]]),
    Case("varlen long extremes", T.ArrayType(T.LongType()), [[-I64, I64 - 1], [0]],
         [[-I64, I64 - 1], [0]]),
    Case("varlen bool", T.ArrayType(T.BooleanType()), [[True, False], None], [[1, 0], []]),
    Case("varlen double", T.ArrayType(T.DoubleType()),
         [[0.1, float("nan"), -0.0], [], None, [math.inf]],
         [[float(np.float32(0.1)), float("nan"), -0.0], [], [], [math.inf]]),
    Case("varlen string", T.ArrayType(T.StringType()), [["", "é"], [], None, ["a\x00"]],
         [[b"", "é".encode()], [], [], [b"a\x00"]]),
    Case("varlen binary", T.ArrayType(T.BinaryType()), [[b"\x00"], [b"", b"\xff"]],
         [[b"\x00"], [b"", b"\xff"]]),
    Case("varlen date", T.ArrayType(T.DateType()), [[D_NEG, dt.date(1970, 1, 2)], None],
         [[-1, 1], []]),
    Case("varlen timestamp", T.ArrayType(T.TimestampType()), [[TS_NEG], []], [[-1], []]),
    Case("varlen decimal", T.ArrayType(T.DecimalType(4, 2)), [[Decimal("-0.25")], []],
         [[-0.25], []]),
    Case("all rows empty", T.ArrayType(T.LongType()), [[], None, []], [[], [], []]),
    Case("null element dropped", T.ArrayType(T.LongType()), [[1, None, 3], [None], None],
         [[1, 3], [], []], null_elements="drop"),
    Case("fixed array", T.ArrayType(T.DoubleType()), [[1.0, 2.0], None, [-0.0, math.nan]],
         [[1.0, 2.0], [0.0, 0.0], [-0.0, math.nan]], shapes={"c": [2]}),
    Case("fixed array default", T.ArrayType(T.LongType()), [None, [1, 2, 3]],
         [[-1, -1, -1], [1, 2, 3]], shapes={"c": [3]}, defaults={"c": -1}),
    Case("fixed string array", T.ArrayType(T.StringType()), [["a", "b"], None],
         [[b"a", b"b"], [b"?", b"?"]], shapes={"c": [2]}, defaults={"c": "?"}),
    Case("fixed array not nullable", T.ArrayType(T.IntegerType()), [[1], [2]], [[1], [2]],
         shapes={"c": [1]}, nullable=False),
    Case("fixed array of length 0", T.ArrayType(T.IntegerType()), [[], None, []],
         [[], [], []], shapes={"c": [0]}),
    Case("fixed array drops null elements", T.ArrayType(T.LongType()), [[1, None, 2]],
         [[1, 2]], shapes={"c": [2]}, null_elements="drop"),
    # ---- 2-D arrays
    Case("ragged int", T.ArrayType(T.ArrayType(T.IntegerType())),
         [[[1, 2], [], [3]], [], None, [[]], [[-1]]],
         [[[1, 2], [], [3]], [], [], [[]], [[-1]]]),
    Case("ragged string", T.ArrayType(T.ArrayType(T.StringType())),
         [[["a", ""], ["é"]], None], [[[b"a", b""], ["é".encode()]], []]),
    Case("ragged double", T.ArrayType(T.ArrayType(T.DoubleType())),
         [[[0.1], [math.nan, -0.0]], [[]]],
         [[[float(np.float32(0.1))], [math.nan, -0.0]], [[]]]),
    Case("ragged date", T.ArrayType(T.ArrayType(T.DateType())), [[[D_NEG]], None], [[[-1]], []]),
    Case("ragged drops nulls", T.ArrayType(T.ArrayType(T.LongType())),
         [[[1, None], None, [2]], None], [[[1], [2]], []], null_elements="drop"),
    # ---- vectors
    Case("dense and sparse vectors", VectorUDT(),
         [Vectors.dense([1.0, -0.0, 0.1]), Vectors.sparse(4, [1, 3], [5.0, -2.0]), None,
          Vectors.dense([]), Vectors.sparse(2, [], [])],
         [[1.0, -0.0, float(np.float32(0.1))], [0.0, 5.0, 0.0, -2.0], [], [], [0.0, 0.0]],
         dtype="float32"),
    Case("vector with a shape", VectorUDT(),
         [Vectors.dense([1.0, 2.0, 3.0]), None, Vectors.sparse(3, [0], [math.nan])],
         [[1.0, 2.0, 3.0], [0.5, 0.5, 0.5], [math.nan, 0.0, 0.0]],
         shapes={"c": [3]}, defaults={"c": 0.5}),
    # ---- structs
    Case("struct", STRUCT,
         [{"a": 1, "b": "x", "in": {"x": 0.5}}, None, {"a": 2, "b": None, "in": None},
          {"a": -3, "b": "é", "in": {"x": None}}],
         {"c.a": [1, 0, 2, -3], "c.b": [b"x", b"", b"", "é".encode()],
          "c.in.x": [0.5, 0.0, 0.0, 0.0]}),
    # ---- errors: the schema
    Case("map refused", T.MapType(T.StringType(), T.LongType()), [{"a": 1}],
         error=SchemaError, match=r"'c'.*map<string,bigint>"),
    Case("shape on ragged refused", T.ArrayType(T.ArrayType(T.LongType())), [[[1]]],
         shapes={"c": [1]}, error=SchemaError, match=r"'c'.*ragged"),
    # ---- errors: the data
    Case("null element", T.ArrayType(T.LongType()), [[1], [2], [3, None]],
         error=EncodeError, match=r"'c'.*null element.*row 2.*null_elements='drop'"),
    Case("null string element", T.ArrayType(T.StringType()), [None, ["a", None]],
         error=EncodeError, match=r"'c'.*null element.*row 1"),
    Case("null element in fixed array", T.ArrayType(T.LongType()), [[1, 2], [None, 2]],
         shapes={"c": [2]}, error=EncodeError, match=r"'c'.*row 1"),
    Case("null inner array", T.ArrayType(T.ArrayType(T.LongType())), [[[1]], [[2], None]],
         error=EncodeError, match=r"'c'.*null array.*row 1"),
    Case("null in an inner array", T.ArrayType(T.ArrayType(T.LongType())),
         [None, [[1]], [[2], [3, None]]], error=EncodeError, match=r"'c'.*null element.*row 2"),
    Case("wrong length for the shape", T.ArrayType(T.LongType()), [[1, 2], [1, 2, 3]],
         shapes={"c": [2]}, error=EncodeError, match=r"'c'.*3 values at row 1.*\[2\]"),
    Case("wrong vector size for the shape", VectorUDT(),
         [Vectors.dense([1.0, 2.0]), Vectors.sparse(3, [0], [1.0])], shapes={"c": [2]},
         error=EncodeError, match=r"'c'.*3 values at row 1"),
    Case("double out of float32 range", T.DoubleType(), [1.0, 2.0, 1e300],
         error=EncodeError, match=r"'c'.*1e\+300.*row 2.*float32"),
    Case("array double out of float32 range", T.ArrayType(T.DoubleType()),
         [[1.0], [], [2.0, -1e39]], error=EncodeError, match=r"'c'.*row 2.*float32"),
    Case("uint64 above int64 max", T.LongType(), [1, 2**63], arrow=pa.uint64(),
         error=EncodeError, match=r"'c'.*9223372036854775808.*int64"),
    Case("uint64 within int64", T.LongType(), [1, 2**63 - 1, None], [1, 2**63 - 1, 0],
         arrow=pa.uint64()),
    Case("batch missing the column", T.LongType(), [1], mutate=_rename,
         error=EncodeError, match=r"missing column.*'c'"),
    Case("batch with an extra column", T.LongType(), [1], mutate=_add_column,
         error=EncodeError, match=r"\['extra'\] not in the spec"),
    Case("string column for an int spec", T.LongType(), ["1"], arrow=pa.string(),
         error=EncodeError, match=r"'c'.*string.*bigint"),
    Case("int column for a string spec", T.StringType(), [1], arrow=pa.int64(),
         error=EncodeError, match=r"'c'.*int64.*string"),
    Case("list column for a scalar spec", T.LongType(), [[1]], arrow=pa.list_(pa.int64()),
         error=EncodeError, match=r"'c'.*list"),
    Case("scalar column for an array spec", T.ArrayType(T.LongType()), [1], arrow=pa.int64(),
         error=EncodeError, match=r"'c'.*array"),
    Case("null in a non-nullable column", T.LongType(), [1, 2, None], nullable=False,
         error=EncodeError, match=r"'c'.*not nullable.*row 2"),
    Case("null in a non-nullable array column", T.ArrayType(T.LongType()), [[1], None],
         nullable=False, error=EncodeError, match=r"'c'.*not nullable.*row 1"),
    Case("bad null_elements option", T.LongType(), [1], null_elements="skip",
         error=EncodeError, match=r"null_elements.*'skip'"),
]


def test_case_ids_are_unique():
    assert len({c.id for c in CASES}) == len(CASES)


def test_arrow_types_match_pyspark():
    """Our Spark -> Arrow table agrees with PySpark's own conversion."""
    from pyspark.sql.pandas.types import to_arrow_type

    for c in CASES:
        t = c.spark_type
        if c.arrow is not None or isinstance(t, (T.CharType, T.VarcharType, T.MapType)):
            continue
        assert arrow_type(t) == to_arrow_type(t, timezone="UTC"), c.id


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_roundtrip(case: Case, tmp_path):
    path = str(tmp_path / "data.tfrecord")
    if case.error is not None:
        with pytest.raises(case.error, match=case.match) as e:
            run_case(case, path)
        assert isinstance(e.value, ValueError)  # the builtin a caller would catch
        return
    out = run_case(case, path)
    n = len(case.values)
    expected = case.expected if isinstance(case.expected, dict) else {"c": case.expected}
    assert sorted(out) == sorted(expected)
    for name, want in expected.items():
        same(to_rows(out[name], n), want, f"{case.id}: {name}")
    if case.dtype is not None:
        assert out["c"].dtype == TF_DTYPES[case.dtype]
    if case.check is not None:
        case.check(out)


def run_case_blocks(case: Case, path: str, rows_per_record: int) -> dict:
    """run_case in the block layout: encoded by BlockEncoder, parsed by TensorFlow with the
    block parsing spec, the block dimension merged away."""
    from tfspark.arrow.encode_block import BlockEncoder
    from tfspark.tf.parsing import block_parsing_spec, block_rows

    batch, spec = case_batch(case)
    encoder = BlockEncoder(spec, rows_per_record, null_elements=case.null_elements)
    buf, offsets = encoder.encode(batch, framed=True)
    blocks = -(-batch.num_rows // rows_per_record)
    assert offsets.shape == (blocks + 1,) and offsets[-1] == buf.size
    write_file(path, buf.copy())
    serialized = tf.data.TFRecordDataset(path).batch(blocks).get_single_element()
    return block_rows(tf.io.parse_example(serialized, block_parsing_spec(spec)), spec)


BLOCK_CASES = [c for c in CASES if c.error is not SchemaError]  # not spec errors: no layout yet


@pytest.mark.parametrize("rows_per_record", [2, 7, 1024])  # 1024: more than any case's rows
@pytest.mark.parametrize("case", BLOCK_CASES, ids=[c.id for c in BLOCK_CASES])
def test_roundtrip_blocks(case: Case, rows_per_record: int, tmp_path):
    """Every case in the block layout: the same errors, and row for row what the row layout
    parses (VarLen features come as ragged rows, as make_dataset gives them)."""
    path = str(tmp_path / "blocks.tfrecord")
    if case.error is not None:
        with pytest.raises(case.error, match=case.match):
            run_case_blocks(case, path, rows_per_record)
        return
    out = run_case_blocks(case, path, rows_per_record)
    rows = run_case(case, str(tmp_path / "rows.tfrecord"))
    n = len(case.values)
    assert sorted(out) == sorted(rows)
    for name in rows:
        same(to_rows(out[name], n), to_rows(rows[name], n), f"{case.id}: {name}")
        assert out[name].dtype == rows[name].dtype


def test_fixed_and_varlen_tensor_shapes(tmp_path):
    out = run_case(Case("x", T.ArrayType(T.LongType()), [[1, 2], [3, 4], None],
                        shapes={"c": [2]}), str(tmp_path / "a"))
    assert out["c"].shape == (3, 2)
    out = run_case(Case("x", T.ArrayType(T.LongType()), [[1, 2, 3], [], None]),
                   str(tmp_path / "b"))
    assert isinstance(out["c"], tf.SparseTensor)
    assert out["c"].dense_shape.numpy().tolist() == [3, 3]
    np.testing.assert_array_equal(tf.sparse.to_dense(out["c"]).numpy(),
                                  [[1, 2, 3], [0, 0, 0], [0, 0, 0]])
    out = run_case(Case("x", T.ArrayType(T.ArrayType(T.LongType())), [[[1], []], None]),
                   str(tmp_path / "c"))
    assert isinstance(out["c"], tf.RaggedTensor) and out["c"].ragged_rank == 2
    assert out["c"].row_splits.dtype == tf.int64


def test_uint64_error_names_the_row(tmp_path):
    with pytest.raises(EncodeError, match=r"'c'.*(row|element) 1"):
        run_case(Case("x", T.LongType(), [5, 2**64 - 1], arrow=pa.uint64()),
                 str(tmp_path / "a"))


def test_null_element_policy_checks_only_present_rows(tmp_path):
    """Elements of a null row are never looked at (Arrow may keep junk behind a null list)."""
    values = pa.array([1, None, 2, 3], pa.int64())
    arr = pa.ListArray.from_arrays(pa.array([0, 1, 3, 4], pa.int32()), values,
                                   mask=pa.array([False, True, False]))
    spec = infer_spec(T.StructType([T.StructField("c", T.ArrayType(T.LongType()))]))
    buf, _ = encode_records(pa.RecordBatch.from_arrays([arr], names=["c"]), spec, framed=True)
    out = parse_file(write_file(str(tmp_path / "f"), buf), spec, 3)
    assert to_rows(out["c"], 3) == [[1], [], [3]]


def test_sliced_batches_round_trip(tmp_path):
    """A batch that is a slice of a bigger one (Arrow offsets not starting at 0)."""
    t = T.ArrayType(T.ArrayType(T.StringType()))
    schema = T.StructType([T.StructField("c", t), T.StructField("s", T.StringType()),
                           T.StructField("d", T.DoubleType())])
    spec = infer_spec(schema)
    rows = [[[["a"], ["b", "c"]], "x", 1.0], [None, None, None], [[[], ["é"]], "yy", 2.5],
            [[["z"]], "", -1.0]]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r[i] for r in rows], type=arrow_type(f.dataType))
         for i, f in enumerate(schema.fields)], names=schema.names).slice(1, 3)
    buf, _ = encode_records(batch, spec, framed=True)
    out = parse_file(write_file(str(tmp_path / "f"), buf), spec, 3)
    assert out["c"].to_list() == [[], [[], ["é".encode()]], [[b"z"]]]
    assert to_rows(out["s"], 3) == [b"", b"yy", b""]
    assert to_rows(out["d"], 3) == [0.0, 2.5, -1.0]


# ---------------------------------------------------------------- all types together

def all_types_schema() -> T.StructType:
    s = T.StructType([T.StructField("k", T.IntegerType()),
                      T.StructField("v", VectorUDT())])
    fields = [
        ("bool", T.BooleanType()), ("byte", T.ByteType()), ("short", T.ShortType()),
        ("int", T.IntegerType()), ("long", T.LongType()), ("float", T.FloatType()),
        ("double", T.DoubleType()), ("dec", T.DecimalType(9, 3)), ("str", T.StringType()),
        ("bin", T.BinaryType()), ("date", T.DateType()), ("ts", T.TimestampType()),
        ("ntz", T.TimestampNTZType()), ("ints", T.ArrayType(T.LongType())),
        ("floats", T.ArrayType(T.FloatType())), ("strs", T.ArrayType(T.StringType())),
        ("grid", T.ArrayType(T.ArrayType(T.DoubleType()))), ("pair", T.ArrayType(T.LongType())),
        ("vec", VectorUDT()), ("s", s), ("y", T.DoubleType()),
    ]
    return T.StructType([T.StructField(n, t, n != "y") for n, t in fields])


ALL_ROW0 = {
    "bool": True, "byte": -128, "short": 32767, "int": -(2**31), "long": I64 - 1,
    "float": -0.0, "double": 0.1, "dec": Decimal("-1.250"), "str": "é\x00", "bin": b"\xff\x00",
    "date": D_NEG, "ts": TS_NEG, "ntz": dt.datetime(1960, 6, 1), "ints": [-1, 0, 2**40],
    "floats": [math.inf], "strs": ["", "a"], "grid": [[1.0], [], [2.0, 3.0]], "pair": [7, 8],
    "vec": Vectors.sparse(3, [2], [4.0]), "s": {"k": 9, "v": Vectors.dense([0.5])}, "y": 1.0,
}
ALL_ROW1 = {k: None for k in ALL_ROW0} | {"y": -2.0, "s": {"k": None, "v": None}}


def all_types_batch(rows: list[dict], schema: T.StructType) -> pa.RecordBatch:
    cols = [pa.array(arrow_values(f.dataType, [r[f.name] for r in rows]),
                     type=arrow_type(f.dataType)) for f in schema.fields]
    return pa.RecordBatch.from_arrays(cols, names=schema.names)


def example_by_hand(row: dict) -> Any:
    """The tf.train.Example a row should become, built with TF's own protos."""
    ex = tf.train.Example()
    feats = ex.features.feature

    def ints(key, vs):
        feats[key].int64_list.value.extend(vs)

    def floats(key, vs):
        feats[key].float_list.value.extend(vs)

    def blobs(key, vs):
        feats[key].bytes_list.value.extend(vs)

    for key in ("bool", "byte", "short", "int", "long"):
        if row[key] is not None:
            ints(key, [int(row[key])])
    for key in ("float", "double", "dec"):
        if row[key] is not None:
            floats(key, [float(row[key])])
    if row["str"] is not None:
        blobs("str", [row["str"].encode()])
    if row["bin"] is not None:
        blobs("bin", [row["bin"]])
    if row["date"] is not None:
        ints("date", [days(row["date"])])
    if row["ts"] is not None:
        ints("ts", [micros(row["ts"])])
    if row["ntz"] is not None:
        ints("ntz", [micros(row["ntz"])])
    if row["ints"] is not None:
        ints("ints", row["ints"])
    if row["pair"] is not None:
        ints("pair", row["pair"])
    if row["floats"] is not None:
        floats("floats", row["floats"])
    if row["strs"] is not None:
        blobs("strs", [s.encode() for s in row["strs"]])
    if row["grid"] is not None:
        floats("grid/values", [x for inner in row["grid"] for x in inner])
        ints("grid/row_lengths", [len(inner) for inner in row["grid"]])
    if row["vec"] is not None:
        floats("vec", row["vec"].toArray().tolist())
    if row["s"] is not None:
        if row["s"]["k"] is not None:
            ints("s.k", [row["s"]["k"]])
        if row["s"]["v"] is not None:
            floats("s.v", row["s"]["v"].toArray().tolist())
    floats("y", [row["y"]])
    return ex


def _varint(b: bytes, p: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        v |= (b[p] & 0x7F) << shift
        shift += 7
        p += 1
        if b[p - 1] < 0x80:
            return v, p


def entry_keys(record: bytes) -> list[str]:
    """The Example's feature map keys in the order they are written."""
    assert record[0] == 0x0A  # Example.features
    size, p = _varint(record, 1)
    assert p + size == len(record)
    keys = []
    while p < len(record):
        assert record[p] == 0x0A  # Features.feature entry
        entry, q = _varint(record, p + 1)
        assert record[q] == 0x0A  # entry key
        n, r = _varint(record, q + 1)
        keys.append(record[r:r + n].decode())
        p = q + entry
    return keys


def test_all_types_together(tmp_path):
    schema = all_types_schema()
    spec = infer_spec(schema, label_cols=["y"], shapes={"pair": [2], "s.v": [1]},
                      defaults={"long": -5, "str": "?"})
    rows = [ALL_ROW0, ALL_ROW1]
    batch = all_types_batch(rows, schema)
    records = encode_batch(batch, spec)
    buf, offsets = encode_records(batch, spec, framed=True)
    assert len(records) == 2 and len(offsets) == 3

    plain = write_file(str(tmp_path / "plain.tfrecord"), buf)
    gz = write_file(str(tmp_path / "data.tfrecord.gz"), buf, compression="gzip")
    with open(gz, "rb") as fh:
        assert fh.read(2) == b"\x1f\x8b"
    read_plain = [r.numpy() for r in tf.data.TFRecordDataset(plain)]
    read_gz = [r.numpy() for r in tf.data.TFRecordDataset(gz, compression_type="GZIP")]
    assert read_plain == read_gz == records

    for record, row in zip(records, rows):
        got = tf.train.Example.FromString(record)
        want = example_by_hand(row)
        assert got == want, f"{got}\n!=\n{want}"
        # Map entries come in bytewise key order (C++ protobuf's deterministic order; Python's
        # upb puts "floats" before "float", so its bytes differ from ours: compare messages).
        keys = entry_keys(record)
        assert keys == sorted(keys, key=lambda k: k.encode())
        assert set(keys) == set(want.features.feature)
        assert tf.train.Example.FromString(want.SerializeToString()) == got

    for path, comp in ((plain, None), (gz, "GZIP")):
        out = parse_file(path, spec, 2, compression=comp)
        assert sorted(out) == spec.names
        same(to_rows(out["long"], 2), [I64 - 1, -5], "long")
        same(to_rows(out["str"], 2), ["é\x00".encode(), b"?"], "str")
        same(to_rows(out["float"], 2), [-0.0, 0.0], "float")
        same(to_rows(out["grid"], 2), [[[1.0], [], [2.0, 3.0]], []], "grid")
        same(to_rows(out["pair"], 2), [[7, 8], [0, 0]], "pair")
        same(to_rows(out["vec"], 2), [[0.0, 0.0, 4.0], []], "vec")
        same(to_rows(out["s.v"], 2), [[0.5], [0.0]], "s.v")
        same(to_rows(out["s.k"], 2), [9, 0], "s.k")
        same(to_rows(out["ts"], 2), [-1, 0], "ts")
        same(to_rows(out["y"], 2), [1.0, -2.0], "y")
    assert spec.label_names == ["y"]


def test_spec_from_json_parses_the_same(tmp_path):
    schema = all_types_schema()
    spec = infer_spec(schema, shapes={"pair": [2]}, defaults={"double": math.nan})
    back = FeatureSpec.from_json(spec.to_json())
    batch = all_types_batch([ALL_ROW1, ALL_ROW0], schema)
    buf, _ = encode_records(batch, back, framed=True)
    path = write_file(str(tmp_path / "f.tfrecord"), buf)
    a, b = parse_file(path, spec, 2), parse_file(path, back, 2)
    assert sorted(a) == sorted(b)
    for name in a:
        same(to_rows(a[name], 2), to_rows(b[name], 2), name)
    assert math.isnan(a["double"].numpy()[0])


def test_several_batches_in_one_gzip_file(tmp_path):
    t = T.ArrayType(T.StringType())
    spec = infer_spec(T.StructType([T.StructField("c", t)]))
    path = str(tmp_path / "f.tfrecord.gz")
    want = []
    with open(path, "wb") as fh, RecordWriter(fh, compression="gzip") as w:
        for k in range(3):
            vals = [[str(k)] * i for i in range(50)]
            batch = pa.RecordBatch.from_arrays([pa.array(vals, arrow_type(t))], names=["c"])
            w.write_framed(encode_records(batch, spec, framed=True)[0])
            want += [[s.encode() for s in v] for v in vals]
        assert w.records == 150
    out = parse_file(path, spec, 150, compression="GZIP")
    assert to_rows(out["c"], 150) == want


@pytest.mark.parametrize("vec", [DenseVector([1.0]), SparseVector(1, [0], [1.0])])
def test_vector_values_are_not_confused_with_indices(vec, tmp_path):
    out = run_case(Case("v", VectorUDT(), [vec, None], shapes={"c": [1]}), str(tmp_path / "f"))
    assert to_rows(out["c"], 2) == [[1.0], [0.0]]


def test_sliced_all_types_batch_encodes_like_a_fresh_one():
    """Struct, vector, list and string columns of a slice (non-zero Arrow offsets)."""
    schema = all_types_schema()
    spec = infer_spec(schema, shapes={"pair": [2], "s.v": [1]})
    rows = [ALL_ROW1, ALL_ROW0, ALL_ROW1, ALL_ROW0]
    sliced = all_types_batch(rows, schema).slice(1, 2)
    assert encode_batch(sliced, spec) == encode_batch(all_types_batch(rows[1:3], schema), spec)
    assert encode_batch(pa.Table.from_batches([sliced]), spec) == encode_batch(sliced, spec)



@pytest.mark.spark
@pytest.mark.tf
def test_decimals_float32_cannot_hold_are_refused_and_text_is_exact(spark_tf, tmp_path):
    df = spark_tf.createDataFrame([(1, Decimal("999999999")), (2, Decimal("12"))],
                                  "id long, d decimal(9,0)")
    with pytest.raises(EncodeError, match=r"column 'd' value 999999999 at row \d.*"
                                          r"decimal_as='string'"):
        tfspark.write_tfrecords(df, str(tmp_path / "f32"))
    assert not (tmp_path / "f32").exists()  # nothing half-written
    exact = spark_tf.createDataFrame([(1, Decimal("12345678.91")), (2, None)],
                                     "id long, d decimal(10,2)")
    out = str(tmp_path / "text")
    tfspark.write_tfrecords(exact, out, decimal_as="string")
    back = spark_tf.read.format("tfrecord").load(out)
    assert back.schema["d"].dataType.simpleString() == "decimal(10,2)"
    assert sorted((r.id, r.d) for r in back.collect()) == [(1, Decimal("12345678.91")),
                                                            (2, None)]
    batch = next(iter(tfspark.make_dataset(out, 8, label_cols=[], shuffle_buffer=0,
                                           deterministic=True)))
    assert sorted(batch["d"].numpy().tolist()) == [b"", b"12345678.91"]
    # The data source takes the same option, and refuses the same values without it.
    exact.write.format("tfrecord").option("decimalAs", "string").mode("overwrite") \
        .save(str(tmp_path / "ds"))
    assert verify(str(tmp_path / "ds")).ok


@pytest.mark.spark
@pytest.mark.tf
def test_a_struct_of_null_fields_is_not_a_null_struct(spark_tf, tmp_path):
    from pyspark.sql import functions as F

    df = spark_tf.range(3).select("id", F.struct(
        F.when(F.col("id") > 0, F.col("id")).alias("a"),
        F.when(F.col("id") > 1, F.lit("x")).alias("b")).alias("s"))
    assert not df.schema["s"].nullable  # what F.struct makes: never a null struct
    out = str(tmp_path / "structs")
    tfspark.write_tfrecords(df, out)
    back = {r.id: r.s for r in spark_tf.read.format("tfrecord").load(out).collect()}
    assert back[0] is not None and (back[0].a, back[0].b) == (None, None)
    assert (back[2].a, back[2].b) == (2, "x")

