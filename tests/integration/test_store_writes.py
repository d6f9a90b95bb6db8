"""Writing data sets where they live: write_tfrecords with `filesystem=` to a GCS
emulator, moto's S3 server and Azurite (tests/integration/stores.py): the TFRecords, the
manifest and the parquet backup (written and read back by tfspark's tasks through pyarrow, as
Spark's writer cannot reach these stores), appends, overwrites, refusals, and a failed
overwrite that leaves the previous data set whole. Rows are checked against the DataFrame."""

from __future__ import annotations

import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pytest

import tfspark
from tfspark.errors import OptionError

pytestmark = [pytest.mark.spark]
STORES = ["gcs", "s3", "azurite"]


@pytest.fixture(params=STORES)
def store(request):
    return request.getfixturevalue(request.param)


def frame(spark, lo: int, hi: int):
    from pyspark.sql import functions as F

    return spark.range(lo, hi, numPartitions=2).select(
        "id", (F.col("id") % 3).alias("y"), (F.col("id") * 0.25).alias("x"))


def ids(path: str, fs, **kw) -> list[int]:
    return sorted(int(i) for _, y in tfspark.read_batches(path, 100, filesystem=fs,
                                                          label_cols=["id"], **kw)
                  for i in y)


def backup_ids(fs, path: str) -> list[int]:
    data = pads.dataset(path, filesystem=fs, format="parquet",
                        exclude_invalid_files=False, ignore_prefixes=["_", "."])
    return sorted(data.to_table(columns=["id"]).column("id").to_pylist())


def holds(out: str, fs, lo: int, hi: int) -> None:
    """The data set at `out` holds ids lo..hi-1 in its TFRecords and its backup, and verify
    finds every file as its manifest says."""
    assert ids(out, fs) == list(range(lo, hi))
    assert backup_ids(fs, f"{out}/_backup") == list(range(lo, hi))
    report = tfspark.verify(out, filesystem=fs)
    assert report.ok, report.render()


def test_write_append_overwrite_on_every_store(spark, store):
    fs = store.filesystem()
    out = f"{store.bucket()}/ds"
    result = tfspark.write_tfrecords(frame(spark, 0, 400), out, filesystem=fs,
                                     label_cols=["y"], split={"train": 0.75, "test": 0.25},
                                     split_key="id", max_records_per_file=60)
    assert result.rows == 400 and result.backup_rows == 400
    assert ids(out, fs, split="train") + ids(out, fs, split="test") != []
    assert sorted(ids(out, fs, split="train") + ids(out, fs, split="test")) == list(range(400))
    assert backup_ids(fs, f"{out}/_backup") == list(range(400))
    report = tfspark.verify(out, filesystem=fs)
    assert report.ok, report.render()

    with pytest.raises(OptionError, match="already exists"):
        tfspark.write_tfrecords(frame(spark, 0, 10), out, filesystem=fs, label_cols=["y"],
                                split={"train": 0.75, "test": 0.25}, split_key="id")
    tfspark.write_tfrecords(frame(spark, 400, 500), out, filesystem=fs, mode="append",
                            label_cols=["y"], split={"train": 0.75, "test": 0.25},
                            split_key="id")
    assert sorted(ids(out, fs, split="train") + ids(out, fs, split="test")) == list(range(500))
    assert backup_ids(fs, f"{out}/_backup") == list(range(500))
    assert tfspark.verify(out, filesystem=fs).ok

    tfspark.write_tfrecords(frame(spark, 1000, 1100), out, filesystem=fs, mode="overwrite",
                            label_cols=["y"])
    holds(out, fs, 1000, 1100)


