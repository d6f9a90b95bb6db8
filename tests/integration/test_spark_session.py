"""The spark fixture itself: a working local session with the settings the other tests assume."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.spark


def test_arrow_round_trip(spark):
    pdf = spark.range(10).toPandas()
    assert len(pdf) == 10
    assert sorted(pdf["id"].tolist()) == list(range(10))


def test_session_settings(spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"


def test_python_workers_use_this_interpreter(spark):
    # A Python worker really runs (a plain RDD map, no UDF), and it is this interpreter.
    exe = spark.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).collect()
    assert exe == [sys.executable]


def test_a_session_made_without_pyspark_python_writes_and_reads(tmp_path):
    """A script or notebook in a virtual environment that makes its own session, without
    PYSPARK_PYTHON: Spark's local workers would run `python3` on PATH, where tfspark is not
    installed; tfspark's entry points make them run this interpreter."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    code = f"""
from pyspark.sql import SparkSession
import tfspark
spark = SparkSession.builder.master("local[2]").getOrCreate()
assert spark.sparkContext.pythonExec == "python3", spark.sparkContext.pythonExec
r = tfspark.write_tfrecords(spark.range(100), {str(tmp_path / 'ds')!r})
tfspark.register(spark)
spark.range(50).write.format("tfrecord").mode("overwrite").save({str(tmp_path / 'src')!r})
print("ROWS", r.rows, spark.read.format("tfrecord").load({str(tmp_path / 'src')!r}).count())
"""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    other = Path(tmp_path / "bin")
    other.mkdir()
    # `python3` on PATH: an interpreter without tfspark (the machine's own)
    system = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or sys.executable
    (other / "python3").symlink_to(system)
    env["PATH"] = f"{other}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ROWS 100 50" in done.stdout, done.stdout
