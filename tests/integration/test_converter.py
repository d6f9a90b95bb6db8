"""make_converter: a DataFrame to readers in one call. The readers (NumPy, tf.data, PyTorch)
give back every row of the DataFrame, len() counts them, the directory goes away on delete,
at the end of a with block and at exit, and a write that fails leaves nothing behind."""

from __future__ import annotations

import importlib.util
import logging
import os

import numpy as np
import pytest

import tfspark
from tfspark.converter import LOCATION_CONF, _delete_live
from tfspark.errors import OptionError, SchemaError

pytestmark = [pytest.mark.spark]

ROWS = 3_000


@pytest.fixture(scope="module")
def df(spark):
    return spark.range(ROWS, numPartitions=3).selectExpr(
        "id AS key", "CAST(id % 7 AS DOUBLE) AS x", "CAST(id % 2 AS INT) AS y")


def _keys(batches) -> list[int]:
    return sorted(int(k) for features, _ in batches for k in np.asarray(features["key"]))


def test_one_call_from_a_dataframe_to_every_reader(df, tmp_path):
    with tfspark.make_converter(df, str(tmp_path), label_cols=["y"],
                                split={"train": 0.75, "test": 0.25}, split_key="key") as conv:
        assert len(conv) == ROWS and conv.rows("train") + conv.rows("test") == ROWS
        assert os.path.dirname(conv.path) == str(tmp_path) and os.path.isdir(conv.path)
        got = {s: _keys(conv.read_batches(100, split=s)) for s in ("train", "test")}
        assert [len(got["train"]), len(got["test"])] == [conv.rows("train"), conv.rows("test")]
        assert sorted(got["train"] + got["test"]) == list(range(ROWS))
        # blocks of rows by default (the fast layout); write_tfrecords' settings pass through
        assert tfspark.store.manifest.read_manifest(conv.path).rows_per_record == 1024
        if importlib.util.find_spec("torch") is not None:  # not in the PySpark 3.5 lane
            import torch

            batches = [x["key"] for x, _ in conv.torch_dataset(128, split="test")]
            assert all(isinstance(k, torch.Tensor) for k in batches)
            assert sorted(int(k) for b in batches for k in b) == got["test"]
        with pytest.raises(OptionError, match="no split 'validation'; its splits: "
                                              r"\['test', 'train'\]"):
            conv.rows("validation")
    assert not os.path.exists(conv.path) and list(tmp_path.iterdir()) == []
    assert conv.deleted and "deleted" in repr(conv)
    with pytest.raises(OptionError, match="was deleted"):
        conv.read_batches(10)
    conv.delete()  # a second delete does nothing


@pytest.mark.tf
def test_make_dataset_reads_what_read_batches_reads(df, tf, tmp_path):
    conv = tfspark.make_converter(df, str(tmp_path), label_cols=["y"], rows_per_record=1)
    try:
        rows = [(int(k), int(y)) for x, y in conv.make_dataset(256, epochs=1)
                for k, y in zip(x["key"].numpy(), y.numpy())]
        assert sorted(rows) == [(k, k % 2) for k in range(ROWS)]
        assert _keys(conv.read_batches(256)) == list(range(ROWS))
    finally:
        conv.delete()
    assert list(tmp_path.iterdir()) == []


def test_default_location_and_cleanup_at_exit(spark, df, tmp_path):
    spark.conf.set(LOCATION_CONF, str(tmp_path))
    try:
        conv = tfspark.make_converter(df.limit(10))
    finally:
        spark.conf.unset(LOCATION_CONF)
    assert os.path.dirname(conv.path) == str(tmp_path) and len(conv) == 10
    _delete_live()  # what Python runs at exit
    assert list(tmp_path.iterdir()) == [] and conv.deleted
    # no conf: a local master writes under the temporary directory
    with tfspark.make_converter(df.limit(5)) as conv:
        assert os.path.isdir(conv.path) and len(conv) == 5
    assert not os.path.exists(conv.path)


def test_bad_inputs_leave_nothing_behind(spark, df, tmp_path):
    with pytest.raises(OptionError, match="leave out mode="):
        tfspark.make_converter(df, str(tmp_path), mode="overwrite")
    with pytest.raises(OptionError, match="needs a Spark DataFrame, got list"):
        tfspark.make_converter([1, 2], str(tmp_path))
    bad = spark.range(10).selectExpr("map(id, id) AS m")
    with pytest.raises(SchemaError, match="'m'"):
        tfspark.make_converter(bad, str(tmp_path))
    with pytest.raises(TypeError):
        tfspark.make_converter(df, str(tmp_path), rows_per_recrod=4)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("progress", [True, False])
def test_make_converter_says_what_it_does_unless_told_not_to(df, tmp_path, capsys, progress):
    with tfspark.make_converter(df, str(tmp_path), progress=progress) as conv:
        err = capsys.readouterr().err
        if progress:
            assert f"make_converter: writing the DataFrame to {conv.path}" in err
            assert "tfspark: TFRecords: " in err and "rows/s" in err
            assert "tfspark: commit" in err
        else:
            assert "tfspark" not in err
    assert not logging.getLogger("tfspark.progress").handlers  # left as it was
