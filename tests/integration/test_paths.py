"""Local directories whose names hold "?", "#", "%", spaces, brackets and letters beyond ASCII:
a local path is a path (only a store's URI carries a query), so every writer, reader, verify
and the command line find the data set, its parquet copy and nothing else there. A sibling
directory that such a name would match as a glob (a?b matches aXb) holds a data set of its
own, which nothing may read in its place."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as pads
import pytest

import tfspark
from tfspark.store.integrity import verify
from tfspark.store.manifest import read_manifest

pytestmark = [pytest.mark.spark, pytest.mark.tf]
ROOT = Path(__file__).resolve().parents[2]
NAMES = ["a?b", "we ird %20 ü#?x [1]{2}*"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tfspark.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def _ids_read_batches(path: str) -> list[int]:
    return sorted(int(i) for _, y in tfspark.read_batches(path, 64, label_cols=["id"])
                  for i in y)


def _backup_ids(path: str) -> list[int]:
    data = pads.dataset(path, format="parquet", ignore_prefixes=["_", "."])
    return sorted(data.to_table(columns=["id"]).column("id").to_pylist())


def _decoy(parent: Path, name: str, spark) -> None:
    """A data set where `name` read as a glob would also look (each glob character as X)."""
    other = "".join("X" if c in "?*[]{}" else c for c in name)
    if other != name:
        tfspark.write_tfrecords(spark.range(10_000, 10_007), str(parent / other / "ds"),
                                mode="overwrite")


@pytest.mark.parametrize("name", NAMES)
def test_every_writer_and_reader_takes_an_odd_local_directory(spark, tmp_path, name):
    tfspark.register(spark)
    _decoy(tmp_path, name, spark)
    out = tmp_path / name / "ds"
    before = sorted([p.name for p in tmp_path.iterdir()] + [name])

    result = tfspark.write_tfrecords(spark.range(0, 100, numPartitions=2), str(out))
    assert result.path == str(out) and f"to {out} " in result.summary()
    tfspark.write_tfrecords(spark.range(100, 150), str(out), mode="append")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no directory made beside
    manifest = read_manifest(str(out))
    assert manifest.backup.location == str(out / "_backup"), manifest.backup
    assert (out / "_backup" / "_tfspark" / "backup.json").exists()
    assert _backup_ids(str(out / "_backup")) == list(range(150))
    assert _ids_read_batches(str(out)) == list(range(150))
    report = tfspark.verify(str(out))
    assert report.ok, report.render()

    # the data source, both ways
    ds_out = tmp_path / name / "by-source"
    spark.range(0, 40).write.format("tfrecord").mode("overwrite").save(str(ds_out))
    back = spark.read.format("tfrecord").load(str(ds_out))
    assert sorted(r.id for r in back.collect()) == list(range(40))
    assert sorted(r.id for r in spark.read.format("tfrecord").load(str(out)).collect()) == \
        list(range(150))

    # TensorFlow, PyTorch and Grain
    ds = tfspark.make_dataset(str(out), 64, label_cols=[], shuffle_buffer=0)
    assert sorted(int(i) for b in ds for i in b["id"].numpy()) == list(range(150))
    torch_ids = [int(i) for b in tfspark.torch_dataset(str(out), 64) for i in b["id"]]
    assert sorted(torch_ids) == list(range(150))
    grain_ids = [int(i) for b in tfspark.grain_dataset(str(out), 64) for i in b["id"]]
    assert sorted(grain_ids) == list(range(150))

    # a converter whose location is such a directory
    with tfspark.make_converter(spark.range(0, 30), location=str(tmp_path / name)) as conv:
        assert sorted(int(i) for b in conv.read_batches(16) for i in b["id"]) == list(range(30))

    # the command line
    for args in (["verify", str(out)], ["inspect", str(out), "--records", "2"],
                 ["stats", str(out)]):
        done = _cli(*args, cwd=tmp_path / name)
        assert done.returncode == 0, (args, done.stderr)
        assert str(out) in done.stdout, (args, done.stdout)
    cli_out = tmp_path / name / "exported"
    done = _cli("export", "--output", str(cli_out), "--sample-rows", "500", cwd=tmp_path / name)
    assert done.returncode == 0, done.stderr
    assert f"to {cli_out} " in done.stdout, done.stdout
    assert tfspark.verify(str(cli_out)).ok
    marker = json.loads((cli_out / "_backup" / "_tfspark" / "backup.json").read_text())
    assert marker["data_set"] == str(cli_out)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


ODD = "with space %20 #hash"  # what broke: the backup's files came back as escaped URIs



def _count_tf(path: str, split: str | None = None) -> int:
    ds = tfspark.make_dataset(path, 64, split=split, label_cols=[], shuffle_buffer=0)
    return sum(int(b["id"].shape[0]) for b in ds)


@pytest.mark.spark
@pytest.mark.tf
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


@pytest.mark.spark
@pytest.mark.tf
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


@pytest.mark.spark
@pytest.mark.tf
def test_a_relative_path_after_chdir_lands_where_the_driver_is(spark_tf, tmp_path,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    tfspark.write_tfrecords(spark_tf.range(5), "rel/data")
    assert (tmp_path / "rel" / "data" / "_tfspark.json").is_file()
    assert (tmp_path / "rel" / "data" / "_backup").is_dir()
    assert verify(str(tmp_path / "rel" / "data")).ok

