"""recordType SequenceExample: written by the data source, write_tfrecords and the CLI, read by
TensorFlow (the oracle), spark.read, make_dataset, read_batches, verify and inspect.

The tables D2 and D5 follow the JVM connectors' SequenceExample conventions (peers.md: an
array<array<T>> column is a feature list, one Feature per step; every other column is context;
Integer/Long -> Int64List, Float/Double/Decimal -> FloatList, Boolean 0/1; strings and binary
-> BytesList; a null scalar omits the feature): D2 holds every element type as feature lists
and as context, D5 the nulls and empties the peers' users hit (a null list, an empty list, an
empty step, a null context value, a row with only context).
"""

from __future__ import annotations

import decimal
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyspark.sql import types as T

import tfspark
from tfspark.errors import EncodeError, OptionError, SchemaError

SEQ = "SequenceExample"

D2_SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("i32", T.IntegerType()),
    T.StructField("f64", T.DoubleType()),
    T.StructField("dec", T.DecimalType(6, 2)),
    T.StructField("flag", T.BooleanType()),
    T.StructField("s", T.StringType()),
    T.StructField("tags", T.ArrayType(T.StringType())),
    T.StructField("ints", T.ArrayType(T.ArrayType(T.IntegerType()))),
    T.StructField("longs", T.ArrayType(T.ArrayType(T.LongType()))),
    T.StructField("floats", T.ArrayType(T.ArrayType(T.FloatType()))),
    T.StructField("doubles", T.ArrayType(T.ArrayType(T.DoubleType()))),
    T.StructField("decs", T.ArrayType(T.ArrayType(T.DecimalType(6, 2)))),
    T.StructField("bools", T.ArrayType(T.ArrayType(T.BooleanType()))),
    T.StructField("strs", T.ArrayType(T.ArrayType(T.StringType()))),
    T.StructField("bins", T.ArrayType(T.ArrayType(T.BinaryType()))),
])
D2_ROWS = [
    (1, 7, 0.5, decimal.Decimal("1.25"), True, "ab", ["x", "y"],
     [[1, 2], [3]], [[2**40, -1]], [[0.5, 1.5], [-2.0]], [[1e10], [3.25]],
     [[decimal.Decimal("1.50")], [decimal.Decimal("-2.25"), decimal.Decimal("0.00")]],
     [[True, False], [True]], [["a", "bb"], ["ccc"]], [[b"\x00\xff"], [b"", b"z"]]),
    (2, -3, -1.25, decimal.Decimal("0.50"), False, "\u00e9\u4e2d", [],
     [[-5]], [[0], [9, 8, 7]], [[3.0]], [[-0.125]], [[decimal.Decimal("9.75")]],
     [[False]], [["\u00fc"]], [[b"\x80"]]),
]
D5_SCHEMA = T.StructType([
    T.StructField("id", T.LongType()),
    T.StructField("x", T.DoubleType()),
    T.StructField("tags", T.ArrayType(T.StringType())),
    T.StructField("clicks", T.ArrayType(T.ArrayType(T.LongType()))),
    T.StructField("words", T.ArrayType(T.ArrayType(T.StringType()))),
])
D5_ROWS = [
    (1, None, None, None, None),          # only context, and a null context value
    (2, 1.0, [], [], []),                 # empty feature lists: zero steps
    (3, None, ["a"], [[], [4], []], [[], ["w"]]),  # empty steps inside
    (4, 2.5, None, [[1, 2, 3]], None),
]



def _f32(x: Any) -> Any:
    if isinstance(x, list):
        return [_f32(v) for v in x]
    return None if x is None else float(np.float32(float(x)))


def _stored(field: T.StructField, value: Any) -> Any:
    """What the record holds for a source value (float32, bools 0/1, text as bytes)."""
    if value is None:
        return None
    dt = field.dataType
    while isinstance(dt, T.ArrayType):
        dt = dt.elementType

    def one(v: Any) -> Any:
        if isinstance(v, list):
            return [one(x) for x in v]
        if isinstance(dt, (T.FloatType, T.DoubleType, T.DecimalType)):
            return _f32(v)
        if isinstance(dt, T.BooleanType):
            return int(v)
        if isinstance(dt, T.StringType):
            return v.encode()
        if isinstance(dt, T.BinaryType):
            return bytes(v)
        return v

    return one(value)