def test_an_s3_write_leaves_its_objects_and_no_directory_markers(spark, s3):
    """PriorState each file a directory was made, which on S3 is an empty object ("ds/",
    "ds/y=1/", ...: a request more per file, and empty "folders" left in the bucket)."""
    import boto3

    bucket = s3.bucket()
    tfspark.write_tfrecords(frame(spark, 0, 300), s3.uri(f"{bucket}/ds"), label_cols=["x"],
                            partition_by=["y"], max_records_per_file=40)
    client = boto3.client("s3", endpoint_url=f"http://{s3.endpoint()}", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]
    assert len([k for k in keys if k.endswith(".tfrecord")]) >= 9
    # (pyarrow's delete of a directory's last object, the write-access probe's, puts one)
    assert {k for k in keys if k.endswith("/")} <= {"ds/", "ds/_backup/"}, keys
    assert ids(f"{bucket}/ds", s3.filesystem()) == list(range(300))


def test_an_overwrite_removes_the_old_files_many_at_a_time(spark, s3, monkeypatch):
    """An overwrite's sweep of the old part files and the publication of its backup deleted
    and moved one file after another: on a store a few round trips each (an overwrite of 1,000
    files at 50 ms a request took minutes). They now overlap (Location.at_once), and every old
    file still goes: the bucket holds the new data set's objects and nothing else."""
    import threading

    import boto3

    from tfspark.store import fs as store_fs

    fs = s3.filesystem(delay=0.01)
    bucket = s3.bucket()
    out = f"{bucket}/ds"
    kw = {"filesystem": fs, "label_cols": ["x"], "partition_by": ["y"],
          "max_records_per_file": 25}
    tfspark.write_tfrecords(frame(spark, 0, 300), out, **kw)
    lock, inside, most = threading.Lock(), [0], [0]
    real = store_fs.Location.delete

    def delete(self, rel):  # counts the driver's deletes under way at once
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            real(self, rel)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(store_fs.Location, "delete", delete)
    tfspark.write_tfrecords(frame(spark, 1000, 1030), out, mode="overwrite", **kw)
    assert most[0] > 1  # (one at a time before)
    client = boto3.client("s3", endpoint_url=f"http://{s3.endpoint()}", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    keys = {o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])}
    manifest = tfspark.read_manifest(out, fs)
    parts = {k for k in keys if k.endswith(".tfrecord")}
    # a file per task and partition value (the DataFrame's 2 partitions, 3 values of y)
    assert parts == {f"ds/{f.path}" for f in manifest.files} and len(parts) == 6
    assert len([k for k in keys if k.endswith(".parquet")]) == 2  # the new backup's only
    assert ids(out, fs) == list(range(1000, 1030))
    assert backup_ids(fs, f"{out}/_backup") == list(range(1000, 1030))


