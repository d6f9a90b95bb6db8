"""Reading data sets where they live: the same data set, written once locally and
copied to a GCS emulator, an S3-compatible server and Azurite, read back by every reader with
`filesystem=` and with a URI's query options; the rows equal the local read's. make_dataset
reads them without TensorFlow's own file systems (stock TensorFlow has no s3 or abfs)."""

from __future__ import annotations

import datetime
import os
import time

import numpy as np
import pyarrow.fs as pafs
import pytest
from jaxcheck import train_on_jax_without_tensorflow, write_train_config
from stores import store_table

import tfspark
from tfspark.store.fs import locate

pytestmark = [pytest.mark.spark, pytest.mark.tf]
STORES = ["gcs", "s3", "azurite"]


@pytest.fixture(scope="module")
def local_sets(spark, tmp_path_factory):
    """Two local data sets: rows with splits (gzip), and blocks without."""
    from pyspark.sql import functions as F

    base = tmp_path_factory.mktemp("local")
    df = spark.range(0, 3000, numPartitions=3).select(
        "id", (F.col("id") % 5).alias("y"), (F.col("id") * 0.5).alias("x"),
        F.concat(F.lit("s"), (F.col("id") % 97).cast("string")).alias("s"))
    rows = str(base / "rows")
    tfspark.write_tfrecords(df, rows, label_cols=["y"], compression="gzip",
                            split={"train": 0.8, "test": 0.2}, split_key="id",
                            max_records_per_file=500)
    blocks = str(base / "blocks")
    tfspark.write_tfrecords(df, blocks, label_cols=["y"], rows_per_record=64,
                            max_records_per_file=700, stats=False)
    return {"rows": rows, "blocks": blocks}


def upload(local: str, fs: pafs.FileSystem, target: str) -> None:
    pafs.copy_files(local, target, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)


@pytest.fixture(params=STORES)
def store(request):
    return request.getfixturevalue(request.param)


def ids_of(reader) -> list[int]:
    return sorted(int(i) for b in reader for i in np.asarray(b[1] if isinstance(b, tuple)
                                                               else b["id"]))


def rows_of(reader) -> list[tuple]:
    out = []
    for features, _ in reader:
        out += list(zip(np.asarray(features["id"]).tolist(),
                        np.round(np.asarray(features["x"]), 3).tolist(),
                        [bytes(v) for v in np.asarray(features["s"])]))
    return sorted(out)


def test_every_reader_on_every_store(store, local_sets):
    fs = store.filesystem()
    bucket = store.bucket()
    for name, local in local_sets.items():
        upload(local, fs, f"{bucket}/{name}")
    split = {"split": "train"}
    want = rows_of(tfspark.read_batches(local_sets["rows"], 500, **split))
    got = rows_of(tfspark.read_batches(f"{bucket}/rows", 500, filesystem=fs, **split))
    assert got == want and len(want) > 2000
    uri = store.uri(f"{bucket}/rows")
    if uri is not None:  # gs:// and abfs:// URIs cannot say how to reach an emulator
        assert rows_of(tfspark.read_batches(uri, 500, **split)) == want
    ds = tfspark.make_dataset(f"{bucket}/rows", 500, filesystem=fs, label_cols=["id"], **split)
    assert sorted(int(i) for _, y in ds for i in y.numpy()) == [r[0] for r in want]
    want_blocks = rows_of(tfspark.read_batches(local_sets["blocks"], 256))
    assert rows_of(tfspark.read_batches(f"{bucket}/blocks", 256, filesystem=fs)) == \
        want_blocks
    with tfspark.read_batches(f"{bucket}/blocks", 256, filesystem=fs, processes=2) as spread:
        assert rows_of(spread) == want_blocks  # the filesystem sent to reading processes
    ds = tfspark.make_dataset(f"{bucket}/blocks", 256, filesystem=fs, label_cols=["id"])
    assert sorted(int(i) for _, y in ds for i in y.numpy()) == [r[0] for r in want_blocks]
    report = tfspark.verify(f"{bucket}/rows", filesystem=fs)
    assert report.ok and report.records == tfspark.verify(local_sets["rows"]).records, \
        report.render()
    layers = tfspark.keras_preprocessing(f"{bucket}/rows", split="train", filesystem=fs)
    assert {"x", "s"} <= set(layers)
    assert tfspark.read_manifest(f"{bucket}/rows", fs).splits == ("test", "train")


