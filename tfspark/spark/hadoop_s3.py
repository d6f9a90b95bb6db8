"""An s3a:// path as the cluster's Spark reaches it: the endpoint, keys and region its Hadoop
configuration holds for the bucket (fs.s3a.bucket.<bucket>.<key> over fs.s3a.<key>), made into
pyarrow's S3FileSystem for tfspark's driver and tasks, so write_tfrecords and make_converter
take the paths a Spark user already writes. The data source cannot: Spark plans it in a Python
process without the session, so there an s3a:// path is refused in one line (store/fs.py)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pyarrow.fs as pafs

from tfspark.store.local_paths import uri_to_path  # (s3a://b/k as s3://b/k)

_SCHEMES = ("s3a://", "s3n://")
_SETTINGS = ("backup_path",)  # path settings that name the same store as the output


def is_s3a(path: Any) -> bool:
    """Whether `path` is a Hadoop s3a:// (or s3n://) URI."""
    return isinstance(path, str) and path.lower().startswith(_SCHEMES)


def s3a_filesystem(spark: Any, path: str) -> pafs.S3FileSystem | None:
    """pyarrow's S3FileSystem with what Spark's Hadoop configuration sets for the bucket of the
    s3a:// `path` (None under Spark Connect, where the driver's configuration is out of reach:
    pyarrow's own credential chain then applies). Keys it does not set are left to pyarrow's
    defaults and credential chain (an instance profile, the AWS_* variables)."""
    jsc = getattr(spark, "_jsc", None)
    if jsc is None:
        return None
    conf = jsc.hadoopConfiguration()
    bucket = urllib.parse.urlsplit(path).netloc.rpartition("@")[2]

    def get(key: str, secret: bool = False) -> str | None:
        for name in (f"fs.s3a.bucket.{bucket}.{key}", f"fs.s3a.{key}"):
            if secret:  # (a credential provider's store, else the plain setting)
                chars = conf.getPassword(name)
                value = "".join(chars) if chars is not None else None
            else:
                value = conf.get(name)
            if value:
                return str(value).strip()
        return None

    kwargs: dict[str, Any] = {"allow_delayed_open": True}  # (uris.s3_delayed_open)
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


def hadoop_store(spark: Any, path: str, settings: dict[str, Any]
                 ) -> tuple[str, Any, dict[str, Any]]:
    """(path, filesystem, settings) for a write to an s3a:// `path`: the s3:// path, the
    filesystem from Spark's settings (or None), and the settings with an s3a:// backup_path
    made s3:// too; anything else as given, filesystem None."""
    if not is_s3a(path):
        return path, None, settings
    fs = s3a_filesystem(spark, path)
    if fs is None:
        return path, None, settings  # (the path's own error then says what to do)
    out = dict(settings)
    for key in _SETTINGS:
        if is_s3a(out.get(key)):
            out[key] = uri_to_path(out[key])
    return uri_to_path(path), fs, out
