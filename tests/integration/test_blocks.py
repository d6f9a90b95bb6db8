"""The block layout (rows_per_record > 1) through Spark: written by the data source and by
write_tfrecords, read back by TensorFlow alone (the oracle, with design.md's key names), by
make_dataset, by spark.read, verify and inspect; always row for row what the row layout gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.fs as pafs
import pytest
from test_write_path import _rich_df
from tfcheck import read_with_tf, rows_by

import tfspark
from tfspark.errors import OptionError, SchemaError

pytestmark = [pytest.mark.spark]
OWN = pafs.SubTreeFileSystem("/", pafs.LocalFileSystem())  # local files, read as a store's


def manifest(path):
    with open(os.path.join(path, "_tfspark.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module", autouse=True)
def registered(spark):
    tfspark.register(spark)


@pytest.fixture(scope="module")
def rich(spark):
    return _rich_df(spark)


@pytest.mark.tf
@pytest.mark.parametrize("block", [1, 7, 1024])  # 1024: more rows per block than the data has
def test_tensorflow_reads_blocks_as_the_row_layout(spark, rich, tf, tmp_path, block):
    df, rows = rich
    out, ref = str(tmp_path / "blocks"), str(tmp_path / "rows")
    df.write.mode("overwrite").format("tfrecord").option("rowsPerRecord", block) \
        .option("labelCols", "y") \
        .save(out)
    df.write.mode("overwrite").format("tfrecord").option("labelCols", "y").save(ref)
    m = manifest(out)
    assert m.get("layout") == (None if block == 1 else {"rows_per_record": block})
    if block > 1:
        assert m["rows"] == 40 and sum(f["rows"] for f in m["files"]) == 40
        assert m["records"] == sum(-(-f["rows"] // block) for f in m["files"])
    _, got = read_with_tf(tf, out)
    _, want = read_with_tf(tf, ref)
    got_rows, want_rows = rows_by(got, "id"), rows_by(want, "id")
    assert sorted(got_rows) == [r[0] for r in rows]
    assert got_rows == want_rows


@pytest.mark.tf
def test_make_dataset_on_blocks_matches_the_row_layout(spark, rich, tf, tmp_path):
    df, _ = rich
    out, ref = str(tmp_path / "blocks"), str(tmp_path / "rows")
    df.write.mode("overwrite").format("tfrecord").option("rowsPerRecord", 3) \
        .option("maxRecordsPerFile", 10) \
        .option("labelCols", "y").save(out)
    df.write.mode("overwrite").format("tfrecord").option("labelCols", "y").save(ref)

    def rows_of(path, **kw):
        ds = tfspark.make_dataset(path, 6, shuffle_buffer=0, **kw)
        out: dict[int, dict] = {}
        for x, y in ds:
            cols = {k: (v.to_list() if hasattr(v, "to_list") else v.numpy().tolist())
                    for k, v in x.items()}
            for i, key in enumerate(cols["id"]):
                out[key] = {k: v[i] for k, v in cols.items()} | {"y": int(y[i])}
        return out, ds

    got, ds = rows_of(out)
    want, ref_ds = rows_of(ref)
    assert got == want and len(got) == 40
    # Through tfspark's own reader (tf/records.py: any file not on local disk), the same rows
    # in the same forms; shuffled and cached as well.
    own, own_ds = rows_of(out.lstrip("/"), filesystem=OWN)
    assert own == want and own_ds.element_spec == ds.element_spec
    for cache in (False, True):
        twice = tfspark.make_dataset(out.lstrip("/"), 8, shuffle_buffer=16, seed=1, epochs=2,
                                     label_cols=[], filesystem=OWN, cache=cache)
        ids = [int(i) for b in twice for i in b["id"].numpy()]
        assert sorted(ids[:40]) == sorted(ids[40:]) == list(range(40)) and ids[:40] != ids[40:]
    assert int(ds.cardinality()) == int(ref_ds.cardinality()) == 7  # 40 rows / 6, known
    for f in manifest(out)["files"]:  # maxRecordsPerFile counts rows; blocks stay in a file
        assert f["rows"] <= 10 and f["records"] == -(-f["rows"] // 3)
    # Shuffled: every row once per epoch, in another order each epoch.
    ds = tfspark.make_dataset(out, 8, shuffle_buffer=16, seed=1, epochs=2, label_cols=[])
    ids = [int(i) for b in ds for i in b["id"].numpy()]
    assert sorted(ids[:40]) == sorted(ids[40:]) == list(range(40)) and ids[:40] != ids[40:]
    # Shards: disjoint, together everything, every worker the same steps.
    seen = []
    for k in range(3):
        part = tfspark.make_dataset(out, 4, shuffle_buffer=0, shard=(3, k), even_shards=False,
                                    label_cols=[])
        seen += [int(i) for b in part for i in b["id"].numpy()]
    assert sorted(seen) == list(range(40))
    steps = {int(tfspark.make_dataset(out, 4, shard=(3, k), label_cols=[]).cardinality())
             for k in range(3)}
    assert len(steps) == 1


@pytest.mark.tf
def test_shards_of_one_file_count_short_blocks(spark, tf, tmp_path):
    """Fewer files than workers: every n-th block; the cardinality counts the short last one."""
    out = str(tmp_path / "one")
    spark.range(0, 23, numPartitions=1).write.mode("overwrite").format("tfrecord") \
        .option("rowsPerRecord", 4).save(out)
    assert manifest(out)["records"] == 6  # 5 blocks of 4, one of 3
    for n in (2, 3, 4):
        parts = [tfspark.make_dataset(out, 5, shard=(n, k), shuffle_buffer=0,
                                      even_shards=False, label_cols=[]) for k in range(n)]
        ids = [[int(i) for b in p for i in b["id"].numpy()] for p in parts]
        assert sorted(sum(ids, [])) == list(range(23))
        assert [int(p.cardinality()) for p in parts] == [-(-len(i) // 5) for i in ids]


def test_spark_read_restores_rows_and_nulls(spark, rich, tmp_path):
    df, _ = rich
    out, ref = str(tmp_path / "blocks"), str(tmp_path / "rows")
    df.write.mode("overwrite").format("tfrecord").option("rowsPerRecord", 6) \
        .option("compression", "gzip").save(out)
    df.write.mode("overwrite").format("tfrecord").save(ref)
    back = spark.read.format("tfrecord").load(out)
    assert back.schema == df.schema
    rows = spark.read.format("tfrecord").load(ref)
    assert sorted(map(repr, back.collect())) == sorted(map(repr, rows.collect()))
    assert back.filter("i is null and txt is null and rag is null and vec is null and "
                       "st is null").count() == 8
    assert back.filter("i is null or txt is null").count() == 8


def test_append_keeps_the_layout(spark, tmp_path):
    out = str(tmp_path / "a")
    df = spark.range(0, 30)
    df.write.mode("overwrite").format("tfrecord").option("rowsPerRecord", 8).save(out)
    with pytest.raises(Exception, match=r"rows_per_record=8.*row layout.*rowsPerRecord=8"):
        df.write.mode("append").format("tfrecord").save(out)
    with pytest.raises(Exception, match=r"rows_per_record=8.*rows_per_record=4"):
        df.write.mode("append").format("tfrecord").option("rowsPerRecord", 4).save(out)
    df.write.mode("append").format("tfrecord").option("rowsPerRecord", 8).save(out)
    m = manifest(out)
    assert m["rows"] == 60 and [w["rows"] for w in m["writes"]] == [30, 30]
    rows = str(tmp_path / "r")
    df.write.mode("overwrite").format("tfrecord").save(rows)
    with pytest.raises(Exception, match=r"row layout.*rows_per_record=8.*rowsPerRecord=1"):
        df.write.mode("append").format("tfrecord").option("rowsPerRecord", 8).save(rows)
    assert spark.read.format("tfrecord").load(out).count() == 60


def test_bad_block_options_are_refused_before_writing(spark, tmp_path):
    out = str(tmp_path / "bad")
    for value in ("0", "-3", "many", str(2**21)):
        with pytest.raises(Exception, match=r"rowsPerRecord.*must be an integer"):
            spark.range(3).write.mode("overwrite").format("tfrecord") \
                .option("rowsPerRecord", value).save(out)
    with pytest.raises(Exception, match=r"rowsPerRecord=4.*recordType 'ByteArray'"):
        spark.range(3).selectExpr("cast(cast(id as string) as binary) as b") \
            .write.mode("overwrite").format("tfrecord").option("recordType", "ByteArray") \
            .option("rowsPerRecord", 4).save(out)
    clash = spark.range(3).selectExpr("if(id > 0, id, null) as a", "id as `a/nulls`")
    with pytest.raises(Exception, match=r"'a/nulls'.*'a'.*Example key 'a/nulls'.*rename"):
        clash.write.mode("overwrite").format("tfrecord").option("rowsPerRecord", 4).save(out)
    with pytest.raises(Exception, match=r"'__rows'.*block row count"):
        spark.range(3).selectExpr("id as __rows").write.mode("overwrite").format("tfrecord") \
            .option("rowsPerRecord", 4).save(out)
    clash.write.mode("overwrite").format("tfrecord").save(out)  # the row layout has no such keys
    assert not os.path.exists(str(tmp_path / "never"))
    with pytest.raises(OptionError, match=r"rows_per_record must be an integer from 1"):
        tfspark.write_tfrecords(spark.range(3), str(tmp_path / "never"), rows_per_record=0)
    with pytest.raises(SchemaError):
        from tfspark.spec.layout import check_block_keys

        check_block_keys(tfspark.infer_spec(clash.schema).features)


@pytest.mark.tf
def test_workflow_with_splits_verify_inspect_and_cli(spark, rich, tf, tmp_path):
    df, rows = rich
    out = str(tmp_path / "wf")
    result = tfspark.write_tfrecords(df, out, label_cols=["y"], split={"train": 0.75,
                                     "test": 0.25}, split_key="id", rows_per_record=16)
    assert result.rows == 40 and sum(s.rows for s in result.splits.values()) == 40
    train = [int(i) for _, y in tfspark.make_dataset(out, 8, split="train") for i in y]
    test = [int(i) for _, y in tfspark.make_dataset(out, 8, split="test") for i in y]
    assert len(train) + len(test) == 40
    report = tfspark.verify(out)
    assert report.ok, report.render()
    assert report.rows == 40 and report.records < 40 and "rows 40 (blocks of up to 16)" in \
        report.render()
    shown = subprocess.run([sys.executable, "-m", "tfspark.cli", "inspect", out, "--records",
                            "2", "--split", "test"], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert shown.returncode == 0, shown.stderr
    assert "40 rows in" in shown.stdout and "Example blocks of up to 16 rows" in shown.stdout
    assert shown.stdout.count("record ") == 2  # rows, not blocks
    # A damaged block count is found by verify, naming the file.
    m = manifest(out)
    first = m["files"][0]
    first["rows"] += 1
    with open(os.path.join(out, "_tfspark.json"), "w") as f:
        json.dump(m, f)
    report = tfspark.verify(out)
    assert not report.ok and first["path"] in report.render()


@pytest.mark.slow  # the CLI in processes of its own: a JVM each
def test_cli_export_writes_blocks(tmp_path):
    out = tmp_path / "cli"
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "export", "--sample-rows", "500",
                           "--output", str(out), "--rows-per-record", "64", "--mode",
                           "overwrite", "--backup-path", str(tmp_path / "bk")],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert done.returncode == 0, done.stderr[-3000:]
    m = manifest(out)
    assert m["layout"] == {"rows_per_record": 64} and m["rows"] == 500
    assert np.all([f["records"] == -(-f["rows"] // 64) for f in m["files"]])