def test_a_tasks_files_of_many_partitions_on_a_store_each_hold_their_rows(s3):
    """A write task holds a file open per partition value, rolling each over every 30 rows;
    on a store their opens and closes run in the background (store/uploads.py, whose unit
    tests hold them to show it). On moto's S3, 10 ms a request: each file holds exactly its
    rows (TensorFlow's framing checked by tfspark's reader, CRCs included)."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.types import LongType, StructField, StructType

    from tfspark.arrow.encode import BatchEncoder
    from tfspark.spec import infer_spec
    from tfspark.store import part_files
    from tfspark.store.fs import locate

    fs = s3.filesystem(delay=0.01)
    loc = locate(f"{s3.bucket()}/task", fs)
    numbers = np.arange(800, dtype=np.int64)
    spec = infer_spec(StructType([StructField("id", LongType(), False)]))
    files = part_files.TaskFiles(loc, "w1", "00000-1", None, 6, "Example", 30,
                                 BatchEncoder(spec))
    try:
        for start in range(0, 100, 25):
            for value in range(8):
                rows = numbers[value * 100 + start:value * 100 + start + 25]
                files.write_group(None, {"c": str(value)}, pa.record_batch({"id": rows}))
        done = files.close()
    except BaseException:
        files.discard()  # no upload left open when the emulator stops
        raise
    assert sorted(d["records"] for d in done) == sorted([30, 30, 30, 10] * 8)
    for value in range(8):
        paths = [f"{loc.base}/{d['path']}" for d in done if d["partition"]["c"] == str(value)]
        got = [int(i) for b in tfspark.read_batches(paths, 1000, filesystem=fs, spec=spec)
               for i in b["id"]]
        assert sorted(got) == list(range(value * 100, value * 100 + 100))


def test_a_failed_overwrite_leaves_the_data_set_whole(spark, gcs):
    from pyspark.sql import functions as F

    fs = gcs.filesystem()
    out = f"{gcs.bucket()}/ds"
    tfspark.write_tfrecords(frame(spark, 0, 300), out, filesystem=fs, label_cols=["y"])
    before = sorted(i.path for i in fs.get_file_info(
        pafs.FileSelector(out, recursive=True)))
    boom = F.udf(lambda i: 1 // (0 if i == 777 else 1), "int")
    bad = frame(spark, 700, 800).withColumn("z", boom("id"))
    with pytest.raises(Exception, match="ZeroDivisionError|division"):
        tfspark.write_tfrecords(bad, out, filesystem=fs, mode="overwrite", label_cols=["y"])
    after = sorted(i.path for i in fs.get_file_info(
        pafs.FileSelector(out, recursive=True)))
    assert after == before  # nothing of the failed write is left, nothing old is gone
    assert ids(out, fs) == list(range(300))
    assert tfspark.verify(out, filesystem=fs).ok


def test_secrets_stay_out_of_what_a_write_keeps(spark, s3):
    """A URI with pyarrow's options and credentials: the write goes through the tasks'
    pyarrow backup; the manifest, the backup marker and the result hold no secret."""
    bucket = s3.bucket()
    uri = s3.uri(f"testing:s3cr3t@{bucket}/ds")
    result = tfspark.write_tfrecords(frame(spark, 0, 50), uri, label_cols=["y"])
    assert "s3cr3t" not in result.summary() and "endpoint" not in result.summary()
    fs = s3.filesystem()
    for name in ("_tfspark.json", "_backup/_tfspark/backup.json"):
        kept = fs.open_input_file(f"{bucket}/ds/{name}").read()
        assert b"s3cr3t" not in kept and b"endpoint_override" not in kept, name
    assert ids(uri, None) == list(range(50))
    assert tfspark.verify(uri).ok


def test_an_export_config_with_a_store_table_writes_there(spark, gcs, tmp_path):
    """`tfspark export --config` (run_export) with a [store] table: the output and its backup
    go to the emulator through that filesystem; the rows are the sample's."""
    from stores import store_table

    from tfspark.cli.config import load_config
    from tfspark.cli.session import run_export

    bucket = gcs.bucket()
    conf = tmp_path / "export.toml"
    conf.write_text(f'output = "gs://{bucket}/sample"\nbackup_path = "gs://{bucket}/backup"\n'
                    f'sample_rows = 300\nlabel_cols = ["label"]\n' + store_table(gcs))
    result = run_export(spark, load_config(conf))
    assert result.rows == 300 and result.path == f"gs://{bucket}/sample"
    fs = gcs.filesystem()
    assert len(ids(f"{bucket}/sample", fs)) == 300
    assert backup_ids(fs, f"{bucket}/backup") == ids(f"{bucket}/sample", fs)
    assert tfspark.verify(f"{bucket}/sample", filesystem=fs).ok


def test_a_write_names_a_missing_bucket_or_a_silent_server(spark, s3, gcs):
    """The write's first requests fail: one line says which and what to check, before Spark
    runs a job (a network error was pyarrow's raw OSError; a missing bucket on GCS, the
    client's "missing project id" from its attempt to create one)."""
    from stores import free_port

    df = frame(spark, 0, 10)
    missing = (r"cannot write to 'nobucket-[0-9a-f]+/x': its bucket 'nobucket-[0-9a-f]+' does "
               r"not exist, or these credentials cannot see it: create it first")
    with pytest.raises(OptionError, match=missing):
        tfspark.write_tfrecords(df, f"nobucket-{s3.bucket()[2:]}/x", filesystem=pafs.S3FileSystem(
            access_key="testing", secret_key="testing", endpoint_override=s3.endpoint(),
            scheme="http", region="us-east-1"))  # (s3.filesystem() makes missing buckets)
    with pytest.raises(OptionError, match=missing):
        tfspark.write_tfrecords(df, f"nobucket-{gcs.bucket()[2:]}/x", filesystem=gcs.filesystem())
    gone = pafs.S3FileSystem(access_key="k", secret_key="s3cr3t", region="us-east-1",
                             endpoint_override=f"127.0.0.1:{free_port()}", scheme="http")
    with pytest.raises(OptionError, match=r"cannot look at 'b/x' before writing there: .*; no "
                                          r"server answered: check the store's endpoint") as info:
        tfspark.write_tfrecords(df, "b/x", filesystem=gone)
    assert "s3cr3t" not in str(info.value)


