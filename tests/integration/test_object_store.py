"""Writing to an object store: the data source against an S3-compatible server on loopback
(moto), through pyarrow's S3 filesystem. TensorFlow's S3 support is not used to read back:
the files are fetched with pyarrow and parsed with TF from memory."""

from __future__ import annotations

import json

import pytest

import tfspark
from tfspark.wire.stream import read_records

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def s3_uri():
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="tfspark-test")
    query = f"?endpoint_override={host}:{port}&scheme=http&region=us-east-1"
    yield lambda key: f"s3://tfspark-test/{key}{query}"
    server.stop()


def test_datasource_writes_and_appends_to_s3(spark, s3_uri):
    import pyarrow.fs as pafs

    tfspark.register(spark)
    uri = s3_uri("runs/one")
    spark.range(0, 300, numPartitions=3).write.format("tfrecord").mode("overwrite") \
        .option("compression", "gzip").save(uri)
    spark.range(300, 400).write.format("tfrecord").mode("append").option("compression", "gzip") \
        .save(uri)
    fs, base = pafs.FileSystem.from_uri(uri)
    with fs.open_input_stream(f"{base}/_tfspark.json", compression=None) as f:
        manifest = json.load(f)
    assert manifest["records"] == 400 and len(manifest["writes"]) == 2
    spec = tfspark.FeatureSpec.from_dict(manifest["spec"])
    from tfspark.wire.example_py import decode_with_spec

    ids = []
    for entry in manifest["files"]:
        with fs.open_input_stream(f"{base}/{entry['path']}", compression=None) as f:
            ids += [decode_with_spec(r, spec)["id"] for r in read_records(f, "gzip")]
    assert sorted(ids) == list(range(400))
    listed = [i.path for i in fs.get_file_info(pafs.FileSelector(base, recursive=True))]
    assert any(p.endswith("_SUCCESS") for p in listed)
    assert len([p for p in listed if ".tfrecord" in p]) == len(manifest["files"])
