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
