"""Appends: rows added to a committed data set keep every earlier row, in the TFRecords and in
the parquet copy, whichever process, application or store the writes come from."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as pads
import pytest
from faultcheck import messages, spawn  # this directory is on sys.path (conftest.py)

import tfspark
from tfspark.store.integrity import verify

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _ids(path: str, fs) -> list[int]:
    return sorted(int(i) for _, y in tfspark.read_batches(path, 500, filesystem=fs,
                                                          label_cols=["id"])
                  for i in y)


def _backup_ids(path: str, fs) -> list[int]:
    data = pads.dataset(f"{path}/_backup", filesystem=fs, format="parquet",
                        ignore_prefixes=["_", "."])
    return sorted(data.to_table(columns=["id"]).column("id").to_pylist())


def test_overwrite_then_two_appends_from_three_applications_keep_every_row(
        tmp_path: Path, s3, gcs, azurite) -> None:
    """Each write runs in a Spark application of its own (a driver process each): task attempt
    ids start again at 0 in every application, so a name made of them alone would publish
    the second append's parquet files over the first's."""
    s3_path, gcs_path, azure_path = (f"{s.bucket()}/ds" for s in (s3, gcs, azurite))
    targets = [
        {"store": "local", "path": str(tmp_path / "local" / "ds")},
        {"store": "s3", "path": s3.uri(s3_path)},  # a URI with pyarrow's options
        {"store": "gcs", "path": gcs_path, "fs": gcs.store_options()},
        {"store": "azurite", "path": azure_path,
         "fs": {"account_name": "devstoreaccount1", **azurite.store_options()}},
    ]
    readers = {"local": (None, targets[0]["path"]), "s3": (s3.filesystem(), s3_path),
               "gcs": (gcs.filesystem(), gcs_path), "azurite": (azurite.filesystem(), azure_path)}
    writes = [("overwrite", 0, 1000), ("append", 1000, 2000), ("append", 2000, 3000)]
    for k, (mode, lo, hi) in enumerate(writes):
        plan = tmp_path / f"plan-{k}.json"
        plan.write_text(json.dumps({"mode": mode, "rows": [lo, hi], "targets": targets}))
        with spawn(["writes", "--plan", str(plan)], tmp_path / f"driver-{k}") as proc:
            said = messages(proc.stdout)
        assert [m["path"] for m in said if m["kind"] == "WROTE"] == \
            [t["path"] for t in targets], said
        assert all(m["rows"] == m["backup_rows"] == hi - lo for m in said), said
        for t in targets:
            fs, path = readers[t["store"]]
            assert _ids(path, fs) == list(range(hi)), (t["store"], mode)
            assert _backup_ids(path, fs) == list(range(hi)), (t["store"], mode)
            report = tfspark.verify(path, filesystem=fs)
            assert report.ok, (t["store"], report.render())



@pytest.mark.spark
@pytest.mark.tf
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


@pytest.mark.spark
@pytest.mark.tf
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


@pytest.mark.spark
@pytest.mark.tf
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