def _read_sequences_with_tf(tf: Any, path: str) -> tuple[dict[str, list], list[str]]:
    """Every record of a data set, parsed by TensorFlow alone: TFRecordDataset, then
    parse_sequence_example on batches with a parsing spec built here from the manifest's
    feature kinds. Returns ({feature: per-row values}, feature-list names); absent context
    values as None (no default), absent feature lists as []."""
    manifest = json.loads(Path(path, "_tfspark.json").read_text())
    assert manifest["record_type"] == SEQ and manifest["spec"]["record_type"] == SEQ
    dtypes = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}
    context, sequence = {}, {}
    for f in manifest["spec"]["features"]:
        if f["kind"] == "sequence":
            sequence[f["name"]] = tf.io.RaggedFeature(dtypes[f["dtype"]])
        else:
            context[f["name"]] = tf.io.RaggedFeature(dtypes[f["dtype"]])
    files = [os.path.join(path, e["path"]) for e in manifest["files"]]
    out: dict[str, list] = {n: [] for n in [*context, *sequence]}
    comp = "GZIP" if manifest["compression"] == "gzip" else ""
    for batch in tf.data.TFRecordDataset(files, compression_type=comp).batch(3):
        ctx, seq, _ = tf.io.parse_sequence_example(batch, context_features=context,
                                                   sequence_features=sequence)
        for name, value in {**ctx, **seq}.items():
            out[name].extend(value.to_list())
    for f in manifest["spec"]["features"]:
        if f["kind"] == "fixed":  # ragged context of one value: a scalar, or absent
            out[f["name"]] = [v[0] if v else None for v in out[f["name"]]]
    return out, list(sequence)


def _expected(schema: T.StructType, rows: list[tuple], name: str) -> list:
    """Per-row values of column `name` as TF parses them (absent lists as [])."""
    field = schema[name]
    idx = schema.names.index(name)
    is_list = isinstance(field.dataType, T.ArrayType)
    return [_stored(field, r[idx]) if r[idx] is not None else ([] if is_list else None)
            for r in rows]


@pytest.mark.parametrize("table", ["D2", "D5"])
@pytest.mark.parametrize("writer", ["source", "write_tfrecords"])
def test_peer_vectors_round_trip_with_tensorflow_as_the_oracle(spark_tf, tf, tmp_path, table,
                                                               writer):
    schema, rows = (D2_SCHEMA, D2_ROWS) if table == "D2" else (D5_SCHEMA, D5_ROWS)
    df = spark_tf.createDataFrame(rows, schema).coalesce(1)
    out = str(tmp_path / "seq")
    if writer == "source":
        df.write.format("tfrecord").option("recordType", SEQ).mode("overwrite").save(out)
    else:
        tfspark.write_tfrecords(df, out, record_type=SEQ, backup_path=str(tmp_path / "bk"))
    parsed, lists = _read_sequences_with_tf(tf, out)
    two_d = [f.name for f in schema.fields if isinstance(f.dataType, T.ArrayType)
             and isinstance(f.dataType.elementType, T.ArrayType)]
    assert sorted(lists) == sorted(two_d)  # every array<array<T>>, and only those
    order = np.argsort([v for v in parsed["id"]])
    for name in schema.names:
        got = [parsed[name][i] for i in order]
        assert got == _expected(schema, rows, name), name
    # Spark reads them back as they were written (float32 precision, nulls restored).
    back = {r["id"]: r for r in spark_tf.read.format("tfrecord").load(out).collect()}
    assert len(back) == len(rows)
    for r in rows:
        got = back[r[0]]
        for field, value in zip(schema.fields, r):
            want = _stored(field, value)
            have = got[field.name]
            dt = field.dataType
            while isinstance(dt, T.ArrayType):
                dt = dt.elementType
            if isinstance(dt, T.StringType):
                want = None if want is None else value
            elif isinstance(dt, T.BooleanType):
                want = value
            elif isinstance(dt, T.DecimalType):
                want = value
            elif isinstance(dt, (T.FloatType, T.DoubleType)):
                have = _f32(have)
            assert have == want, (field.name, have, want)
    assert tfspark.verify(out).ok


