"""spark.read.format("tfrecord"): TF-written files (inferred and user schemas), round trips of
every type through write_tfrecords and the data source, manifests, splits, ByteArray,
corruption, and inference sampling."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T

import tfspark
from tfspark.arrow.encode import encode_records
from tfspark.wire.stream import RecordWriter
from tfspark.wire.tfrecord import frame_offsets

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def read(spark):
    tfspark.register(spark)
    return lambda path, **opts: spark.read.format("tfrecord").options(**opts).load(str(path))


def f32(x):
    return None if x is None else float(np.float32(x))


# ---------------------------------------------------------------- TF-written files

def _tf_records(tf):
    """Examples as TF writes them: scalars and lists, missing keys, non-UTF-8 bytes."""
    def feat(kind, values):
        if kind == "int":
            return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        if kind == "float":
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))

    rows = []
    for i in range(30):
        f = {"id": ("int", [i]), "tags": ("bytes", [f"t{j}é".encode() for j in range(i % 3)]),
             "blob": ("bytes", [bytes([255, i])]), "vec": ("float", [i, 0.5, -1.25]),
             "mixed": ("int", [i]) if i % 2 else ("float", [i + 0.5]),
             "empty": ("int", [])}
        if i % 3:
            f["score"] = ("float", [i / 7])
        if i % 4 == 0:
            f["opt"] = ("int", [-i, 2**40])
        example = tf.train.Example(features=tf.train.Features(
            feature={k: feat(*v) for k, v in f.items()}))
        rows.append((f, example.SerializeToString()))
    return rows


def _write_tf(tf, path, records, gzip=False):
    opts = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else "")
    with tf.io.TFRecordWriter(str(path), opts) as w:
        for r in records:
            w.write(r)


@pytest.fixture(scope="module")
def tf_dir(tf, tmp_path_factory):
    d = tmp_path_factory.mktemp("tfwritten")
    rows = _tf_records(tf)
    _write_tf(tf, d / "a.tfrecord", [r for _, r in rows[:15]])
    _write_tf(tf, d / "b.tfrecord.gz", [r for _, r in rows[15:]], gzip=True)
    (d / "_SUCCESS").write_bytes(b"")
    (d / ".b.tfrecord.crc").write_bytes(b"junk")
    (d / "_tmp.tfrecord").write_bytes(b"junk")
    return d, [f for f, _ in rows]


@pytest.mark.tf
def test_tf_written_files_inferred(read, tf_dir):
    d, rows = tf_dir
    df = read(d)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields] == [
        ("blob", "binary", True), ("empty", "array<string>", True), ("id", "bigint", True),
        ("mixed", "float", True), ("opt", "array<bigint>", True), ("score", "float", True),
        ("tags", "array<string>", True), ("vec", "array<float>", True)]
    got = {r.id: r for r in df.collect()}
    assert sorted(got) == list(range(30))
    assert read(d / "b.tfrecord.gz").count() == 15  # one file, gzip found by its magic bytes
    for f in rows:
        g = got[f["id"][1][0]]
        assert g.blob == bytes(f["blob"][1][0])
        assert g.tags == [t.decode() for t in f["tags"][1]]
        assert g.vec == [f32(v) for v in f["vec"][1]]
        assert g.mixed == f32(f["mixed"][1][0])
        assert g.score == (f32(f["score"][1][0]) if "score" in f else None)
        assert g.opt == (f["opt"][1] if "opt" in f else None)
        assert g.empty == []


@pytest.mark.tf
def test_tf_written_files_user_schema(read, spark, tf_dir):
    d, rows = tf_dir
    df = spark.read.format("tfrecord").schema(
        "id int, score double, vec array<double>, tags array<string>, blob binary, "
        "nothere string, mixed double").load(str(d))
    got = {r.id: r for r in df.collect()}
    assert df.schema.simpleString() == ("struct<id:int,score:double,vec:array<double>,"
                                        "tags:array<string>,blob:binary,nothere:string,"
                                        "mixed:double>")
    for f in rows:
        g = got[f["id"][1][0]]
        assert g.score == (f32(f["score"][1][0]) if "score" in f else None)
        assert g.vec == [f32(v) for v in f["vec"][1]] and g.nothere is None
    with pytest.raises(Exception, match="feature 'score' .*holds a float list but the spec "
                                        "says int64"):
        spark.read.format("tfrecord").schema("score long").load(str(d)).collect()
    with pytest.raises(Exception, match="column 'blob'.*read it as binary"):
        spark.read.format("tfrecord").schema("blob string").load(str(d)).collect()


# ---------------------------------------------------------------- round trips

def _vector_udt():
    from pyspark.ml.linalg import VectorUDT

    return VectorUDT()


def _every_type(spark):
    from pyspark.ml.linalg import Vectors

    schema = T.StructType([
        T.StructField("id", T.LongType(), False), T.StructField("flag", T.BooleanType()),
        T.StructField("b8", T.ByteType()), T.StructField("s16", T.ShortType()),
        T.StructField("i", T.IntegerType(), False), T.StructField("f", T.FloatType()),
        T.StructField("d", T.DoubleType()), T.StructField("dec", T.DecimalType(12, 3)),
        T.StructField("p", T.StringType()),
        T.StructField("txt", T.StringType()), T.StructField("bin", T.BinaryType()),
        T.StructField("day", T.DateType()), T.StructField("ts", T.TimestampType()),
        T.StructField("ntz", T.TimestampNTZType()),
        T.StructField("arr", T.ArrayType(T.IntegerType(), False)),
        T.StructField("emb", T.ArrayType(T.DoubleType())),
        T.StructField("rag", T.ArrayType(T.ArrayType(T.StringType(), False))),
        T.StructField("st", T.StructType([T.StructField("a", T.IntegerType()),
                                          T.StructField("b", T.DateType(), False)])),
        T.StructField("vec", _vector_udt()), T.StructField("q", T.IntegerType()),
    ])
    rows = []
    for k in range(48):
        n = k % 6 == 5  # a row of nulls
        rows.append((
            k, None if n else k % 2 == 0, None if n else k - 100, None if n else -32768 + k,
            k * 1000, None if n else k / 3, None if n else (-1.0) ** k * 1e10 / (k + 1),
            None if n else decimal.Decimal(f"{k}.125"), [None, "a/b", "x=y"][k % 3],
            None if n else f"té{k}\u4e2d", None if n else bytes([0, k, 255]),
            None if n else dt.date(1900 + k, 2, 28),
            None if n else dt.datetime(1950 + k, 1, 1, 12, 0, 0, 123456),
            None if n else dt.datetime(2000, 1, 1 + k % 28, 0, 0, k),
            None if n else list(range(k % 4)), None if n else [k / 10, -0.0],
            None if n else [["a" * j] * j for j in range(k % 3)],
            None if n else (None if k % 4 else k, dt.date(2020, 1, 1 + k % 28)),
            None if n else (Vectors.dense([k, 1.0]) if k % 2 else
                            Vectors.sparse(2, [1], [float(k)])),
            k % 3,
        ))
    return spark.createDataFrame(rows, schema)


def _normal(v):
    """Values as float32 holds them: floats and decimals rounded, vectors as their arrays."""
    if hasattr(v, "toArray"):
        return [f32(x) for x in v.toArray()]
    if isinstance(v, (float, decimal.Decimal)):
        return f32(float(v))
    if isinstance(v, (list, tuple)):
        return [_normal(x) for x in v]
    if hasattr(v, "asDict"):
        return {k: _normal(x) for k, x in v.asDict().items()}
    return v


def _same_rows(got, want):
    got = sorted(got.collect(), key=lambda r: r.id)
    want = sorted(want.collect(), key=lambda r: r.id)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert _normal(g) == _normal(w), (g, w)


@pytest.mark.parametrize("how", ["workflow", "datasource", "workflow-blocks",
                                 "datasource-blocks"])
def test_round_trip_every_type_partitioned(read, spark, tmp_path, how):
    """Every type, nulls in every nullable column; the block layouts restore the nulls
    exactly (blocks of 4 rows; partitions of ~5: full and short blocks)."""
    df = _every_type(spark)
    out = tmp_path / how
    block = 4 if how.endswith("-blocks") else 1
    if how.startswith("workflow"):
        tfspark.write_tfrecords(df, str(out), partition_by=["p", "q"], target_file_bytes=1500,
                                rows_per_record=block)
    else:
        df.write.format("tfrecord").mode("overwrite").option("partitionBy", "p,q") \
            .option("compression", "gzip").option("rowsPerRecord", block).save(str(out))
    back = read(out)
    assert back.schema == df.schema
    _same_rows(back, df)
    assert back.filter("p is null").count() == 16


def test_partition_columns_keep_their_types(read, spark, tmp_path):
    df = spark.sql("select id, date_add(date'2024-02-28', cast(id % 3 as int)) as day, "
                   "id % 2 = 0 as flag, cast(id % 4 as smallint) as s, "
                   "if(id % 5 = 0, null, 'v') as txt from range(40)")
    out = tmp_path / "typed"
    df.write.format("tfrecord").mode("overwrite") \
        .option("partitionBy", "day,flag,s,txt").save(str(out))
    back = read(out)
    assert back.schema == df.schema
    _same_rows(back, df)


def test_manifest_files_only(read, spark, tmp_path):
    out = tmp_path / "m"
    spark.range(100).write.format("tfrecord").mode("overwrite").save(str(out))
    part = next(p for p in os.listdir(out) if p.startswith("part-"))
    shutil.copy(out / part, out / "part-99999-stray.tfrecord")  # e.g. a failed attempt
    (out / "other.tfrecord").write_bytes(b"not a record")
    assert read(out).count() == 100
    assert sorted(r.id for r in read(out).collect()) == list(range(100))


def test_empty_data_set(read, spark, tmp_path):
    out = tmp_path / "empty"
    spark.range(0).write.format("tfrecord").mode("overwrite").save(str(out))
    df = read(out)
    assert df.schema.simpleString() == "struct<id:bigint>" and df.count() == 0


def test_splits(read, spark, tmp_path):
    out = tmp_path / "splits"
    tfspark.write_tfrecords(spark.range(200), str(out), split={"train": 0.7, "test": 0.3},
                            split_key="id")
    ids = {s: sorted(r.id for r in read(out, split=s).collect()) for s in ("train", "test")}
    assert sorted(ids["train"] + ids["test"]) == list(range(200)) and ids["test"]
    assert sorted(r.id for r in read(out).collect()) == list(range(200))
    assert sorted(r.id for r in read(out / "train").collect()) == ids["train"]
    assert read(out).schema.names == ["id"]
    with pytest.raises(Exception, match=r"no such split in .*\['test', 'train'\]"):
        read(out, split="dev").collect()


@pytest.mark.tf
def test_bytearray(read, spark, tf, tmp_path):
    out = tmp_path / "raw"
    payloads = [bytes([i % 256]) * (i % 7) + b"\x00end" for i in range(50)]
    spark.createDataFrame([(p,) for p in payloads], "b binary").write.format("tfrecord") \
        .mode("overwrite").option("recordType", "ByteArray").option("compression", "gzip") \
        .save(str(out))
    df = read(out)
    assert df.schema.simpleString() == "struct<value:binary>"
    assert sorted(r.value for r in df.collect()) == sorted(payloads)
    plain = tmp_path / "plain"
    plain.mkdir()
    _write_tf(tf, plain / "x.tfrecord", payloads[:5])
    got = read(plain, recordType="ByteArray").collect()
    assert [r.value for r in got] == payloads[:5]


def test_corrupt_file_names_file_and_offset(read, spark, tmp_path):
    out = tmp_path / "bad"
    spark.range(1000).repartition(1).write.format("tfrecord").mode("overwrite").save(str(out))
    manifest = json.loads((out / "_tfspark.json").read_text())
    path = out / manifest["files"][0]["path"]
    raw = bytearray(path.read_bytes())
    offsets = frame_offsets(np.frombuffer(bytes(raw), np.uint8))
    raw[int(offsets[501]) - 5] ^= 0x10  # the last byte of record 500's id varint
    path.write_bytes(bytes(raw))
    with pytest.raises(Exception, match=rf"{path.name}: data CRC mismatch .* byte offset "
                                        rf"{int(offsets[500])}"):
        read(out).collect()
    ids = sorted(r.id for r in read(out, verify="false").collect())
    assert len(ids) == 1000 and 500 not in ids  # unchecked, the flipped value comes through
    raw[int(offsets[300]) + 14] ^= 0x10  # an entry tag: record 300 loses its id
    path.write_bytes(bytes(raw))
    with pytest.raises(Exception, match="column 'id' is not nullable in the schema"):
        read(out, verify="false").collect()


def test_inference_samples_several_files(read, tmp_path):
    d = tmp_path / "many"
    d.mkdir()
    for k in range(20):
        cols = {"id": pa.array([k], pa.int64())}
        if k == 19:
            cols["late"] = pa.array([1.5], pa.float32())
        schema = T.StructType([T.StructField(n, T.LongType() if n == "id" else T.FloatType())
                               for n in cols])
        buf, _ = encode_records(pa.table(cols), tfspark.infer_spec(schema), framed=True)
        with open(d / f"part-{k:03d}.tfrecord", "wb") as f:
            RecordWriter(f).write_framed(buf)
    df = read(d)
    assert df.schema.names == ["id", "late"]
    assert sorted((r.id, r.late) for r in df.collect())[-2:] == [(18, None), (19, 1.5)]
    assert read(d, schemaSampleFiles="1").schema.names == ["id"]


def test_unknown_option_lists_the_allowed_ones(read, tmp_path):
    with pytest.raises(Exception, match="unknown tfrecord read option.*'bogus'.*schemasample"):
        read(tmp_path, bogus="1")



def _tf_file(tf, path: Path, rows: list[dict]) -> None:
    with tf.io.TFRecordWriter(str(path)) as w:
        for row in rows:
            feats = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
                     if isinstance(v[0], int) else
                     tf.train.Feature(float_list=tf.train.FloatList(value=v))
                     for k, v in row.items()}
            w.write(tf.train.Example(features=tf.train.Features(feature=feats))
                    .SerializeToString())


@pytest.mark.spark
@pytest.mark.tf
def test_inference_covers_every_file_and_refuses_keys_it_missed(spark_tf, tf, tmp_path):
    """Keys first seen in the 20th file (the sample used to be 16 files), and a key first seen
    after the sampled records of its file: the first is in the schema, the second fails the
    read naming itself instead of vanishing."""
    data = tmp_path / "foreign"
    data.mkdir()
    for k in range(20):
        rows = [{"id": [k * 10 + i]} for i in range(10)]
        if k == 19:
            rows[3]["late_file"] = [1.5]
        _tf_file(tf, data / f"f{k:02d}.tfrecord", rows)
    schema = spark_tf.read.format("tfrecord").load(str(data)).schema
    assert sorted(schema.names) == ["id", "late_file"]
    late = tmp_path / "late"
    late.mkdir()
    _tf_file(tf, late / "a.tfrecord", [{"id": [i]} for i in range(50)] + [{"id": [50],
                                                                            "late_key": [7]}])
    reader = spark_tf.read.format("tfrecord").option("schemaSampleRecords", "20")
    with pytest.raises(Exception, match=r"feature 'late_key' is not in the schema; the schema "
                                        r"was inferred from a sample that missed it"):
        reader.load(str(late)).collect()
    assert spark_tf.read.format("tfrecord").load(str(late)).count() == 51  # sample covers it
    # A schema given by the user picks columns: other keys are skipped, as always.
    assert spark_tf.read.format("tfrecord").schema("id long").load(str(late)).count() == 51


@pytest.mark.spark
def test_write_tfrecords_registers_the_source(spark, tmp_path):
    fresh = spark.newSession()  # a session nothing registered the source in
    out = str(tmp_path / "d")
    tfspark.write_tfrecords(fresh.range(7), out, stats=False)
    assert fresh.read.format("tfrecord").load(out).count() == 7


@pytest.mark.spark
def test_data_source_errors_show_tfsparks_line_first(spark, tmp_path):
    """conf/spark-defaults.conf (and the CLI's session) hide the Python traceback Spark puts
    before a data source's error: the user reads tfspark's own line."""
    tfspark.register(spark)
    with pytest.raises(Exception) as info:
        spark.range(3).write.format("tfrecord").mode("overwrite").option("bogus", "1") \
            .save(str(tmp_path / "x"))
    text = str(info.value)
    assert "Traceback" not in text
    assert "Python data source writer: tfspark.errors.OptionError: unknown tfrecord " \
           "option(s) ['bogus']" in text

