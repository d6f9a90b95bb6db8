"""The vectorized decoder (decode_records, frame_offsets), restore and the stream reader
against the encoder, hand-built bytes and damaged input. No Spark session, no TensorFlow."""

from __future__ import annotations

import datetime as dt
import io
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example as case
from hypothesis import given, settings
from hypothesis import strategies as st
from protobytes import (
    byte_list,
    entry,
    example,
    floats_unpacked,
    ints_packed,
    ints_unpacked,
    ld,
    records,
    varint,
)
from pyspark.sql import types as T

from tfspark import infer_spec
from tfspark.arrow.decode import decode_records, records_column
from tfspark.arrow.encode import encode_records
from tfspark.errors import CorruptRecordError, SchemaError
from tfspark.spark.infer import KeyStats, pick_files, sample_stats, schema_from_stats
from tfspark.spark.to_spark import restore
from tfspark.wire.example_py import decode_with_spec
from tfspark.wire.stream import stream_framed
from tfspark.wire.tfrecord import frame_offsets, frame_record

F32 = np.float32
UTC = dt.timezone.utc


def _f32(x):
    return None if x is None else float(F32(x))


def _schema(**cols) -> T.StructType:
    return T.StructType([T.StructField(k, v) for k, v in cols.items()])


def _decode(table: pa.Table, schema: T.StructType, **spec_kw) -> pa.RecordBatch:
    spec = infer_spec(schema, **spec_kw)
    buf, offsets = encode_records(table, spec)
    return decode_records(buf, offsets, spec)