def test_sequence_examples_written_by_tensorflow_read_into_spark(spark_tf, tf, tmp_path):
    """TensorFlow's own protos, no manifest: the schema is inferred by the peers' rules."""
    def record(i: int) -> bytes:
        ex = tf.train.SequenceExample()
        ex.context.feature["user"].int64_list.value.append(i)
        ex.context.feature["score"].float_list.value.append(i / 4)
        ex.context.feature["tags"].bytes_list.value.extend([b"a"] * i)
        # Keys named like tfspark's 2-D columns stay two context columns in a SequenceExample.
        ex.context.feature["pair/values"].int64_list.value.extend([i, i])
        ex.context.feature["pair/row_lengths"].int64_list.value.extend([1, 1])
        clicks = ex.feature_lists.feature_list["clicks"].feature
        for step in range(i):
            clicks.add().int64_list.value.extend(range(step + 1))
        mixed = ex.feature_lists.feature_list["mixed"].feature
        mixed.add().int64_list.value.append(i)
        mixed.add().float_list.value.append(0.5)
        ex.feature_lists.feature_list["words"].feature.add().bytes_list.value.append(
            f"w{i}".encode())
        ex.feature_lists.feature_list["blobs"].feature.add().bytes_list.value.append(b"\xff")
        if i == 2:
            ex.feature_lists.feature_list["clicks"].feature.add()  # an empty Feature: []
        return ex.SerializeToString()

    path = tmp_path / "tf.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(4):
            w.write(record(i))
    df = spark_tf.read.format("tfrecord").option("recordType", SEQ).load(str(path))
    assert df.schema.simpleString() == (
        "struct<blobs:array<array<binary>>,clicks:array<array<bigint>>,"
        "mixed:array<array<float>>,pair/row_lengths:array<bigint>,pair/values:array<bigint>,"
        "score:float,tags:array<string>,user:bigint,"
        "words:array<array<string>>>")
    rows = {r.user: r for r in df.collect()}
    assert rows[3].clicks == [[0], [0, 1], [0, 1, 2]]
    assert rows[2].clicks == [[0], [0, 1], []]
    assert rows[0].clicks == [] and rows[0].tags == []
    assert rows[1].mixed == [[1.0], [0.5]] and rows[1].words == [["w1"]]
    assert rows[1].blobs == [[bytearray(b"\xff")]] and rows[3].score == 0.75
    # Read as plain Examples, the feature lists are not silently dropped.
    with pytest.raises(Exception, match="recordType=SequenceExample"):
        spark_tf.read.format("tfrecord").load(str(path)).collect()


def test_a_key_that_is_context_and_feature_list_is_refused(spark_tf, tf, tmp_path):
    path = tmp_path / "clash.tfrecord"
    ex = tf.train.SequenceExample()
    ex.context.feature["k"].int64_list.value.append(1)
    other = tf.train.SequenceExample()
    other.feature_lists.feature_list["k"].feature.add().int64_list.value.append(1)
    with tf.io.TFRecordWriter(str(path)) as w:
        w.write(ex.SerializeToString())
        w.write(other.SerializeToString())
    with pytest.raises(Exception, match="'k' is a context feature in some records and a "
                                        "feature list in others"):
        spark_tf.read.format("tfrecord").option("recordType", SEQ).load(str(path))


def test_make_dataset_and_read_batches_yield_ragged_sequences(spark_tf, tf, tmp_path):
    rows = [(i, float(i % 2), [[j] * (j % 3) for j in range(i % 5)],
             [[f"s{i}"]] * (i % 3), [0.25 * i]) for i in range(40)]
    df = spark_tf.createDataFrame(rows, "id long, y double, clicks array<array<int>>, "
                                        "words array<array<string>>, w array<double>")
    out = str(tmp_path / "seq")
    r = tfspark.write_tfrecords(df.repartition(3), out, record_type=SEQ, label_cols=["y"],
                                backup_path=str(tmp_path / "bk"), stats=False)
    assert r.spec.record_type == SEQ
    # w holds one value in every row: stored FixedLen([1]) (detect_fixed_lengths)
    assert [(f.kind, f.shape) for f in r.spec.features] == [
        ("sequence", ()), ("fixed", ()), ("fixed", (1,)), ("sequence", ()), ("fixed", ())]
    seen: dict[int, Any] = {}
    ds = tfspark.make_dataset(out, batch_size=16, shuffle_buffer=32, seed=1)
    for x, y in ds:
        assert isinstance(x["clicks"], tf.RaggedTensor) and x["clicks"].ragged_rank == 2
        assert x["words"].shape.rank == 3 and x["w"].shape.rank == 2
        for i, c, wd, yy in zip(x["id"].numpy(), x["clicks"].to_list(), x["words"].to_list(),
                                y.numpy()):
            seen[int(i)] = (c, [[s.decode() for s in step] for step in wd], float(yy))
    assert seen == {i: (c, wd, y) for i, y, c, wd, _ in rows}
    inputs = tfspark.keras_inputs(r.spec)
    assert inputs["clicks"].shape == (None, None, None) and inputs["clicks"].ragged
    assert inputs["id"].shape == (None,) and "y" not in inputs
    got: dict[int, Any] = {}
    for x, _y in tfspark.read_batches(out, batch_size=16, shuffle_buffer=0):
        clicks = x["clicks"].to_list()
        for k, i in enumerate(x["id"].tolist()):
            got[i] = clicks[k]
    assert got == {i: c for i, _, c, _, _ in rows}


