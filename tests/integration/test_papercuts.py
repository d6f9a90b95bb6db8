"""What a new user hit (issue 22, papercuts): each a clear one-line error or a documented
behaviour, with nothing written."""

from __future__ import annotations

import os
import re

import pandas as pd
import pytest

import tfspark
from tfspark.errors import CorruptRecordError, EncodeError, OptionError, SchemaError

pytestmark = pytest.mark.spark


def test_a_split_without_rows_is_a_split(spark, tmp_path, tf):
    out = str(tmp_path / "ds")
    r = tfspark.write_tfrecords(spark.range(50), out, split={"train": 1.0, "test": 0.0},
                                split_key="id")
    assert (r.splits["test"].rows, r.splits["test"].files, r.splits["test"].bytes) == (0, 0, 0)
    assert r.splits["train"].rows == 50
    assert tfspark.read_manifest(out).splits == ("test", "train")
    reader = tfspark.read_batches(out, 8, split="test")
    assert len(reader) == 0 and list(reader) == []
    assert list(tfspark.make_dataset(out, 8, split="test", label_cols=[])) == []
    assert spark.read.format("tfrecord").option("split", "test").load(out).count() == 0
    report = tfspark.verify(out)
    assert report.ok, report.render()


def test_a_label_cannot_be_a_partition_column(spark, tmp_path):
    df = spark.range(10).selectExpr("id", "id % 2 as y")
    with pytest.raises(OptionError, match=r"\['y'\] are both labels and partition columns"):
        tfspark.write_tfrecords(df, str(tmp_path / "a"), label_cols=["y"], partition_by=["y"])
    tfspark.register(spark)
    with pytest.raises(Exception, match=r"\['y'\] are both labels and partition columns"):
        df.write.format("tfrecord").mode("overwrite").option("labelCols", "y") \
            .option("partitionBy", "y").save(str(tmp_path / "b"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_wrong_argument_types_are_named(spark, tmp_path):
    spec = tfspark.infer_spec(spark.range(1).schema)
    with pytest.raises(OptionError, match=r"needs a Spark DataFrame, got DataFrame; make one "
                                          r"with spark.createDataFrame"):
        tfspark.write_tfrecords(pd.DataFrame({"a": [1]}), str(tmp_path / "p"))
    with pytest.raises(EncodeError, match="needs a pyarrow RecordBatch or Table, got list"):
        tfspark.arrow.encode_batch([1, 2], spec)
    with pytest.raises(OptionError, match="register needs a SparkSession .*got NoneType"):
        tfspark.register(None)
    out = str(tmp_path / "d")
    tfspark.write_tfrecords(spark.range(5), out, stats=False)
    for read in (tfspark.read_batches, tfspark.make_dataset):
        with pytest.raises(OptionError, match="seed must be an int or None, got 'x'"):
            read(out, 2, seed="x")
    assert not (tmp_path / "p").exists()


def test_keras_inputs_takes_a_spec_or_a_path(spark, tmp_path, tf):
    out = str(tmp_path / "d")
    tfspark.write_tfrecords(spark.range(5).selectExpr("id", "id * 1.5 as x"), out,
                            label_cols=["id"], stats=False)
    assert list(tfspark.keras_inputs(out)) == ["x"]
    with pytest.raises(tfspark.ManifestError, match=r"'x' does not exist: check the path"):
        tfspark.keras_inputs("x")
    with pytest.raises(SchemaError, match="needs a tfspark.FeatureSpec or a data set's path, "
                                          "got int"):
        tfspark.keras_inputs(3)
    with pytest.raises(SchemaError, match=r"names \['y'\] are not features of the data set; "
                                          r"its features are \['id', 'x'\]"):
        tfspark.keras_inputs(out, names=["x", "y"])


def test_write_tfrecords_registers_the_source(spark, tmp_path):
    fresh = spark.newSession()  # a session nothing registered the source in
    out = str(tmp_path / "d")
    tfspark.write_tfrecords(fresh.range(7), out, stats=False)
    assert fresh.read.format("tfrecord").load(out).count() == 7


def test_gzip_damage_is_named_at_its_record_by_every_reader(spark, tmp_path, tf):
    out = str(tmp_path / "d")
    tfspark.write_tfrecords(spark.range(0, 20_000, numPartitions=1).selectExpr(
        "id", "concat('value ', id) as s"), out, compression="gzip", stats=False)
    name = os.path.join(out, next(f for f in os.listdir(out) if f.endswith(".gz")))
    data = bytearray(open(name, "rb").read())  # damage the compressed stream in the middle
    data[len(data) // 2] ^= 0xFF
    open(name, "wb").write(bytes(data))
    report = tfspark.verify(out)
    offset = int(re.search(r"byte offset (\d+)", report.problems[0]).group(1))
    assert offset > 0
    with pytest.raises(CorruptRecordError, match=f"byte offset {offset}"):
        list(tfspark.read_batches(out, 1000))
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"byte offset {offset}"):
        list(tfspark.make_dataset(out, 1000))


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


def test_a_description_is_kept_and_shown(spark, tmp_path):
    """The setting added as one table entry (issue 23): kept by both engines, kept by an
    append that gives none, shown by tfspark inspect."""
    from tfspark.cli.inspect import describe

    out = str(tmp_path / "d")
    df = spark.range(10)
    tfspark.write_tfrecords(df, out, description="ids, first cut", stats=False)
    df.write.format("tfrecord").mode("append").save(out)
    assert tfspark.read_manifest(out).description == "ids, first cut"
    assert "description: ids, first cut" in describe(out)
    other = str(tmp_path / "e")
    df.write.format("tfrecord").option("description", "via the source").mode("append") \
        .save(other)
    assert tfspark.read_manifest(other).description == "via the source"
