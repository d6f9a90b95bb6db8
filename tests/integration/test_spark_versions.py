"""What runs on every supported PySpark (3.5 and 4.x): write_tfrecords, `tfspark export`, the
spark-submit export job; the rows read back by our readers equal the DataFrame's, the
statistics equal NumPy's. The data source needs Spark 4, and says so in one line on 3.5.

`make test` runs this file in the main venv (PySpark 4) and again in .venv35 (PySpark 3.5,
`make test-spark35`): the same assertions on both."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyspark
import pytest

import tfspark
from tfspark.errors import OptionError
from tfspark.store.manifest import read_manifest

pytestmark = [pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
ROWS = 3_000
SPLIT = {"train": 0.7, "validation": 0.2, "test": 0.1}


def _rows() -> list[tuple]:
    return [(i, None if i % 7 == 0 else i * 0.5, f"c{i % 5}", bool(i % 3),
             dt.date(2024, 1, 1) + dt.timedelta(days=i % 40), [i, i + 1][: i % 3], i % 2)
            for i in range(ROWS)]


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory) -> str:
    df = spark.createDataFrame(_rows(), "id long, x double, cat string, flag boolean, "
                                        "day date, ids array<long>, y int")
    out = str(tmp_path_factory.mktemp("versions") / "ds")
    tfspark.write_tfrecords(df.repartition(3), out, label_cols=["y"], split=SPLIT,
                            split_key="id", rows_per_record=64, compression="gzip")
    return out


def test_rows_read_back_as_written(written):
    want = {r[0]: r for r in _rows()}
    seen = 0
    for split in SPLIT:
        for x, y in tfspark.read_batches(written, 256, split=split, shuffle_buffer=0):
            lists = x["ids"].to_list()
            for k, i in enumerate(x["id"].tolist()):
                _, v, cat, flag, day, ids, label = want[i]
                assert x["x"][k] == (0.0 if v is None else v)  # a null as the spec's default
                assert x["cat"][k] == cat.encode() and bool(x["flag"][k]) == flag
                assert int(x["day"][k]) == (day - dt.date(1970, 1, 1)).days
                assert lists[k] == ids and y[k] == label
                seen += 1
    assert seen == ROWS


def test_statistics_equal_numpy(written):
    m = read_manifest(written)
    assert m.rows == ROWS and sorted(m.splits) == sorted(SPLIT)
    stats = m.feature_stats()
    x = np.array([r[1] for r in _rows() if r[1] is not None])
    assert stats["x"]["nulls"] == ROWS - len(x) and stats["x"]["count"] == len(x)
    assert stats["x"]["mean"] == pytest.approx(x.mean())
    assert stats["x"]["min"] == x.min() and stats["x"]["max"] == x.max()
    assert stats["x"]["variance"] == pytest.approx(x.var(), rel=1e-6)
    assert sorted(map(tuple, stats["cat"]["top"])) == [(f"c{k}", ROWS // 5) for k in range(5)]
    assert stats["y"]["mean"] == pytest.approx(0.5, abs=1e-3)
    per_split = sum(m.feature_stats(s)["id"]["count"] for s in SPLIT)
    assert per_split == ROWS


def test_the_data_source_needs_spark_4(spark):
    if pyspark.__version__.startswith("3."):
        with pytest.raises(OptionError, match=r"needs Spark 4\.0 or newer .*this is PySpark "
                                              r"3\.5.*tfspark\.write_tfrecords"):
            tfspark.register(spark)
    else:
        assert "tfspark" in tfspark.register(spark)


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYSPARK_PYTHON=sys.executable)


@pytest.mark.slow  # the CLI in processes of its own: a JVM each
def test_export_command_and_job(tmp_path):
    out = tmp_path / "cli"
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "export", "--sample-rows", "300",
                           "--master", "local[2]", "--output", str(out), "--warehouse",
                           str(tmp_path / "wh")], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tfspark wrote 300 rows" in done.stdout and tfspark.verify(str(out)).ok
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    job = subprocess.run([str(submit), "--master", "local[2]",
                          str(ROOT / "jobs" / "export_tfrecords.py"), "--sample-rows", "200",
                          "--output", str(tmp_path / "job")], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stderr[-3000:]
    assert "tfspark wrote 200 rows" in job.stdout and tfspark.verify(str(tmp_path / "job")).ok