def test_bad_sequence_inputs_are_refused_clearly(spark_tf, tmp_path):
    out = str(tmp_path / "bad")
    null_step = spark_tf.createDataFrame([(1, [[1], None])], "id long, c array<array<long>>")
    with pytest.raises(Exception, match=r"column 'c' has a null step \(inner array\) inside an "
                                        r"array at row 0"):
        tfspark.write_tfrecords(null_step.coalesce(1), out, record_type=SEQ,
                                backup_path=str(tmp_path / "bk"))
    assert not os.path.exists(out) or "_tfspark.json" not in os.listdir(out)
    r = tfspark.write_tfrecords(null_step, out, record_type=SEQ, null_elements="drop",
                                backup_path=str(tmp_path / "bk2"))
    assert spark_tf.read.format("tfrecord").load(out).collect()[0].c == [[1]]
    with pytest.raises(OptionError, match="recordType 'SequenceExample' has no block layout"):
        tfspark.write_tfrecords(null_step, str(tmp_path / "b"), record_type=SEQ,
                                rows_per_record=64)
    with pytest.raises(OptionError, match="record_type"):
        tfspark.write_tfrecords(null_step, str(tmp_path / "b"), record_type="Sequence")
    with pytest.raises(Exception, match="recordType='SequenceExample'"):  # append, other type
        tfspark.write_tfrecords(null_step, out, mode="append", null_elements="drop",
                                backup_path=str(tmp_path / "bk3"))
    with pytest.raises(SchemaError, match="a feature list .* a fixed shape is only for"):
        tfspark.infer_spec(null_step.schema, shapes={"c": [1]}, record_type=SEQ)
    with pytest.raises(SchemaError, match="parse_sequence_example"):
        tfspark.tf.parsing_spec(r.spec)
    with pytest.raises(Exception, match="spec is for SequenceExample records"):
        null_step.write.format("tfrecord").mode("overwrite").option(
            "spec", r.spec.to_json()).save(str(tmp_path / "c"))


def test_feature_list_values_that_do_not_fit_are_named():
    import pyarrow as pa

    from tfspark.arrow.encode import encode_batch
    spec = tfspark.FeatureSpec((tfspark.Feature("c", ("c",), "sequence", "float32", "float",
                                                "array<array<double>>"),), record_type=SEQ)
    batch = pa.RecordBatch.from_pydict({"c": [[[1.0]], [[2.0], [1e39]]]})
    with pytest.raises(EncodeError, match="'c'.*row 1"):
        encode_batch(batch, spec)