def test_reads_behind_latency_return_the_local_rows(gcs, local_sets):
    """Through the latency proxy (every request held 30 ms, the answers spliced through a
    pipe: the benchmarks' rig), the read-ahead's concurrent ranges and files opened ahead give
    every reader exactly the local rows, in both layouts."""
    bucket = gcs.bucket()
    for name, local in local_sets.items():
        upload(local, gcs.filesystem(), f"{bucket}/{name}")
    slow = gcs.filesystem(0.03)
    started = time.perf_counter()
    slow.get_file_info(f"{bucket}/blocks/_tfspark.json")
    assert time.perf_counter() - started >= 0.03  # the proxy holds the request
    split = {"split": "train"}
    want = rows_of(tfspark.read_batches(local_sets["rows"], 500, **split))
    assert rows_of(tfspark.read_batches(f"{bucket}/rows", 500, filesystem=slow, **split)) == \
        want
    ds = tfspark.make_dataset(f"{bucket}/rows", 500, filesystem=slow, **split)
    assert rows_of((f, None) for f, _ in ds) == want
    want = rows_of(tfspark.read_batches(local_sets["blocks"], 256))
    assert rows_of(tfspark.read_batches(f"{bucket}/blocks", 256, filesystem=slow,
                                        io_threads=4)) == want
    ds = tfspark.make_dataset(f"{bucket}/blocks", 256, filesystem=slow, shuffle_buffer=0)
    assert rows_of((f, None) for f, _ in ds) == want


