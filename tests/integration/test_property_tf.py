"""Property: any supported table survives encode -> frame -> file -> TFRecordDataset -> parse.

Hypothesis draws a schema (1-6 columns of scalars, 1-D arrays, fixed-shape arrays, 2-D arrays and
a struct), then rows (nulls wherever the schema allows them, never inside arrays). TensorFlow
must parse back exactly what a plain-Python model of the type table predicts: floats as
float32 (NaN == NaN, the sign of zero kept), dates as days and timestamps as microseconds.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

import tfspark  # noqa: E402
from tfspark.arrow.encode import encode_records  # noqa: E402
from tfspark.spec import infer_spec  # noqa: E402
from tfspark.wire.stream import RecordWriter  # noqa: E402

pytestmark = pytest.mark.tf

UTC = dt.timezone.utc
F32_MAX = float(np.finfo(np.float32).max)
EPOCH_DAY = dt.date(1970, 1, 1)


def _days(d: dt.date) -> int:
    return (d - EPOCH_DAY).days


def _micros(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1, tzinfo=t.tzinfo)) // dt.timedelta(microseconds=1)


def _f32(x: float) -> float:
    return float(np.float32(x))


@dataclass(frozen=True)
class Scalar:
    """A Spark scalar type: its Arrow type, a strategy for its values, and what TF returns."""

    spark: T.DataType
    arrow: pa.DataType
    values: st.SearchStrategy
    stored: Callable[[Any], Any]
    default: Any


_DOUBLES = st.floats(-F32_MAX, F32_MAX) | st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, 1e-46, -1e-46, 0.1])

SCALARS = [
    Scalar(T.BooleanType(), pa.bool_(), st.booleans(), int, 0),
    Scalar(T.ByteType(), pa.int8(), st.integers(-(2**7), 2**7 - 1), int, 0),
    Scalar(T.ShortType(), pa.int16(), st.integers(-(2**15), 2**15 - 1), int, 0),
    Scalar(T.IntegerType(), pa.int32(), st.integers(-(2**31), 2**31 - 1), int, 0),
    Scalar(T.LongType(), pa.int64(), st.integers(-(2**63), 2**63 - 1), int, 0),
    Scalar(T.FloatType(), pa.float32(), st.floats(width=32), _f32, 0.0),
    Scalar(T.DoubleType(), pa.float64(), _DOUBLES, _f32, 0.0),
    # 6 significant digits: what float32 holds exactly (more is refused, see the table tests)
    Scalar(T.DecimalType(10, 3), pa.decimal128(10, 3),
           st.decimals(Decimal("-999.999"), Decimal("999.999"), places=3),
           lambda d: _f32(float(d)), 0.0),
    Scalar(T.StringType(), pa.string(), st.text(max_size=8), str.encode, b""),
    Scalar(T.BinaryType(), pa.binary(), st.binary(max_size=8), bytes, b""),
    Scalar(T.DateType(), pa.date32(), st.dates(), _days, 0),
    Scalar(T.TimestampType(), pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(UTC)),
           _micros, 0),
    Scalar(T.TimestampNTZType(), pa.timestamp("us"), st.datetimes(), _micros, 0),
]


@dataclass(frozen=True)
class Column:
    """One column: its Spark type, Arrow type, a strategy for its (non-null) values, and the
    parsed value per feature as a function of the row's value (None = null)."""

    spark: T.DataType
    arrow: pa.DataType
    nullable: bool
    values: st.SearchStrategy
    expect: Callable[[str, Any], dict[str, Any]]
    # Fixed shapes of the column ("") or of its struct children ("f0"), for infer_spec.
    shapes: tuple[tuple[str, int], ...] = ()

    def shapes_for(self, name: str) -> dict[str, list[int]]:
        return {f"{name}.{sub}" if sub else name: [n] for sub, n in self.shapes}


def _leaf(s: Scalar, kind: str, shape: int | None = None) -> Callable[[str, Any], dict]:
    def expect(name: str, v: Any) -> dict:
        if kind == "scalar":
            out = s.default if v is None else s.stored(v)
        elif kind == "fixed":
            out = [s.default] * shape if v is None else [s.stored(x) for x in v]
        elif kind == "varlen":
            out = [] if v is None else [s.stored(x) for x in v]
        else:  # ragged
            out = [] if v is None else [[s.stored(x) for x in inner] for inner in v]
        return {name: out}
    return expect


