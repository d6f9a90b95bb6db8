"""Defects a new user found (issue 16), each with the test that failed before its fix: paths with
spaces, % and #; decimals float32 cannot hold; row numbers in errors; append with another
nullability; a struct whose leaves are null; duplicate names; relative paths after chdir."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

import tfspark
from tfspark.errors import EncodeError
from tfspark.store.integrity import verify

pytestmark = [pytest.mark.spark, pytest.mark.tf]
ROOT = Path(__file__).resolve().parents[2]
ODD = "with space %20 #hash"  # what broke: the backup's files came back as escaped URIs


@pytest.fixture(scope="module")
def spark_tf(spark):
    tfspark.register(spark)
    return spark


def _count_tf(path: str, split: str | None = None) -> int:
    ds = tfspark.make_dataset(path, 64, split=split, label_cols=[], shuffle_buffer=0)
    return sum(int(b["id"].shape[0]) for b in ds)


def test_write_tfrecords_takes_any_local_path(spark_tf, tmp_path):
    from pyspark.sql import functions as F

    out = tmp_path / ODD / "data"
    df = spark_tf.range(300).select("id", (F.col("id") * 0.5).alias("x"))
    r = tfspark.write_tfrecords(df, str(out), split={"train": 0.5, "test": 0.5}, split_key="id")
    assert r.rows == 300 and verify(str(out)).ok
    assert _count_tf(str(out), "train") + _count_tf(str(out), "test") == 300
    assert spark_tf.read.format("tfrecord").option("split", "train").load(str(out)).count() \
        == r.splits["train"].rows
    assert spark_tf.read.parquet(str(out / "_backup")).count() == 300
    appended = tfspark.write_tfrecords(df, str(out), mode="append", split={"train": 1.0})
    assert appended.rows == 300 and verify(str(out)).ok


@pytest.mark.slow  # the CLI in processes of its own: a JVM each
def test_cli_export_takes_any_local_path(tmp_path):
    out = tmp_path / ODD / "cli"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "export", "--sample-rows", "300",
                           "--master", "local[1]", "--output", str(out), "--warehouse",
                           str(tmp_path / ODD / "wh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tfspark wrote 300 rows" in done.stdout and verify(str(out)).ok


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


def test_encode_errors_name_the_row_of_the_task_not_of_the_arrow_batch(spark_tf, tmp_path):
    from pyspark.sql import functions as F

    # One partition, Arrow batches of 500 rows: the bad row (id 777) is in the second batch.
    df = spark_tf.range(0, 1000, numPartitions=1).select(
        "id", F.when(F.col("id") == 777, F.lit(1e39)).otherwise(F.lit(1.0)).alias("x"))
    with pytest.raises(Exception, match=r"value 1e\+39 at row 777 is out of float32 range.*"
                                        r"Spark partition 0"):
        spark_tf.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        try:
            df.write.format("tfrecord").mode("overwrite").save(str(tmp_path / "rows"))
        finally:
            spark_tf.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def test_inspect_reads_a_gzip_file_whatever_its_name(spark_tf, tmp_path):
    out = tmp_path / "gz"
    tfspark.write_tfrecords(spark_tf.range(20), str(out), compression="gzip")
    part = next(p for p in out.iterdir() if p.name.endswith(".tfrecord.gz"))
    renamed = tmp_path / "no_suffix.tfrecord"
    renamed.write_bytes(part.read_bytes())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "inspect", str(renamed),
                           "--records", "2"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "record 1:" in done.stdout, done.stderr
    assert json.loads((out / "_tfspark.json").read_text())["compression"] == "gzip"


def test_append_that_differs_only_in_nullability_works(spark_tf, tmp_path):
    """A nullable column appended to a non-nullable one (without nulls) and the reverse: the
    stored spec is kept, and the rows of both writes read back."""
    out = str(tmp_path / "nulls")
    strict = spark_tf.createDataFrame([(1, 1.0)], "id long not null, x double not null")
    loose = spark_tf.createDataFrame([(2, 2.0), (3, None)], "id long, x double")
    tfspark.write_tfrecords(loose, out)
    tfspark.write_tfrecords(strict, out, mode="append")  # stored: nullable, kept
    strict.write.format("tfrecord").mode("append").save(out)  # the data source too
    back = sorted((r.id, r.x) for r in spark_tf.read.format("tfrecord").load(out).collect())
    assert back == [(1, 1.0), (1, 1.0), (2, 2.0), (3, None)] and verify(out).ok
    out2 = str(tmp_path / "nulls2")
    tfspark.write_tfrecords(strict, out2)
    tfspark.write_tfrecords(loose.where("x is not null"), out2, mode="append")
    with pytest.raises(tfspark.OptionError, match=r"column 'x' has 1 null row\(s\) but the data "
                                                   r"set stores it as not nullable; fill"):
        tfspark.write_tfrecords(loose, out2, mode="append")
    assert spark_tf.read.format("tfrecord").load(out2).count() == 2 and verify(out2).ok


def test_an_append_of_other_columns_is_refused_before_its_backup(spark_tf, tmp_path):
    """An append of a DataFrame with other columns said that a column it lacks (a fixed
    length of the data set) was "not in every row of this DataFrame", after writing its backup
    (to drop it again). Now its columns are compared first: one line naming the new and the
    missing ones, and no Spark job runs."""
    out = str(tmp_path / "other")
    rows = spark_tf.createDataFrame([(1, [0.5] * 8, 1.0)], "id long, v array<double>, x double")
    tfspark.write_tfrecords(rows, out)  # v found to be fixed [8]
    files = sorted(p.relative_to(out) for p in Path(out).rglob("*"))
    other = spark_tf.createDataFrame([(2, "a")], "id long, y string")
    tracker = spark_tf.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup()
    with pytest.raises(tfspark.SchemaError) as e:
        tfspark.write_tfrecords(other, out, mode="append")
    assert str(e.value) == (f"cannot append to {out!r}: its feature spec differs from this "
                            f"DataFrame's (new: ['y']; missing: ['v', 'x']); cast the columns "
                            f"to the data set's types, write to a new path or overwrite")
    assert tracker.getJobIdsForGroup() == jobs  # refused before the backup's job
    assert sorted(p.relative_to(out) for p in Path(out).rglob("*")) == files
    with pytest.raises(tfspark.OptionError, match=r"holds the row layout.*rows_per_record=1"):
        tfspark.write_tfrecords(rows, out, mode="append", rows_per_record=4)
    assert tracker.getJobIdsForGroup() == jobs and verify(out).ok


def test_append_and_detected_fixed_lengths(spark_tf, tmp_path):
    out = str(tmp_path / "fixed")
    eight = spark_tf.createDataFrame([(1, [0.5] * 8)], "id long, v array<double>")
    ragged = spark_tf.createDataFrame([(2, [0.5] * 3), (3, [1.0] * 9)], "id long, v array<double>")
    tfspark.write_tfrecords(eight, out)  # v found to be fixed [8]
    assert json.loads((tmp_path / "fixed" / "_tfspark.json").read_text())["spec"][
        "features"][1]["shape"] == [8]
    tfspark.write_tfrecords(eight, out, mode="append")
    eight.write.format("tfrecord").mode("append").save(out)  # variable in its spec: fits
    with pytest.raises(tfspark.OptionError, match=r"column 'v' has 8 values in every row.*"
                                                   r"detect_fixed_lengths=False"):
        tfspark.write_tfrecords(ragged, out, mode="append")
    assert spark_tf.read.format("tfrecord").load(out).count() == 3 and verify(out).ok
    # Stored variable-length: rows that happen to be of one length append to it.
    var = str(tmp_path / "var")
    tfspark.write_tfrecords(ragged, var)
    tfspark.write_tfrecords(eight, var, mode="append")
    assert sorted(len(r.v) for r in spark_tf.read.format("tfrecord").load(var).collect()) == \
        [3, 8, 9] and verify(var).ok


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


def test_a_relative_path_after_chdir_lands_where_the_driver_is(spark_tf, tmp_path,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    tfspark.write_tfrecords(spark_tf.range(5), "rel/data")
    assert (tmp_path / "rel" / "data" / "_tfspark.json").is_file()
    assert (tmp_path / "rel" / "data" / "_backup").is_dir()
    assert verify(str(tmp_path / "rel" / "data")).ok


def _tf_file(tf, path: Path, rows: list[dict]) -> None:
    with tf.io.TFRecordWriter(str(path)) as w:
        for row in rows:
            feats = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
                     if isinstance(v[0], int) else
                     tf.train.Feature(float_list=tf.train.FloatList(value=v))
                     for k, v in row.items()}
            w.write(tf.train.Example(features=tf.train.Features(feature=feats))
                    .SerializeToString())


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


@pytest.mark.slow  # the CLI in processes of its own: a JVM each
def test_export_of_the_sample_outside_the_repo_needs_no_output_and_is_quiet(tmp_path):
    """Run where there is no conf/: the sample goes to a default path, which is printed; and
    Spark's own warnings (hidden paths, loopback hostname) do not reach the user."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SPARK_LOCAL_IP", None)
    env.pop("SPARK_CONF_DIR", None)
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "export", "--sample-rows",
                           "200", "--master", "local[1]"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    where = tmp_path / "tfspark_sample" / "tfrecords"
    assert f"the embedded sample goes to {where}" in done.stdout
    assert verify(str(where)).ok
    # the JVM's start-up notices (incubator modules, log4j profile) are left out too, and
    # Spark's stage bar, which only a terminal redraws in place
    noise = [ln for ln in done.stderr.replace("\r", "\n").splitlines() if ln.strip()]
    assert not noise, noise
    # the stages say what they did, with their rows
    assert re.search(r"^tfspark: TFRecords \(about 1 file and the feature statistics\)",
                     done.stdout, re.M), done.stdout
    for stage in ("backup", "TFRecords"):
        assert re.search(rf"^tfspark: {stage}: 200 rows in [\d.]+ s", done.stdout, re.M), \
            done.stdout
    assert re.search(r"^tfspark: commit: [\d.]+ s$", done.stdout, re.M), done.stdout