def test_the_cli_reads_a_store_named_in_a_store_table(store, local_sets, tmp_path, capsys):
    from tfspark.cli.main import main

    bucket = store.bucket()
    upload(local_sets["rows"], store.filesystem(), f"{bucket}/rows")
    conf = tmp_path / "store.toml"
    conf.write_text(store_table(store))
    host = "@devstoreaccount1.dfs.core.windows.net" if store.scheme == "abfs" else ""
    uri = f"{store.scheme}://{bucket}{host}/rows"
    assert main(["verify", uri, "--store", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "OK: every CRC" in out and "records 3,000" in out, out
    assert main(["inspect", uri, "--store", str(conf), "--records", "2",
                 "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert f"{uri}: 3,000 Example records" in out and "record 1:" in out, out
    assert main(["stats", uri, "--store", str(conf), "--split", "train"]) == 0
    out += capsys.readouterr().out
    assert "statistics of" in out
    secrets = [v for k, v in store.store_options().items() if "key" in k]
    assert not any(str(v) in out for v in secrets)


def test_the_cli_shows_no_secret_of_a_uri(s3, local_sets, tmp_path, capsys):
    """A URI holding a password and query options, given to the CLI's commands: every line
    they print shows it redacted, their errors' too (the same data set read each time)."""
    from tfspark.cli.main import main

    bucket = s3.bucket()
    upload(local_sets["rows"], s3.filesystem(), f"{bucket}/rows")
    uri = s3.uri(f"testing:s3cr3t@{bucket}/rows")  # moto takes any secret
    assert main(["verify", uri]) == 0
    assert main(["inspect", uri, "--records", "1", "--split", "test"]) == 0
    assert main(["stats", uri, "--split", "train"]) == 0
    out, err = capsys.readouterr()
    shown = f"s3://testing:***@{bucket}/rows?..."
    assert f"{shown}: 3,000 Example records" in out and f"statistics of {shown} (" in out, out
    assert main(["stats", uri, "--split", "nosuch"]) == 2
    assert main(["train", uri, "--data", f"{uri}&x=1"]) == 2
    conf = tmp_path / "train.toml"
    conf.write_text(f'data = "{uri}"\ntrain_split = "nosuch"\n')
    assert main(["train", "--config", str(conf)]) == 2
    more, err = capsys.readouterr()
    assert f"error: no split 'nosuch' in {shown}; its splits are" in err, err
    assert f"the data set is named twice, '{shown}' and --data '{shown}'" in err, err
    assert f"error: '{shown}' has splits ['test', 'train'] but no 'nosuch'" in err, err
    assert "s3cr3t" not in out + more + err and "endpoint_override" not in out + more + err


def test_a_lone_file_is_inspected_and_verified_on_a_store_and_locally(gcs, local_sets,
                                                                       tmp_path, capsys):
    """One TFRecord file (no manifest): inspect decodes its records and verify checks its
    framing and CRCs, on a store as on local disk (both failed looking for a manifest in it);
    a damaged copy is named with the record's offset."""
    from tfspark.cli.main import main

    bucket = gcs.bucket()
    upload(local_sets["rows"], gcs.filesystem(), f"{bucket}/rows")
    name = next(r for r in locate(local_sets["rows"]).list_files() if r.endswith(".gz"))
    conf = tmp_path / "store.toml"
    conf.write_text(store_table(gcs))
    local = f"{local_sets['rows']}/{name}"
    damaged = tmp_path / "cut.tfrecord"
    import gzip

    damaged.write_bytes(gzip.decompress(open(local, "rb").read())[:-3])
    for where, store in ((f"gs://{bucket}/rows/{name}", ["--store", str(conf)]), (local, [])):
        assert main(["inspect", where, "--records", "2", *store]) == 0
        out = capsys.readouterr().out
        assert "record 1:" in out and "  id: [" in out, out
        assert main(["verify", where, *store]) == 0
        out = capsys.readouterr().out
        assert "compression gzip" in out and "OK: the framing and both CRCs of every record " \
            "check out" in out, out
    assert main(["verify", str(damaged)]) == 1
    out = capsys.readouterr().out
    assert f"{damaged}: truncated record" in out and "byte offset" in out, out


def test_a_converter_on_a_store_reads_with_the_stores_options(spark, s3, gcs):
    """make_converter on a store named by a URI with a password and query options (S3) or by
    filesystem= (GCS): the converter writes there, its readers read there (the options kept
    in its path), and delete() removes it from the store."""
    rows = 3000
    df = spark.range(rows, numPartitions=3).selectExpr("id", "CAST(id % 2 AS INT) AS y")
    bucket = s3.bucket()
    with tfspark.make_converter(df, s3.uri(f"testing:s3cr3t@{bucket}/tmp"),
                                label_cols=["y"]) as conv:
        assert len(conv) == rows
        assert ids_of(conv.read_batches(500, label_cols=["id"])) == list(range(rows))
        assert conv.path.endswith(s3.uri("x").split("?", 1)[1])  # its query options kept
        assert ids_of(tfspark.read_batches(conv.path, 500, label_cols=["id"])) == \
            list(range(rows))
        assert "s3cr3t" not in repr(conv) and "endpoint" not in repr(conv)
    assert s3.filesystem().get_file_info(pafs.FileSelector(f"{bucket}/tmp", recursive=True,
                                                           allow_not_found=True)) == []
    fs, bucket = gcs.filesystem(), gcs.bucket()
    conv = tfspark.make_converter(df, f"gs://{bucket}/tmp", filesystem=fs, label_cols=["y"])
    try:
        assert ids_of(conv.read_batches(500, label_cols=["id"])) == list(range(rows))
    finally:
        conv.delete()
    assert fs.get_file_info(pafs.FileSelector(f"{bucket}/tmp", recursive=True,
                                              allow_not_found=True)) == []


def test_explicit_files_on_a_store(gcs, local_sets):
    fs = gcs.filesystem()
    bucket = gcs.bucket()
    upload(local_sets["rows"], fs, f"{bucket}/rows")
    manifest = tfspark.read_manifest(local_sets["rows"])
    files = [f"gs://{bucket}/rows/{f.path}" for f in manifest.files if f.split == "test"]
    local_spec = os.path.join(local_sets["rows"], "_tfspark.json")
    with pytest.raises(tfspark.OptionError, match="starts with '/' but filesystem="):
        tfspark.make_dataset(files, 100, spec=local_spec, filesystem=fs)
    spec = f"{bucket}/rows/_tfspark.json"  # filesystem= holds for every path argument
    ds = tfspark.make_dataset(files, 100, spec=spec, filesystem=fs, label_cols=["id"])
    got = sorted(int(i) for _, y in ds for i in y.numpy())
    want = ids_of(tfspark.read_batches(local_sets["rows"], 100, split="test",
                                       label_cols=["id"]))
    assert got == want


@pytest.mark.parametrize("where", ["s3", "gcs"])
def test_files_gone_from_a_store_while_reading_say_what_happened(where, request, local_sets):
    """An overwrite's sweep removes the files a reader planned from: on a store that read as
    damage ("read error after byte offset 0 ([Errno 2] Path does not exist ...)"), where
    locally it names the file and says to start a new reader."""
    store = request.getfixturevalue(where)
    fs, bucket = store.filesystem(), store.bucket()
    upload(local_sets["blocks"], fs, f"{bucket}/blocks")
    said = r"part-.*\.tfrecord: named for reading but it does not exist: the data set was " \
        r"overwritten since this reader began \(start a new reader\)"
    readers = [tfspark.read_batches(f"{bucket}/blocks", 100, filesystem=fs, num_threads=1),
               tfspark.make_dataset(f"{bucket}/blocks", 100, filesystem=fs)]  # (planned)
    for info in fs.get_file_info(pafs.FileSelector(f"{bucket}/blocks", recursive=True)):
        if "/part-" in info.path:
            fs.delete_file(info.path)
    with pytest.raises(FileNotFoundError, match=said):
        list(readers[0])
    import tensorflow as tf

    with pytest.raises(tf.errors.OpError, match=said):  # (as locally: UnknownError)
        list(readers[1])


def test_a_cache_keeps_what_was_read_whole(gcs, local_sets, tmp_path):
    fs = gcs.filesystem()
    bucket = gcs.bucket()
    upload(local_sets["blocks"], fs, f"{bucket}/blocks")
    cache = tmp_path / "cache"
    want = ids_of(tfspark.read_batches(local_sets["blocks"], 256, label_cols=["id"]))
    reader = tfspark.read_batches(f"{bucket}/blocks", 256, filesystem=fs, cache_dir=cache,
                                  label_cols=["id"])
    first = iter(reader)
    next(first)  # a first batch, then stopped: nothing partial may be kept
    first.close()
    kept = [p for p in cache.rglob("*") if p.is_file()]
    assert not any(".tmp-" in p.name for p in kept)
    assert ids_of(reader) == want  # the first epoch fills the cache
    kept = [p for p in cache.rglob("*") if p.is_file()]
    files = len(tfspark.read_manifest(local_sets["blocks"]).files)
    assert len(kept) == files
    other = tmp_path / "other"  # make_dataset fills a cache as well
    ds = tfspark.make_dataset(f"{bucket}/blocks", 256, filesystem=fs, cache_dir=other,
                              label_cols=["id"])
    assert sorted(int(i) for _, y in ds for i in y.numpy()) == want
    assert len([p for p in other.rglob("*") if p.is_file()]) == files
    for info in fs.get_file_info(pafs.FileSelector(f"{bucket}/blocks", recursive=True)):
        if ".tfrecord" in info.path:
            fs.delete_file(info.path)  # gone from the store: the cache must serve them
    assert ids_of(reader) == want
    # A new write of the data set has new file names and write ids: nothing stale is read.
    upload(local_sets["rows"], fs, f"{bucket}/blocks2")
    assert ids_of(tfspark.read_batches(f"{bucket}/blocks2", 256, filesystem=fs, split="test",
                                       cache_dir=cache, label_cols=["id"])) == \
        ids_of(tfspark.read_batches(local_sets["rows"], 256, split="test",
                                    label_cols=["id"]))


def test_an_overwrite_leaves_no_stale_copies_in_the_cache(gcs, local_sets, spark, tmp_path):
    """Each rewrite of a data set would add a copy of it to a cache that keeps every write's:
    a reader drops the copies of writes its data set no longer holds (not another data set's),
    and the half-written copies of a process killed while filling (not a live one's)."""
    import subprocess

    fs, bucket = gcs.filesystem(), gcs.bucket()
    ds, cache = f"{bucket}/ds", tmp_path / "cache"
    upload(local_sets["blocks"], fs, ds)
    old = tfspark.read_manifest(local_sets["blocks"]).last_write
    want = ids_of(tfspark.read_batches(local_sets["blocks"], 256, label_cols=["id"]))
    assert ids_of(tfspark.read_batches(ds, 256, filesystem=fs, cache_dir=cache,
                                       label_cols=["id"])) == want
    assert any((cache / old / bucket / "ds").iterdir())
    other = cache / old / bucket / "other" / "part-0.tfrecord"  # another data set's copy
    other.parent.mkdir(parents=True)
    other.write_bytes(b"kept")
    newer = str(tmp_path / "newer")  # the overwrite: the same layout, another write
    tfspark.write_tfrecords(spark.range(100, 400).selectExpr("id", "id % 5 AS y"), newer,
                            label_cols=["y"], rows_per_record=64, stats=False)
    fs.delete_dir_contents(ds)
    upload(newer, fs, ds)
    new = tfspark.read_manifest(newer).last_write
    gone = subprocess.Popen(["true"])
    gone.wait()
    filling = cache / new / bucket / "ds"
    filling.mkdir(parents=True)
    from tfspark.store.cache import _HOST

    # pids repeat across hosts sharing a cache directory: another host's fill is its own
    dead, live = (f"part-9.tfrecord.tmp-{_HOST}-{gone.pid}-0123456789ab",
                  f"part-8.tfrecord.tmp-{_HOST}-{os.getpid()}-0123456789ab")
    elsewhere = f"part-7.tfrecord.tmp-another.host-{gone.pid}-0123456789ab"
    for name in (dead, live, elsewhere):
        (filling / name).write_bytes(b"half")
    got = tfspark.make_dataset(ds, 64, filesystem=fs, cache_dir=cache, label_cols=["id"])
    assert sorted(int(i) for _, y in got for i in y.numpy()) == list(range(100, 400))
    assert not (cache / old / bucket / "ds").exists() and other.read_bytes() == b"kept"
    names = {p.name for p in filling.iterdir()}
    assert live in names and elsewhere in names and dead not in names, names
    (filling / dead).write_bytes(b"half")  # read_batches sweeps as well
    assert ids_of(tfspark.read_batches(ds, 64, filesystem=fs, cache_dir=cache,
                                       label_cols=["id"])) == list(range(100, 400))
    assert not (filling / dead).exists() and (filling / live).exists()


def test_a_uri_keeps_its_options_and_shows_none_of_them(s3, local_sets):
    fs = s3.filesystem()
    bucket = s3.bucket()
    upload(local_sets["rows"], fs, f"{bucket}/rows")
    uri = s3.uri(f"testing:s3cr3t@{bucket}/rows")  # moto takes any secret
    loc = locate(uri)
    assert loc.child("train").uri == f"s3://{bucket}/rows/train"
    assert "s3cr3t" not in loc.uri
    with pytest.raises(tfspark.ManifestError) as info:
        tfspark.read_batches(uri, 10, split="nope")
    assert "s3cr3t" not in str(info.value) and "endpoint" not in str(info.value)
    with pytest.raises(tfspark.ManifestError) as info:
        tfspark.read_batches(uri.replace("/rows", "/nothing"), 10)
    assert "s3cr3t" not in str(info.value) and "endpoint" not in str(info.value)
    assert len(ids_of(tfspark.read_batches(uri, 500, split="train",
                                           label_cols=["id"]))) > 2000


def test_writes_never_show_a_uris_secrets(spark, s3):
    """What the data source says and keeps of a URI with credentials."""
    bucket = s3.bucket()
    uri = s3.uri(f"testing:s3cr3t@{bucket}/w")
    df = spark.range(20)
    df.write.format("tfrecord").mode("append").save(uri)
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark wraps it
        df.write.format("tfrecord").option("mode", "errorifexists").mode("append").save(uri)
    assert "already exists" in str(info.value) and "s3cr3t" not in str(info.value)
    manifest = s3.filesystem().open_input_file(f"{bucket}/w/_tfspark.json").read()
    assert b"s3cr3t" not in manifest and b"endpoint" not in manifest
    assert len(ids_of(tfspark.read_batches(uri, 10, label_cols=["id"]))) == 20


def test_a_uri_names_the_path_as_typed_in_every_entry_point(spark, s3):
    """A space, "#" or a letter beyond ASCII in a URI's path: pyarrow could not parse it (or
    took "#..." for a fragment, the endpoint with it), so no entry point reached the store."""
    bucket = s3.bucket()
    typed = f"testing:s3cr3t@{bucket}/my data #1/ünï"
    uri = s3.uri(typed)
    df = spark.range(30).selectExpr("id", "CAST(id % 3 AS INT) AS c")
    tfspark.write_tfrecords(df, uri, backup_path=s3.uri(f"{typed} backup"))
    df.write.format("tfrecord").mode("append").save(uri)
    fs = s3.filesystem()
    assert fs.get_file_info(f"{bucket}/my data #1/ünï/_tfspark.json").type == \
        pafs.FileType.File
    assert ids_of(tfspark.read_batches(uri, 7, label_cols=["id"])) == sorted(list(range(30)) * 2)
    assert sorted(r.id for r in spark.read.format("tfrecord").load(uri).collect()) == \
        sorted(list(range(30)) * 2)
    report = tfspark.verify(uri)
    assert report.ok, report.problems


@pytest.mark.training
@pytest.mark.slow
def test_the_train_job_reads_a_store_on_tensorflow_and_on_jax(gcs, local_sets, tmp_path):
    """`tfspark train` with the data on a store named in the config's [store] table: on
    TensorFlow (make_dataset through tfspark's reader) and on JAX without TensorFlow
    (read_batches), the same features chosen from the store's statistics, a model saved."""
    import re

    import keras

    from tfspark.cli.train import train

    bucket = gcs.bucket()
    upload(local_sets["rows"], gcs.filesystem(), f"{bucket}/rows")
    settings = {"data": f"gs://{bucket}/rows", "epochs": 1, "batch_size": 200,
                "exclude": ["id"], "hidden_units": [8], "bench_batches": 0, "verbose": 0,
                "validation_split": "test"}
    on_tf = train({**settings, "store": gcs.store_options(),
                   "model_out": str(tmp_path / "tf.keras")}, echo=lambda s: None)
    assert on_tf["task"] == "multiclass" and "val_accuracy" in on_tf["final"], on_tf
    assert on_tf["numeric"] == ["x"] and on_tf["categorical"] == ["s"], on_tf
    conf = write_train_config(tmp_path / "train.toml", settings, store_table(gcs))
    done = train_on_jax_without_tensorflow(conf, tmp_path / "jax.keras", tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert re.search(r"^final: .*val_accuracy=", done.stdout, re.M), out[-3000:]
    assert "numeric features (1): x" in done.stdout, out[-3000:]
    saved = keras.saving.load_model(str(tmp_path / "jax.keras"))
    assert set(saved.input) == {"x", "s"}, saved.input


@pytest.mark.training
@pytest.mark.slow
def test_train_on_two_spark_workers_reads_a_store_named_in_a_store_table(spark, gcs, local_sets,
                                                                          tmp_path, capsys):
    """`tfspark train --workers 2 --store FILE` with the data on the emulator: the check that
    every executor sees the data goes through the [store] table's filesystem (it went to
    Google's servers without it), and the workers train from there."""
    from tfspark.cli.main import main

    bucket = gcs.bucket()
    upload(local_sets["rows"], gcs.filesystem(), f"{bucket}/rows")
    conf = tmp_path / "store.toml"
    conf.write_text(store_table(gcs))
    out = tmp_path / "m.keras"
    assert main(["train", f"gs://{bucket}/rows", "--store", str(conf), "--workers", "2",
                 "--epochs", "1", "--batch-size", "200", "--model-out", str(out),
                 "--config", str(write_train_config(tmp_path / "t.toml", {
                     "validation_split": "test", "exclude": ["id"], "hidden_units": [4],
                     "bench_batches": 0, "verbose": 0}))]) == 0, capsys.readouterr().err
    assert "model saved to" in capsys.readouterr().out and out.exists()
    missing = f"gs://{bucket}/nothing"
    with pytest.raises(tfspark.OptionError, match=f"cannot see '{missing}'"):
        tfspark.train_on_spark(spark, print, 2, shared_paths=[missing],
                               filesystem=gcs.filesystem())


def test_a_wrong_path_or_endpoint_says_which(store, local_sets, tmp_path):
    """A mistyped path or bucket, a directory that is not a data set, and a server that does
    not answer: each is named as such (not as a data set without a manifest)."""
    from stores import free_port

    fs = store.filesystem()
    bucket = store.bucket()
    upload(local_sets["rows"], fs, f"{bucket}/rows/train")  # a split's directory a level down
    for path in (f"{bucket}/nothing", f"nobucket{bucket[1:]}/rows"):
        for split in (None, "train"):
            with pytest.raises(tfspark.ManifestError, match=rf"^'{path}' does not exist: check "
                                                             r"the path and its bucket$"):
                tfspark.read_batches(path, 10, split=split, filesystem=fs)
    with pytest.raises(tfspark.ManifestError, match=rf"no _tfspark.json in '{bucket}' nor in "
                                                     r"its 'rows' directory"):
        tfspark.read_batches(bucket, 10, split="rows", filesystem=fs)
    if store.scheme != "abfs":  # (Azure's client retries for 12 s: its words were checked by hand)
        port = free_port()  # nothing listens there
        gone = pafs.S3FileSystem(access_key="k", secret_key="s3cr3t", scheme="http",
                                 endpoint_override=f"127.0.0.1:{port}", region="us-east-1") \
            if store.scheme == "s3" else \
            pafs.GcsFileSystem(anonymous=True, scheme="http", endpoint_override=f"127.0.0.1:{port}",
                               retry_time_limit=datetime.timedelta(seconds=1))
        with pytest.raises(tfspark.ManifestError, match=r"cannot read .*_tfspark\.json .*no server "
                                                         r"answered: check the store's endpoint"):
            tfspark.read_batches(f"{bucket}/rows", 10, filesystem=gone)
    local = tmp_path / "plain"
    local.mkdir()
    with pytest.raises(tfspark.ManifestError, match=rf"'{tmp_path}/nothing' does not exist: "
                                                     r"check the path$"):
        tfspark.make_dataset(str(tmp_path / "nothing"), 10, split="train")
    with pytest.raises(tfspark.ManifestError, match=rf"no _tfspark.json in '{local}' nor in its "
                                                     r"'train' directory"):
        tfspark.make_dataset(str(local), 10, split="train")
