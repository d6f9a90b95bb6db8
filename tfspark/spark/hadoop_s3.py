"""An s3a:// path as the cluster's Spark reaches it: the endpoint, keys and region its Hadoop
configuration holds for the bucket (fs.s3a.bucket.<bucket>.<key> over fs.s3a.<key>), made into
pyarrow's S3FileSystem for tfspark's driver and tasks (hadoop_stores.py)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pyarrow.fs as pafs

from tfspark.spark.hadoop_conf import Settings


def s3a_filesystem(conf: Settings, path: str) -> pafs.S3FileSystem:
    """pyarrow's S3FileSystem with what Spark's Hadoop settings `conf` set for the bucket of
    the s3a:// `path`. Keys they do not set are left to pyarrow's defaults and credential
    chain (an instance profile, the AWS_* variables)."""
    bucket = urllib.parse.urlsplit(path).netloc.rpartition("@")[2]

    def get(key: str, secret: bool = False) -> str | None:
        return conf.get(f"fs.s3a.bucket.{bucket}.{key}", f"fs.s3a.{key}", secret=secret)

    kwargs: dict[str, Any] = {"allow_delayed_open": True}  # (uris.store_defaults)
    endpoint = get("endpoint")
    scheme, _, host = (endpoint or "").rpartition("://")
    host = host.rstrip("/")
    aws = host.endswith("amazonaws.com")  # (s3.<region>.amazonaws.com: AWS's own, not a server)
    if host and not aws:
        ssl = (get("connection.ssl.enabled") or "true").lower() != "false"
        kwargs["endpoint_override"] = host
        kwargs["scheme"] = scheme or ("https" if ssl else "http")
    region = get("endpoint.region") or get("region") or (
        host.split(".")[1] if aws and host.count(".") == 3 else None)
    if region:
        kwargs["region"] = region
    access, secret = get("access.key", True), get("secret.key", True)
    if access and secret:
        kwargs.update(access_key=access, secret_key=secret)
        token = get("session.token", True)
        if token:
            kwargs["session_token"] = token
    return pafs.S3FileSystem(**kwargs)