@pytest.mark.slow  # the CLI in processes of its own: a JVM each
def test_cli_export_writes_sequence_examples_and_inspect_shows_them(spark_tf, tmp_path):
    src = tmp_path / "src.parquet"
    spark_tf.createDataFrame(D5_ROWS, D5_SCHEMA).write.parquet(str(src))
    out = tmp_path / "out"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    run = subprocess.run([sys.executable, "-m", "tfspark.cli", "export", "--source", str(src),
                          "--output", str(out), "--record-type", SEQ,
                          "--backup-path", str(tmp_path / "bk"), "--no-stats"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    shown = subprocess.run([sys.executable, "-m", "tfspark.cli", "inspect", str(out)],
                           capture_output=True, text=True, env=env, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "4 SequenceExample records" in shown.stdout
    assert "clicks   sequence" in shown.stdout and "[[], [4], []]" in shown.stdout
    checked = subprocess.run([sys.executable, "-m", "tfspark.cli", "verify", str(out)],
                             capture_output=True, text=True, env=env, timeout=300)
    assert checked.returncode == 0 and "OK" in checked.stdout


def test_random_sequences_match_tensorflow_protos_both_ways(tf):
    """Random rows (nulls, empty lists, empty steps, long strings, negative and huge ints):
    our bytes parse to the proto TensorFlow builds from the same rows, and TensorFlow's
    serialization decodes to the rows."""
    import pyarrow as pa

    from tfspark.arrow.decode import decode_records
    from tfspark.arrow.encode import encode_batch
    rng = np.random.default_rng(5)

    def steps(make: Any) -> Any:
        if rng.random() < 0.15:
            return None
        return [[make() for _ in range(rng.integers(0, 4))] for _ in range(rng.integers(0, 5))]

    n = 300
    data = {
        "i": [steps(lambda: int(rng.integers(-2**63, 2**63, dtype=np.int64))) for _ in range(n)],
        "f": [steps(lambda: float(np.float32(rng.normal() * 1e3))) for _ in range(n)],
        "s": [steps(lambda: bytes(rng.integers(0, 256, rng.integers(0, 300)).astype(np.uint8)))
              for _ in range(n)],
        "c": [None if rng.random() < 0.2 else int(rng.integers(-5, 5)) for _ in range(n)],
    }
    batch = pa.RecordBatch.from_pydict(data, schema=pa.schema([
        ("i", pa.list_(pa.list_(pa.int64()))), ("f", pa.list_(pa.list_(pa.float32()))),
        ("s", pa.list_(pa.list_(pa.binary()))), ("c", pa.int64())]))
    F = tfspark.Feature
    spec = tfspark.FeatureSpec((
        F("c", ("c",), "fixed", "int64", "int", "bigint", default=0),
        F("f", ("f",), "sequence", "float32", "float", "array<array<float>>"),
        F("i", ("i",), "sequence", "int64", "int", "array<array<bigint>>"),
        F("s", ("s",), "sequence", "string", "bytes", "array<array<binary>>")),
        record_type=SEQ)
    ours = encode_batch(batch, spec)
    theirs = []
    for k in range(n):
        ex = tf.train.SequenceExample()
        if data["c"][k] is not None:
            ex.context.feature["c"].int64_list.value.append(data["c"][k])
        for key, kind in (("i", "int64_list"), ("f", "float_list"), ("s", "bytes_list")):
            if data[key][k] is None:
                continue
            fl = ex.feature_lists.feature_list[key]
            fl.SetInParent()
            for step in data[key][k]:
                getattr(fl.feature.add(), kind).value.extend(step)
        assert tf.train.SequenceExample.FromString(ours[k]) == ex, k
        theirs.append(ex.SerializeToString())
    buf = np.frombuffer(b"".join(theirs), np.uint8)
    offsets = np.cumsum([0] + [len(t) for t in theirs])
    got = decode_records(buf, offsets, spec).to_pydict()
    assert got["i"] == data["i"] and got["f"] == data["f"] and got["c"] == data["c"]
    assert got["s"] == data["s"]


def test_a_step_that_does_not_fit_names_its_record(tf):
    """An error in a step is reported at the record holding it (records without steps
    between)."""
    from tfspark.arrow.decode import decode_records
    spec = tfspark.FeatureSpec((tfspark.Feature("c", ("c",), "sequence", "int64", "int",
                                                "array<array<bigint>>"),), record_type=SEQ)
    records = []
    for i in range(3):
        ex = tf.train.SequenceExample()
        steps = ex.feature_lists.feature_list["c"]
        if i != 1:
            steps.feature.add().int64_list.value.append(1)
        if i == 2:
            steps.feature.add().bytes_list.value.append(b"x")
        records.append(ex.SerializeToString())
    buf = np.frombuffer(b"".join(records), np.uint8)
    offsets = np.cumsum([0] + [len(r) for r in records])
    with pytest.raises(SchemaError, match=rf"holds a bytes list but the spec says int64.*"
                                          rf"record at byte offset {offsets[2]}\)"):
        decode_records(buf, offsets, spec)


@pytest.mark.spark
@pytest.mark.tf
def test_sequence_examples_are_not_read_as_their_context_alone(spark_tf, tf, tmp_path):
    """TensorFlow's SequenceExample read as an Example silently lost its feature_lists."""
    ex = tf.train.SequenceExample()
    ex.context.feature["user"].int64_list.value.append(7)
    steps = ex.feature_lists.feature_list["clicks"].feature
    steps.add().int64_list.value.extend([1, 2])
    path = tmp_path / "seq.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        w.write(ex.SerializeToString())
    with pytest.raises(Exception, match="SequenceExample"):
        spark_tf.read.format("tfrecord").load(str(path)).collect()
    spec = tfspark.infer_spec(spark_tf.createDataFrame([(1,)], "user long").schema)
    with pytest.raises(Exception, match="SequenceExample"):
        spark_tf.read.format("tfrecord").schema("user long").load(str(path)).collect()
    import numpy as np

    from tfspark.arrow.decode import decode_records
    from tfspark.wire.tfrecord import frame_offsets
    buf = np.frombuffer(path.read_bytes(), np.uint8)
    with pytest.raises(tfspark.SchemaError, match="SequenceExample"):
        decode_records(buf, frame_offsets(buf), spec, framed=True)