def test_a_publish_stopped_half_way_on_a_store_is_finished_by_the_next_write(spark, store,
                                                                              monkeypatch):
    """Stopped after its commit with one staged backup file moved into place and the other
    not (a kill half way through the moves): the next write finishes the move. A store says
    only in words that a file to move is gone (pyarrow raises OSError, not
    FileNotFoundError): the move is known done when the file is in place and not staged."""
    import json

    from tfspark.spark import export
    from tfspark.store.fs import locate

    fs = store.filesystem()
    out = f"{store.bucket()}/ds"
    tfspark.write_tfrecords(frame(spark, 0, 100), out, filesystem=fs, label_cols=["y"])
    def stopped(*args, **kwargs):  # as Ctrl-C or a kill right after the commit
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "publish", stopped)
    with pytest.raises(KeyboardInterrupt):
        tfspark.write_tfrecords(frame(spark, 100, 300), out, filesystem=fs, mode="overwrite",
                                label_cols=["y"])
    monkeypatch.undo()
    loc = locate(out, fs)
    pending = json.loads(loc.read_bytes("_tfspark.json"))["backup"]["pending"]
    staging = loc.resolve(pending["staging"])
    assert len(pending["files"]) == 2
    first = pending["files"][0]
    staging.move(first, loc.child("_backup"), first)  # one moved, one still staged

    tfspark.write_tfrecords(frame(spark, 300, 350), out, filesystem=fs, mode="append",
                            label_cols=["y"])
    holds(out, fs, 100, 350)


def test_a_failed_write_removes_its_files_where_it_may_not_list(spark, tmp_path):
    """A filesystem whose listing of the output is refused lists nothing there (fsspec's walk
    swallows the refusal): the write fails at its commit, which cannot be made safe without a
    listing, and its tasks' files are removed by the names the tasks sent back (none was found
    to remove before)."""
    import os

    import unlisting

    spark.sparkContext.addPyFile(unlisting.__file__)
    out = str(tmp_path / "ds")
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(unlisting.Unlisting(root=out)))
    for place in ({}, {"backup_path": str(tmp_path / "backup")}):
        with pytest.raises(OptionError, match="did not list an object just written there"):
            tfspark.write_tfrecords(frame(spark, 0, 100), out, filesystem=fs,
                                    label_cols=["y"], **place)
        left = [os.path.join(r, n) for r, _, names in os.walk(tmp_path) for n in names]
        assert left == [], left