# Spark type, Arrow type, values; the canonical column decode_records gives back, and what
# restore gives back for the Spark type (None: the values themselves).
CASES = {
    "long": (T.LongType(), pa.int64(), [0, -1, 2**63 - 1, -(2**63), None], None, None),
    "tinyint": (T.ByteType(), pa.int8(), [-128, 127, None], None, None),
    "bool": (T.BooleanType(), pa.bool_(), [True, False, None], [1, 0, None], None),
    "double": (T.DoubleType(), pa.float64(), [1.5, -0.1, 1e30, None],
               [1.5, _f32(-0.1), _f32(1e30), None], [1.5, _f32(-0.1), _f32(1e30), None]),
    "decimal": (T.DecimalType(10, 2), pa.decimal128(10, 2),
                [Decimal("123.45"), Decimal("-0.01"), None], [_f32(123.45), _f32(-0.01), None],
                None),
    "string": (T.StringType(), pa.string(), ["a", "", "héllo", None],
               [b"a", b"", "héllo".encode(), None], None),
    "binary": (T.BinaryType(), pa.binary(), [b"\x00\xff", b"", None], None, None),
    "date": (T.DateType(), pa.date32(), [dt.date(1970, 1, 2), dt.date(1, 1, 1), None],
             [1, -719162, None], None),
    "timestamp": (T.TimestampType(), pa.timestamp("us", tz="UTC"),
                  [dt.datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=UTC), None], [1_000_005, None],
                  None),
    "timestamp_ntz": (T.TimestampNTZType(), pa.timestamp("us"),
                      [dt.datetime(1969, 12, 31, 23, 59, 59), None], [-1_000_000, None], None),
    "array<int>": (T.ArrayType(T.IntegerType()), pa.list_(pa.int32()),
                   [[1, -2, 3], [], None, [-(2**31)]], None, None),
    "array<string>": (T.ArrayType(T.StringType()), pa.list_(pa.string()),
                      [["x", ""], [], None], [[b"x", b""], [], None], None),
    "array<array<long>>": (T.ArrayType(T.ArrayType(T.LongType())),
                           pa.list_(pa.list_(pa.int64())),
                           [[[1, 2], [], [-3]], [], None, [[]]], None, None),
    "array<array<float>>": (T.ArrayType(T.ArrayType(T.FloatType())),
                            pa.list_(pa.list_(pa.float32())),
                            [[[0.5], []], None, [[1.5, -2.0]]], None, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trip(case):
    spark_type, arrow_type, values, canonical, restored = CASES[case]
    schema = _schema(c=spark_type)
    table = pa.table({"c": pa.array(values, arrow_type)})
    batch = _decode(table, schema)
    assert batch.column(0).to_pylist() == (values if canonical is None else canonical)
    back = restore(batch, infer_spec(schema), schema).column(0).to_pylist()
    assert back == (values if restored is None else restored)


def test_fixed_shape_struct_and_vector():
    from pyspark.ml.linalg import VectorUDT

    schema = T.StructType([
        T.StructField("emb", T.ArrayType(T.FloatType())),
        T.StructField("s", T.StructType([T.StructField("a", T.LongType()),
                                         T.StructField("b", T.StringType())])),
        T.StructField("v", VectorUDT()),
    ])
    vec = pa.struct([("type", pa.int8()), ("size", pa.int32()),
                     ("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float64()))])
    table = pa.table({
        "emb": pa.array([[1, 2], None, [3, 4]], pa.list_(pa.float32())),
        "s": pa.array([{"a": 1, "b": None}, None, {"a": None, "b": "z"}],
                      pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "v": pa.array([{"type": 1, "size": None, "indices": None, "values": [0.5, 1.0]}, None,
                       {"type": 0, "size": 2, "indices": [1], "values": [2.0]}], vec),
    })
    spec = infer_spec(schema, shapes={"emb": [2]})
    buf, offsets = encode_records(table, spec)
    batch = decode_records(buf, offsets, spec)
    assert batch.schema.names == ["emb", "s.a", "s.b", "v"]
    assert batch.column("emb").to_pylist() == [[1, 2], None, [3, 4]]
    back = restore(batch, spec, schema).to_pylist()
    assert [r["s"] for r in back] == [{"a": 1, "b": None}, None, {"a": None, "b": "z"}]
    assert [r["v"] and r["v"]["values"] for r in back] == [[0.5, 1.0], None, [0.0, 2.0]]
    assert back[0]["v"]["type"] == 1


def test_float_specials_and_framed_buffers():
    schema = _schema(f=T.FloatType())
    values = [math.nan, math.inf, -math.inf, -0.0, 1e-45]
    spec = infer_spec(schema)
    buf, offsets = encode_records(pa.table({"f": pa.array(values, pa.float32())}), spec,
                                  framed=True)
    found = frame_offsets(buf)
    assert found.tolist() == offsets.tolist()
    out = decode_records(buf, found, spec, framed=True).column(0).to_pylist()
    assert math.isnan(out[0]) and out[1:3] == [math.inf, -math.inf]
    assert math.copysign(1, out[3]) == -1 and out[4] == _f32(1e-45)


# ---------------------------------------------------------------- hand-built records

SPEC = infer_spec(T.StructType([
    T.StructField("a", T.LongType()), T.StructField("f", T.ArrayType(T.FloatType())),
    T.StructField("s", T.StringType()), T.StructField("l", T.ArrayType(T.LongType()))]))


def test_any_key_order_unpacked_lists_unknown_keys_and_fields():
    r0 = example(entry(b"zzz", ints_packed(9)),  # unknown key
                  entry(b"s", byte_list(b"x")),
                  entry(b"l", ints_unpacked(1, -2) + ints_packed(7)),  # last list wins
                  entry(b"f", floats_unpacked(0.5, -1.5), value_first=True),
                  entry(b"a", ints_unpacked(-5)),
                  extra=varint(9 << 3) + varint(300))  # an unknown varint field
    both = ld(3, b"\x08" + varint(4) + ld(1, varint(5) + varint(6)))  # mixed packing
    r1 = example(entry(b"l", both), entry(b"a", ints_packed(3)), entry(b"a", byte_list()))
    r2 = b""  # an empty Example: every feature absent
    batch = decode_records(*records(r0, r1, r2), SPEC)
    assert batch.to_pylist() == [
        {"a": -5, "f": [0.5, -1.5], "l": [7], "s": b"x"},
        {"a": None, "f": None, "l": [4, 5, 6], "s": None},  # the later empty 'a' wins: null
        {"a": None, "f": None, "l": None, "s": None}]


def test_int64_lists_read_in_one_pass_take_every_packing_and_refuse_every_bad_varint():
    """int64 lists are counted and filled in one pass, into room for as many values as their
    bytes: every packing and value length, against the reference decoder; each bad varint
    refused, naming the feature and the record."""
    extremes = [0, 1, 127, 128, -1, 2**63 - 1, -(2**63), 300, -300]
    fine = [
        example(entry(b"l", ints_packed(*extremes))),  # 10-byte varints beside 1-byte ones
        example(entry(b"l", ints_unpacked(*extremes))),
        example(entry(b"l", ld(3, ld(1, b"") + b"\x08" + varint(5) + ld(1, varint(-7))))),
        example(entry(b"l", ld(3, ld(1, varint(1)) + b"\x15abcd" + ld(9, b"xyz")))),  # unknown
        example(entry(b"l", floats_unpacked())),  # an empty list of another kind: no values
        example(entry(b"l", byte_list())),
        example(entry(b"l", ld(3, b""))),
        b"",
    ]
    assert all(decode_and_compare([rec]) for rec in fine)
    got = decode_records(*records(*fine), SPEC).column("l").to_pylist()
    assert got == [extremes, extremes, [5, -7], [1], [], [], [], None]
    bad = {
        "past 64 bits": ld(1, b"\x80" * 9 + b"\x02"),
        "11 bytes": ld(1, b"\x80" * 10 + b"\x01"),
        "last byte continues": ld(1, varint(5) + b"\x80"),
        "unpacked, cut short": b"\x08\x80",
        "a field past the list": b"\x0a\x05\x01",
    }
    for what, body in bad.items():
        recs = [example(entry(b"l", ints_packed(1, 2))), example(entry(b"l", ld(3, body)))]
        assert not decode_and_compare(recs), what
        with pytest.raises(CorruptRecordError, match=r"malformed int64 list of feature 'l'"):
            decode_records(*records(*recs), SPEC)
    with pytest.raises(SchemaError, match=r"feature 'l' \(key 'l'\) holds a float list"):
        decode_records(*records(example(entry(b"l", floats_unpacked(1.0)))), SPEC)
    # each record's count, not the running total: a fixed shape is checked record by record
    pair = infer_spec(T.StructType([T.StructField("l", T.ArrayType(T.LongType()))]),
                      shapes={"l": [2]})
    recs = [example(entry(b"l", ints_packed(-1, 2**40))), b"",
            example(entry(b"l", ints_unpacked(3) + ints_packed(4)))]  # the last list wins
    with pytest.raises(SchemaError, match=r"feature .l. has 1 values .*record at byte offset 29"):
        decode_records(*records(*recs), pair)
    recs[2] = example(entry(b"l", ints_unpacked(3, 4)))
    assert decode_records(*records(*recs), pair).column("l").to_pylist() == [
        [-1, 2**40], None, [3, 4]]


def test_ints_are_read_as_floats_but_not_the_other_way():
    rec = example(entry(b"f", ints_packed(3, -1)))
    assert decode_records(*records(rec), SPEC).column("f").to_pylist() == [[3.0, -1.0]]
    rec = example(entry(b"a", floats_unpacked(1.5)))
    with pytest.raises(SchemaError, match="feature 'a' .* holds a float list but the spec says "
                                          "int64"):
        decode_records(*records(b"", rec), SPEC)


@pytest.mark.parametrize("ints", [ints_packed, ints_unpacked])
def test_ints_read_as_floats_only_where_float32_holds_them_exactly(ints):
    """An int64 feature read under a spec that says float32 (a spec= given, an edited
    manifest) would come back rounded past 2**24: such a value is refused, naming the feature
    and the value, in every reader's decoder (lists and scalars) and the reference's."""
    scalar = infer_spec(_schema(x=T.FloatType()))
    for spec, key in ((SPEC, b"f"), (scalar, b"x")):
        # (-2**63 and 2**62 are powers of two: float32 holds them; the ends of int64's range)
        for fine in ([ints(2**24)], [ints(-(2**63))], [ints(2**62)]) if key == b"x" else \
                ([ints(-(2**24), 2**30, 3, -(2**63), 2**62)],):
            assert decode_and_compare([example(entry(key, *fine))], spec)
        for bad in (2**24 + 1, -(2**53) - 1, 2**63 - 1):
            rec = example(entry(key, ints(bad)))
            name = key.decode()
            with pytest.raises(SchemaError, match=f"feature '{name}' .* holds the int64 value "
                                                  f"{bad}, which float32 cannot hold exactly"):
                decode_records(*records(b"", rec), spec)
            with pytest.raises(CorruptRecordError, match=f"int64 value {bad}"):
                decode_with_spec(rec, spec, fill_defaults=False)
    from tfspark.numpy.decode import NumpyDecoder
    from tfspark.wire.tfrecord import frame_record

    framed = frame_record(example(entry(b"x", ints(2**24 + 1))))
    buf, offsets = np.frombuffer(framed, np.uint8), np.array([0, len(framed)], np.int64)
    with pytest.raises(SchemaError, match="feature 'x' .* int64 value 16777217"):
        NumpyDecoder(scalar, 1).decode(buf, offsets, path="f.tfrecord")


def test_numpy_decoder_reads_scalars_of_one_type_in_one_pass_as_each_alone():
    """The NumPy decoder reads every scalar number of a dtype in one pass over the records:
    the same columns as the Arrow decoder (nulls as the defaults), and an error names the
    feature and the record it is in, whichever feature of the pass it is."""
    from tfspark.numpy.decode import NumpyDecoder
    from tfspark.wire.tfrecord import frame_record

    spec = infer_spec(_schema(a=T.LongType(), b=T.LongType(), x=T.FloatType(),
                              c=T.LongType(), y=T.DoubleType()))
    rng = np.random.default_rng(7)
    table = pa.table({"a": pa.array(rng.integers(-2**40, 2**40, 300)),
                      "b": pa.array([None if i % 7 == 0 else i for i in range(300)], pa.int64()),
                      "x": pa.array(rng.standard_normal(300).astype(np.float32)),
                      "c": pa.array(rng.integers(0, 2**62, 300)),
                      "y": pa.array([None if i % 5 == 2 else i / 4 for i in range(300)])})
    buf, offsets = encode_records(table, spec, framed=True)
    got, _ = NumpyDecoder(spec, 1).decode(buf, offsets, path="f.tfrecord")
    want = decode_records(buf, offsets, spec, framed=True)
    for name in table.column_names:
        column = want.column(name).fill_null(0).to_numpy(zero_copy_only=False)
        assert np.array_equal(got[name], column.astype(got[name].dtype)), name
    # Lists other writers make, read after indexing: unpacked, a key given twice (the later
    # entry wins, whichever layout each has), an int list under a float32 scalar.
    odd = [example(entry(b"a", ints_unpacked(5)), entry(b"x", floats_unpacked(2.5))),
           example(entry(b"a", ints_packed(1)), entry(b"a", ints_unpacked(9))),
           example(entry(b"a", ints_unpacked(1)), entry(b"a", ints_packed(8)),
                   entry(b"x", ints_packed(3))),
           example(entry(b"b", ints_packed(4)), entry(b"b", ints_packed()))]
    framed = [frame_record(r) for r in odd]
    frames = np.frombuffer(b"".join(framed), np.uint8)
    bounds = np.cumsum([0] + [len(r) for r in framed])
    got, _ = NumpyDecoder(spec, 1).decode(frames, bounds, path="f.tfrecord")
    want = decode_records(frames, bounds, spec, framed=True)
    assert got["a"].tolist() == [5, 9, 8, 0] == want.column("a").fill_null(0).to_pylist()
    assert got["x"].tolist() == [2.5, 0.0, 3.0, 0.0]
    assert got["b"].tolist() == [0, 0, 0, 0] and want.column("b").to_pylist()[3] is None
    bad = frame_record(example(entry(b"a", ints_packed(1)), entry(b"c", ints_packed(1, 2))))
    two = bytes(buf[: offsets[2]]) + bad
    frames = np.frombuffer(two, np.uint8)
    with pytest.raises(SchemaError, match=r"feature 'c' has 2 values.*record at byte offset "
                                          rf"{int(offsets[2])}\)"):
        NumpyDecoder(spec, 1).decode(frames, np.array([0, offsets[1], offsets[2], len(two)]),
                                     path="f.tfrecord")


def test_string_scalars_copied_while_indexing_are_the_strings_each_other_path_reads():
    """Strings of scalar string features are copied while the records are indexed, where
    every record holds its one short string; past the room for them they are gathered after,
    and a buffer with any other record takes the general path. All three give what the
    reference decoder reads, in the NumPy decoder (objects and bytes) and the Arrow one."""
    from tfspark.arrow.decode import STRING_ROOM, Decoder
    from tfspark.numpy.decode import NumpyDecoder
    from tfspark.wire.example_py import decode_with_spec

    rng = np.random.default_rng(3)
    n = 200

    def strings(lo, hi):
        return [rng.integers(0, 256, int(rng.integers(lo, hi)), np.uint8).tobytes()
                for _ in range(n)]

    spec = infer_spec(_schema(short=T.BinaryType(), wide=T.BinaryType(), long=T.BinaryType(),
                              some=T.BinaryType()))
    some = strings(0, 5)
    table = pa.table({"short": strings(0, 20),  # copied while indexing
                      "wide": [bytes([i % 251]) * (STRING_ROOM + 10) for i in range(n)],
                      "long": strings(0, 300),  # some past 127 bytes: the general path
                      "some": [None if i % 9 == 4 else v for i, v in enumerate(some)]})
    buf, offsets = encode_records(table, spec, framed=True)
    read = Decoder(spec).index(buf, offsets, framed=True).scalars
    assert read is not None
    row = {f.name: j for j, f in enumerate(read.features["string"])}
    assert read.string_fill[row["short"]] == sum(map(len, table["short"].to_pylist()))
    assert read.valid["string"][row["wide"]].all() and read.string_fill[row["wide"]] == -1
    assert not read.valid["string"][row["long"]].all()
    assert not read.valid["string"][row["some"]].all()

    frames = buf.tobytes()
    want = [decode_with_spec(frames[offsets[i] + 12:offsets[i + 1] - 4], spec,
                             fill_defaults=False) for i in range(n)]
    arrow = decode_records(buf, offsets, spec, framed=True)
    objects, _ = NumpyDecoder(spec, 1).decode(buf, offsets, path="f.tfrecord")
    raw, _ = NumpyDecoder(spec, 1, strings="bytes").decode(buf, offsets, path="f.tfrecord")
    for name in table.column_names:
        expect = [w[name] for w in want]
        assert arrow.column(name).to_pylist() == expect == table[name].to_pylist(), name
        filled = [b"" if v is None else v for v in expect]
        assert objects[name].tolist() == filled, name
        values, splits = raw[name].values, raw[name].row_splits
        assert [values[a:b].tobytes() for a, b in zip(splits[:-1], splits[1:])] == filled, name

    # A key twice in a record (the later entry wins, short or long), and records whose
    # string is not the one short string: each buffer is read as the reference reads it.
    one = infer_spec(_schema(s=T.BinaryType(), t=T.BinaryType()))
    long = b"L" * 200
    odd = [[example(entry(b"s", byte_list(b"ab")), entry(b"t", byte_list(b"x")),
                    entry(b"s", byte_list(b"cde")))],
           [example(entry(b"s", byte_list(b"ab")), entry(b"s", byte_list(long))),
            example(entry(b"s", byte_list(long)), entry(b"s", byte_list(b"z")))],
           [example(entry(b"s", byte_list(b"ab")), entry(b"t", byte_list()))]]
    for recs in odd:
        framed = [frame_record(r) for r in recs]
        data = np.frombuffer(b"".join(framed), np.uint8)
        bounds = np.cumsum([0] + [len(r) for r in framed])
        expect = [decode_with_spec(r, one, fill_defaults=False) for r in recs]
        got = decode_records(data, bounds, one, framed=True)
        numpy_got, _ = NumpyDecoder(one, 1).decode(data, bounds, path="f.tfrecord")
        for name in ("s", "t"):
            assert got.column(name).to_pylist() == [e[name] for e in expect], (recs, name)
            assert numpy_got[name].tolist() == [e[name] or b"" for e in expect], (recs, name)
    # A string copied, then the key again with ints: refused, naming the feature.
    rec = frame_record(example(entry(b"s", byte_list(b"q")), entry(b"s", ints_packed(1))))
    data, bounds = np.frombuffer(rec, np.uint8), np.array([0, len(rec)])
    with pytest.raises(SchemaError, match="feature 's' .* int64 list but the spec says string"):
        decode_records(data, bounds, one, framed=True)
    with pytest.raises(SchemaError, match="feature 's' .* int64 list but the spec says string"):
        NumpyDecoder(one, 1).decode(data, bounds, path="f.tfrecord")


def test_scalar_with_two_values_names_the_feature():
    rec = example(entry(b"a", ints_packed(1, 2)))
    with pytest.raises(SchemaError, match="feature 'a' has 2 values"):
        decode_records(*records(rec), SPEC)


def test_bad_ragged_lengths():
    spec = infer_spec(_schema(h=T.ArrayType(T.ArrayType(T.LongType()))))
    rec = example(entry(b"h/row_lengths", ints_packed(3)), entry(b"h/values",
                                                                      ints_packed(1)))
    with pytest.raises(CorruptRecordError, match="ragged feature 'h'"):
        decode_records(*records(rec), spec)


@pytest.mark.parametrize("data", [
    b"\x0a\x05\x0a\x03",  # length runs past the end
    b"\x0a",  # truncated length varint
    b"\x0b",  # wire type 3 (start group)
    b"\x0a\x03\x0a\x05\x00",  # nested length runs past its parent
    b"\x00\x00",  # field number 0
    b"\x80\x80\x80\x80\x10\x00",  # a tag over 32 bits (field number 2**29)
    b"\x0a\x0b" + b"\xff" * 11,  # an 11-byte varint
    example(entry(b"f", ld(2, ld(1, b"\x00\x00\x80")))),  # 3 bytes of packed floats
    # an 11-byte varint among packed int64s: in a list, and as a scalar's one value
    example(entry(b"l", ld(3, ld(1, varint(1) + b"\xff" * 10 + b"\x01" + varint(2))))),
    example(entry(b"a", ld(3, ld(1, b"\xff" * 10 + b"\x01")))),
    # a 10-byte varint past 64 bits (its last byte over 1): a field's, a list's, a scalar's
    b"\x08" + b"\x80" * 9 + b"\x02",
    example(entry(b"l", ld(3, ld(1, varint(1) + b"\xff" * 9 + b"\x02")))),
    example(entry(b"a", ld(3, b"\x08" + b"\xff" * 9 + b"\x03"))),
])
def test_malformed_bytes(data):
    with pytest.raises(CorruptRecordError, match=r"record at byte offset 7\b"):
        decode_records(*records(ld(5, b"12345"), data), SPEC, path="f.tfrecord")


def _canonical(value):
    """A value as both decoders give it, comparable: NaN equal to NaN, -0.0 unlike 0.0."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return "nan" if math.isnan(value) else (value, math.copysign(1.0, value))
    return value.encode() if isinstance(value, str) else value


def decode_and_compare(recs: list[bytes], spec=SPEC) -> bool:
    """Decode with the compiled decoder and with the pure-Python reference decoder
    (wire/example_py.py): both accept the records or both refuse them, and when they accept
    they give the same values. True if accepted."""
    try:
        batch = decode_records(*records(*recs), spec)
    except (CorruptRecordError, SchemaError) as e:
        refused = 0
        for rec in recs:
            try:
                decode_with_spec(rec, spec, fill_defaults=False)
            except (CorruptRecordError, SchemaError):
                refused += 1
        assert refused, f"the compiled decoder refused records the reference decodes: {e}"
        return False
    for i, rec in enumerate(recs):
        want = decode_with_spec(rec, spec, fill_defaults=False)
        got = batch.slice(i, 1).to_pylist()[0]
        assert _canonical(got) == _canonical(want), (rec, got, want)
    return True


@settings(max_examples=400, deadline=None)
@given(st.binary(min_size=10, max_size=10), st.integers(1, 10))
def test_a_varint_of_known_length_reads_as_the_byte_by_byte_reader_reads_it(data, n):
    """The branch-free varint reader (scalars while indexing) against get_varint: the same
    value where the n bytes are one varint, and a refusal wherever they are not."""
    from tfspark.wire.protobuf import get_varint, varint_of_length

    buf = np.frombuffer(data, np.uint8)
    value, end = get_varint(buf, 0, n)
    got, ok = varint_of_length(buf, 0, n)
    assert bool(ok) == (end == n), (data.hex(), n)
    if ok:
        assert got == value, (data.hex(), n)


def test_varints_of_every_length_read_branch_free():
    from tfspark.wire.protobuf import put_varint, varint_of_length

    for v in [0, 1, 127, 128, 2**14, 2**21 - 1, 2**35, 2**56 - 1, 2**56, 2**62, 2**63 - 1,
              -1, -(2**63), -12345]:
        buf = np.zeros(12, np.uint8)
        n = put_varint(buf, 0, np.int64(v))
        got, ok = varint_of_length(buf, 0, n)
        assert ok and got == v, (v, n)
        shorter = varint_of_length(buf, 0, n - 1)[1] if n > 1 else False
        longer = varint_of_length(buf, 0, n + 1)[1] if n < 10 else False
        assert not shorter and not longer, (v, n)
    # past 64 bits (a 10th byte over 1), a 10th byte that continues, a 9th that does not
    # where there are 10, and one that does where there are 9 (or an 8th where 8): refused
    for raw, n in [([0x80] * 9 + [0x02], 10), ([0x80] * 10, 10), ([0x80] * 8 + [0x01, 0x01], 10),
                   ([0x80] * 9 + [0x00], 9), ([0x80] * 8 + [0x00, 0x00], 8)]:
        buf = np.array(raw + [0, 0], np.uint8)
        assert not varint_of_length(buf, 0, n)[1], (raw, n)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**64 - 1), max_size=12), st.binary(max_size=4),
       st.binary(max_size=40))
@case([1, 2, 3], b"", b"\0" * 40)  # whole varints after the list's end: not its own
@case([-1, 300, -(2**63), 2**63 - 1, 0], b"", b"\x01" * 30)
@case([5, -1], b"\x80", b"\0" * 30)  # the list ends inside a varint
@case([7], b"\x80" * 11 + b"\x01", b"\0" * 30)  # a varint of 12 bytes
@case([7], b"\x80" * 9 + b"\x02", b"\0" * 30)  # a 10th byte past 64 bits
def test_packed_varints_read_as_the_byte_by_byte_reader_reads_them(values, junk, after):
    """get_varints (a packed Int64List's values, their last bytes found 8 at a time where the
    buffer has room for words) against get_varint one value after another: the same values,
    and a refusal wherever the bytes are not whole varints up to the end, whatever follows."""
    from tfspark.wire.protobuf import get_varint, get_varints, varint_bytes

    body = b"".join(varint_bytes(v % 2**64) for v in values) + junk
    buf = np.frombuffer(body + after, np.uint8)
    want: list[int] = []
    r, q = 0, len(body)
    while r < q:
        v, r = get_varint(buf, r, q)
        if r < 0:
            break
        want.append(int(v))
    out = np.zeros(len(body) + 1, np.int64)
    j = get_varints(buf, 0, q, out, 0)
    if r == q:
        assert j == len(want) and out[:j].tolist() == want, (body.hex(), after.hex())
    else:
        assert j == -1, (body.hex(), after.hex())


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_never_crash(data):
    decode_and_compare([data])


_FEATURES = st.sampled_from([b"a", b"f", b"s", b"l", b"zz", b""])
_LISTS = st.one_of(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3).map(lambda v: ints_packed(*v)),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3).map(lambda v: ints_unpacked(*v)),
    st.lists(st.floats(width=32), max_size=3).map(lambda v: floats_unpacked(*v)),
    st.lists(st.binary(max_size=3), max_size=3).map(lambda v: byte_list(*v)),
    st.just(b""))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_FEATURES, _LISTS, st.booleans()), max_size=6), st.binary(max_size=4))
def test_random_examples_decode_as_the_reference_does(entries, junk):
    rec = example(*[entry(k, v, value_first=f) for k, v, f in entries])
    decode_and_compare([rec])
    decode_and_compare([rec + junk])


def test_every_truncation_and_byte_flip_is_an_error_or_a_value():
    table = pa.table({"a": [7], "f": [[1.0, 2.0]], "s": ["hey"], "l": [[1, 300]]})
    buf, offsets = encode_records(table, SPEC)
    rec = buf.tobytes()
    accepted = 0
    for cut in range(len(rec)):
        accepted += decode_and_compare([rec[:cut]])
    for i in range(len(rec)):
        for bit in (1, 0x80):
            bad = bytearray(rec)
            bad[i] ^= bit
            accepted += decode_and_compare([bytes(bad)])
    assert accepted > 10  # the comparison ran on many decodable variants, not on none


# ---------------------------------------------------------------- framing and streaming

def test_frame_offsets_reports_crc_and_truncation_offsets():
    framed = b"".join(frame_record(b"x" * n) for n in (3, 0, 10))
    good = np.frombuffer(framed, np.uint8)
    assert frame_offsets(good).tolist() == [0, 19, 35, 61]
    bad = bytearray(framed)
    bad[19 + 12 + 0] ^= 1  # the second record's data CRC (it has no data)
    with pytest.raises(CorruptRecordError, match=r"f\.tfrecord: data CRC mismatch .* byte "
                                                 r"offset 119"):
        frame_offsets(np.frombuffer(bytes(bad), np.uint8), path="f.tfrecord", offset=100)
    assert frame_offsets(np.frombuffer(bytes(bad), np.uint8), verify=False).size == 4
    with pytest.raises(CorruptRecordError, match="truncated .* byte offset 35"):
        frame_offsets(good[:-1])
    bad = bytearray(framed)
    bad[3] ^= 4
    with pytest.raises(CorruptRecordError, match="length CRC mismatch .* offset 0"):
        frame_offsets(np.frombuffer(bytes(bad), np.uint8))


@pytest.mark.parametrize("chunk", [16, 40, 1000])
def test_stream_carries_partial_records_and_grows_for_big_ones(monkeypatch, chunk):
    import tfspark.wire.stream as reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(reader, "BATCH_RECORDS", 3)
    payloads = [bytes([i]) * (i * 7 % 50) for i in range(20)]
    stream = io.BytesIO(b"".join(frame_record(p) for p in payloads))
    got = []
    for col in stream_framed(stream, "s", True, lambda b, o, base: records_column(b, o)):
        assert len(col) <= 3
        got.extend(col.to_pylist())
    assert got == payloads
    stream = io.BytesIO(b"".join(frame_record(p) for p in payloads)[:-5])
    with pytest.raises(CorruptRecordError, match="truncated .* byte offset"):
        list(stream_framed(stream, "s", True, lambda b, o, base: records_column(b, o)))


def test_stream_reports_bad_gzip_with_name_and_offset():
    import gzip

    import pyarrow as pa

    data = gzip.compress(b"".join(frame_record(bytes([i]) * 50) for i in range(100)))
    for bad in (data[:len(data) // 2], data[:40] + bytes([data[40] ^ 0xFF]) + data[41:]):
        stream = pa.CompressedInputStream(pa.BufferReader(bad), "gzip")
        with pytest.raises(CorruptRecordError, match=r"f\.gz: bad or truncated gzip data after "
                                                     r"byte offset 0 of the uncompressed"):
            list(stream_framed(stream, "f.gz", True, lambda b, o, base: records_column(b, o),
                               gz=True))


# ---------------------------------------------------------------- inference rules

def test_inference_rules():
    def ex(**feats):
        return example(*[entry(k.encode(), v) for k, v in feats.items()])

    records = [
        ex(i=ints_packed(1), m=ints_packed(1), l=ints_packed(1, 2), s=byte_list(b"a"),
           b=byte_list(b"\xff"), e=byte_list(),
           **{"r/values": ints_packed(1, 2), "r/row_lengths": ints_packed(2)}),
        ex(i=ints_packed(2), m=floats_unpacked(0.5), l=ints_packed(), s=byte_list("é".encode()),
           o=floats_unpacked(1.0, 2.0),
           **{"r/values": ints_packed(), "r/row_lengths": ints_packed()}),
    ]
    stats, n = sample_stats(("f", r) for r in records)
    assert n == 2 and isinstance(stats["i"], KeyStats)
    schema = schema_from_stats(stats)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in schema.fields] == [
        ("b", "binary", True), ("e", "array<string>", True), ("i", "bigint", True),
        ("l", "array<bigint>", True), ("m", "float", True), ("o", "array<float>", True),
        ("r", "array<array<bigint>>", True), ("s", "string", True)]
    mixed = [ex(x=ints_packed(1)), ex(x=byte_list(b"a"))]
    with pytest.raises(SchemaError, match="'x' holds bytes in some records"):
        schema_from_stats(sample_stats(("f", r) for r in mixed)[0])


def test_pick_files_spreads_over_the_list():
    assert pick_files(list(range(100)), 5) == [0, 25, 50, 74, 99]
    assert pick_files([1, 2], 16) == [1, 2]
    assert pick_files(list(range(10)), 1) == [0]


# ---------------------------------------------------------------- property

_COLS = {
    "i": (T.LongType(), pa.int64(), st.integers(-(2**63), 2**63 - 1), lambda v: v),
    "f": (T.FloatType(), pa.float32(), st.floats(width=32, allow_nan=False), lambda v: v),
    "s": (T.StringType(), pa.string(), st.text(max_size=5), str.encode),
    "l": (T.ArrayType(T.LongType()), pa.list_(pa.int64()),
          st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4), lambda v: v),
    "b": (T.ArrayType(T.BinaryType()), pa.list_(pa.binary()),
          st.lists(st.binary(max_size=4), max_size=3), lambda v: v),
    "r": (T.ArrayType(T.ArrayType(T.FloatType())), pa.list_(pa.list_(pa.float32())),
          st.lists(st.lists(st.floats(width=32, allow_nan=False), max_size=3), max_size=3),
          lambda v: v),
}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_encode_decode_property(data):
    names = data.draw(st.lists(st.sampled_from(sorted(_COLS)), min_size=1, max_size=6,
                               unique=True))
    n = data.draw(st.integers(0, 12))
    cols = {k: data.draw(st.lists(st.none() | _COLS[k][2], min_size=n, max_size=n))
            for k in names}
    schema = _schema(**{k: _COLS[k][0] for k in names})
    table = pa.table({k: pa.array(v, _COLS[k][1]) for k, v in cols.items()})
    spec = infer_spec(schema)
    framed = data.draw(st.booleans())
    buf, offsets = encode_records(table, spec, framed=framed)
    batch = decode_records(buf, offsets, spec, framed=framed)
    for k in names:
        want = [None if v is None else _COLS[k][3](v) for v in cols[k]]
        assert batch.column(k).to_pylist() == want, k
    assert restore(batch, spec, schema).to_pylist() == table.to_pylist()
