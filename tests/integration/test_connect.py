"""tfspark through Spark Connect: a Connect server from the installed pyspark on 127.0.0.1 (its
own JVM, started by scripts/local_cluster.py), this process a pure Connect client. The data
source is registered through the Connect session, data is written with
`df.write.format("tfrecord")` and with `tfspark.write_tfrecords`, and TensorFlow reads it back.

The Connect client is only active inside this module: pyspark switches a process to Connect
mode through the SPARK_CONNECT_MODE_ENABLED environment variable, which the fixture sets for
the module and removes afterwards, so the classic local session of the other tests is unharmed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tfcheck import f32, read_with_tf, rows_by

import tfspark

pytestmark = [pytest.mark.spark, pytest.mark.tf, pytest.mark.slow]  # a Connect server

ROOT = Path(__file__).resolve().parents[2]
ROWS = 3000


def _launcher() -> ModuleType:
    name = "local_cluster"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "local_cluster.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    for module in ("grpc", "grpc_status", "google.rpc", "zstandard"):
        pytest.importorskip(module, reason=f"Spark Connect's Python client needs {module} "
                                           f"(pip install 'pyspark[connect]', or the dev extra)")
    launcher = _launcher()
    if launcher.find_java() is None:
        pytest.skip("Java is not installed: the Spark Connect server needs Java 17+")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("SPARK_REMOTE", raising=False)
        with launcher.connect_server(tmp_path_factory.mktemp("connect-server")) as url:
            mp.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
            from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

            session = RemoteSparkSession.builder.remote(url).create()
            try:
                yield session
            finally:
                session.stop()


@pytest.fixture(scope="module")
def df(connect):
    from pyspark.sql import functions as F

    i = F.col("id")
    return connect.range(0, ROWS, numPartitions=3).select(
        "id", (i * 0.5).alias("x"), F.concat(F.lit("r"), i.cast("string")).alias("s"),
        F.array(i % 5, F.lit(7)).alias("arr"), (i % 2).cast("int").alias("y"))


def check(cols: dict, ids: range | list) -> None:
    got = rows_by(cols, "id")
    assert sorted(got) == sorted(ids)
    for k in ids:
        g = got[k]
        assert g["x"] == f32(k * 0.5) and g["s"] == f"r{k}".encode()
        assert list(g["arr"]) == [k % 5, 7] and g["y"] == k % 2


def test_it_is_really_connect(connect):
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    assert isinstance(connect, RemoteSparkSession)
    assert connect.range(5).count() == 5
    assert tfspark.register(connect) == ["tfspark", "tfrecord"]
    assert tfspark.register(connect) == ["tfspark", "tfrecord"]  # idempotent


def test_data_source_write_through_connect(connect, df, tf, tmp_path):
    tfspark.register(connect)
    out = str(tmp_path / "ds")
    df.write.format("tfrecord").mode("overwrite").option("compression", "gzip").save(out)
    spec, cols = read_with_tf(tf, out)
    assert spec["arr"].kind in ("fixed", "varlen")
    check(cols, range(ROWS))
    df.limit(10).write.format("tfrecord").mode("append").option("compression", "gzip").save(out)
    _, cols = read_with_tf(tf, out)
    assert len(cols["id"]) == ROWS + 10


def test_write_tfrecords_through_connect(connect, df, tf, tmp_path):
    out = str(tmp_path / "wf")
    split = {"train": 0.7, "test": 0.3}
    result = tfspark.write_tfrecords(df, out, label_cols=["y"], compression="gzip",
                                     split=split, split_key="id", target_file_bytes=20_000)
    assert result.rows == result.source_rows == result.backup_rows == ROWS
    assert result.files > 2  # sized from the sample: toArrow() works through Connect
    with open(os.path.join(out, "_tfspark.json")) as f:
        assert json.load(f)["splits"] == sorted(split)
    ids = []
    for name in split:
        features, labels = [], []
        ds = tfspark.make_dataset(out, batch_size=512, split=name, shuffle_buffer=0,
                                  deterministic=True, shuffle_files=False)
        for x, y in ds:
            features.extend(x["id"].numpy().tolist())
            labels.extend(y.numpy().tolist())
        assert len(features) == result.splits[name].rows
        assert labels == [k % 2 for k in features]
        ids.extend(features)
    assert sorted(ids) == list(range(ROWS))
    _, cols = read_with_tf(tf, out, split="train")
    check(cols, sorted(cols["id"]))
    import pyarrow.parquet as pq

    assert pq.read_table(os.path.join(out, "_backup")).num_rows == ROWS


def test_spark_reader_through_connect(connect, df, tmp_path):
    tfspark.register(connect)
    out = str(tmp_path / "rd")
    df.write.format("tfrecord").mode("overwrite").save(out)
    back = connect.read.format("tfrecord").load(out)
    assert back.schema == df.schema
    assert back.count() == ROWS
    assert df.exceptAll(back).count() == 0 and back.exceptAll(df).count() == 0


def test_train_on_spark_says_it_needs_a_classic_session(connect):
    with pytest.raises(tfspark.OptionError, match=r"needs a classic SparkSession .*Spark Connect"):
        tfspark.train_on_spark(connect, lambda ctx: None, 1)


def test_an_s3a_path_takes_the_sessions_settings_through_connect(connect, df, s3):
    """Through Spark Connect no JVM is in this process: an s3a:// path was refused ("s3a://
    is a Hadoop connector's scheme") though the session held the endpoint and keys."""
    bucket = s3.bucket()
    settings = {"fs.s3a.endpoint": f"http://{s3.endpoint()}", "fs.s3a.endpoint.region":
                "us-east-1", "fs.s3a.access.key": "testing",
                "fs.s3a.secret.key": "S3CR3T-over-connect"}
    for key, value in settings.items():
        connect.conf.set(key, value)
    try:
        result = tfspark.write_tfrecords(df, f"s3a://{bucket}/ds", label_cols=["y"])
    finally:
        for key in settings:
            connect.conf.unset(key)
    assert result.rows == result.backup_rows == ROWS
    got = [int(i) for _, y in tfspark.read_batches(f"{bucket}/ds", 500, label_cols=["id"],
                                                   filesystem=s3.filesystem()) for i in y]
    assert sorted(got) == list(range(ROWS))