def test_a_write_on_a_store_writes_success_once_and_sweeps_what_is_left_on_gcs_too(spark,
                                                                                      store):
    """On a store a commit knows what the data set's top level holds from its lock's listing:
    _SUCCESS is written where it is missing, not again over itself. What a write sweeps goes
    on GCS too, whose listings name no directory: the statistics of the writes an overwrite
    replaces, and the staged backup of a write whose driver died (neither was ever found there
    to remove)."""
    import subprocess
    import sys

    from tfspark.store.backup import host_tag

    fs = store.filesystem()
    out = f"{store.bucket()}/ds"

    def under(rel: str) -> list[str]:  # the directories below out/rel, by their files' paths
        return sorted({i.path.split(f"/{rel}/")[1].split("/")[0]
                       for i in fs.get_file_info(pafs.FileSelector(
                           f"{out}/{rel}", recursive=True, allow_not_found=True))
                       if i.is_file and "/" in i.path.split(f"/{rel}/")[1]})

    split = {"split": {"train": 0.75, "test": 0.25}, "split_key": "id"}
    tfspark.write_tfrecords(frame(spark, 0, 200), out, filesystem=fs, label_cols=["y"], **split)
    first = under("_tfspark_stats")
    assert len(first) == 1 and fs.get_file_info(f"{out}/_SUCCESS").is_file
    assert sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(
        f"{out}/_tfspark_stats/{first[0]}"))) == ["features.json", "split-test.json",
                                                  "split-train.json"]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    staged = f"_tfspark_staging-{'0' * 16}-{dead}-{host_tag()}"
    with fs.open_output_stream(f"{out}/_backup/{staged}/part-0.parquet") as f:
        f.write(b"left by a killed driver")
    fs.delete_file(f"{out}/_SUCCESS")
    tfspark.write_tfrecords(frame(spark, 200, 300), out, filesystem=fs, label_cols=["y"],
                            mode="overwrite", **split)
    second = under("_tfspark_stats")
    assert len(second) == 1 and second != first  # the replaced write's statistics went
    assert under("_backup") == ["_tfspark"]  # the dead driver's staging went (the marker stays)
    assert fs.get_file_info(f"{out}/_SUCCESS").is_file  # missing: written again
    assert tfspark.verify(out, filesystem=fs).ok
    stats = tfspark.read_manifest(out, fs).feature_stats(split="train")
    train = ids(out, fs, split="train")
    assert stats["x"]["count"] == len(train) and stats["x"]["min"] == min(train) * 0.25
    assert backup_ids(fs, f"{out}/_backup") == list(range(200, 300))


def test_a_path_holding_files_only_in_subdirectories_is_not_empty_on_any_store(spark, store):
    """GCS lists no directory: a path whose files are all in subdirectories (someone's
    parquet, a partitioned table) looked empty there, so errorifexists wrote into it and
    ignore wrote instead of skipping. On every store now: refused, or skipped."""
    fs = store.filesystem()
    out = f"{store.bucket()}/ds"
    with fs.open_output_stream(f"{out}/events/part-0.parquet") as f:
        f.write(b"someone else's data")
    with pytest.raises(OptionError, match="already exists"):
        tfspark.write_tfrecords(frame(spark, 0, 10), out, filesystem=fs, label_cols=["y"])
    assert tfspark.write_tfrecords(frame(spark, 0, 10), out, filesystem=fs, label_cols=["y"],
                                   mode="ignore").skipped
    assert sorted(i.path for i in fs.get_file_info(pafs.FileSelector(out, recursive=True))
                  if i.is_file) == [f"{out}/events/part-0.parquet"]


def test_a_write_inside_or_around_a_data_set_on_a_store_is_refused(spark, store):
    """Where a write may go, on a store: the directories above a path are asked for a
    manifest at once (a request each, in series before), and the outermost is named."""
    fs = store.filesystem()
    bucket = store.bucket()
    ds = f"{bucket}/a/ds"
    tfspark.write_tfrecords(frame(spark, 0, 100), ds, filesystem=fs, label_cols=["y"],
                            split={"train": 0.5, "test": 0.5}, split_key="id", stats=False)
    for target in (f"{ds}/train/deeper/still", f"{ds}/other"):
        with pytest.raises(OptionError, match=r"inside the tfspark data set at '.*/a/ds'"):
            tfspark.write_tfrecords(frame(spark, 0, 10), target, filesystem=fs,
                                    label_cols=["y"])
    with pytest.raises(OptionError, match=r"holds the tfspark data set '.*/a/ds'"):
        tfspark.write_tfrecords(frame(spark, 0, 10), f"{bucket}/a", filesystem=fs,
                                label_cols=["y"], mode="overwrite")
    assert ids(ds, fs, split="train") + ids(ds, fs, split="test") != []
    assert tfspark.verify(ds, filesystem=fs).ok