@st.composite
def leaf_columns(draw: st.DrawFn, allow_ragged: bool = True) -> Column:
    s = draw(st.sampled_from(SCALARS))
    nullable = draw(st.booleans())
    kinds = ["scalar", "varlen", "fixed"] + (["ragged"] if allow_ragged else [])
    kind = draw(st.sampled_from(kinds))
    element = pa.field("element", s.arrow, False)
    if kind == "scalar":
        return Column(s.spark, s.arrow, nullable, s.values, _leaf(s, kind))
    if kind == "varlen":
        return Column(T.ArrayType(s.spark, False), pa.list_(element), nullable,
                      st.lists(s.values, max_size=4), _leaf(s, kind))
    if kind == "fixed":
        n = draw(st.integers(0, 3))
        return Column(T.ArrayType(s.spark, False), pa.list_(element), nullable,
                      st.lists(s.values, min_size=n, max_size=n), _leaf(s, kind, n),
                      shapes=(("", n),))
    inner = pa.field("element", pa.list_(element), False)
    return Column(T.ArrayType(T.ArrayType(s.spark, False), False), pa.list_(inner), nullable,
                  st.lists(st.lists(s.values, max_size=3), max_size=3), _leaf(s, kind))


def _maybe_null(c: Column) -> st.SearchStrategy:
    return st.none() | c.values if c.nullable else c.values


@st.composite
def struct_columns(draw: st.DrawFn) -> Column:
    children = draw(st.lists(leaf_columns(allow_ragged=False), min_size=1, max_size=3))
    names = [f"f{i}" for i in range(len(children))]
    spark = T.StructType([T.StructField(n, c.spark, c.nullable) for n, c in zip(names, children)])
    arrow = pa.struct([pa.field(n, c.arrow, c.nullable) for n, c in zip(names, children)])
    values = st.fixed_dictionaries({n: _maybe_null(c) for n, c in zip(names, children)})

    def expect(name: str, v: Any) -> dict:
        out: dict[str, Any] = {}
        for n, c in zip(names, children):
            out.update(c.expect(f"{name}.{n}", None if v is None else v[n]))
        return out

    shapes = tuple((n, k) for n, c in zip(names, children) for _, k in c.shapes)
    return Column(spark, arrow, draw(st.booleans()), values, expect, shapes)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Column], list[list[Any]]]:
    cols = draw(st.lists(leaf_columns() | struct_columns(), min_size=1, max_size=6))
    n = draw(st.integers(1, 6))
    rows = [[draw(_maybe_null(c)) for c in cols] for _ in range(n)]
    return cols, rows


def _rows(t: Any, n: int) -> list:
    if isinstance(t, tf.SparseTensor):
        out: list[list] = [[] for _ in range(n)]
        for (r, _), v in zip(t.indices.numpy().tolist(), t.values.numpy().tolist()):
            out[r].append(v)
        return out
    if isinstance(t, tf.RaggedTensor):
        return t.to_list()
    return t.numpy().tolist()


def _same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        ok = (math.isnan(got) and math.isnan(want)) or (
            got == want and math.copysign(1, got) == math.copysign(1, want))
        assert isinstance(got, float) and ok, f"{where}: {got!r} != {want!r}"
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory):
    return tmp_path_factory.mktemp("property")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(table=tables(), gzip=st.booleans())
def test_any_table_round_trips(workdir, table, gzip):
    cols, rows = table
    names = [f"c{i}" for i in range(len(cols))]
    schema = T.StructType([T.StructField(n, c.spark, c.nullable) for n, c in zip(names, cols)])
    shapes = {k: v for n, c in zip(names, cols) for k, v in c.shapes_for(n).items()}
    spec = infer_spec(schema, shapes=shapes)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r[i] for r in rows], type=c.arrow) for i, c in enumerate(cols)], names=names)

    buf, offsets = encode_records(batch, spec, framed=True)
    assert len(offsets) == len(rows) + 1
    path = str(workdir / "data.tfrecord")
    with open(path, "wb") as fh, RecordWriter(fh, compression="gzip" if gzip else None) as w:
        w.write_framed(buf)
    ds = tf.data.TFRecordDataset(path, compression_type="GZIP" if gzip else "")
    parsed = tf.io.parse_example(ds.batch(len(rows)).get_single_element(),
                                 tfspark.tf.parsing_spec(spec))

    expected: dict[str, list] = {}
    for i, (n, c) in enumerate(zip(names, cols)):
        for row in rows:
            for name, value in c.expect(n, row[i]).items():
                expected.setdefault(name, []).append(value)
    assert sorted(parsed) == sorted(expected) == sorted(spec.names)
    for name, want in expected.items():
        _same(_rows(parsed[name], len(rows)), want, name)
