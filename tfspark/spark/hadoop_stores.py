"""The paths a Spark user already writes (s3a://, abfss://, gs://), reached as the cluster's
Spark reaches them: a pyarrow filesystem made from the endpoint and credentials that Spark's
Hadoop settings hold for the store, for write_tfrecords, make_converter and tfspark export.
The data source cannot: Spark plans it in a Python process without the session, so there an
s3a:// path is refused in one line (store/fs.py) and abfss:// and gs:// take pyarrow's own
credentials."""

from __future__ import annotations

from typing import Any

from tfspark import paths
from tfspark.errors import OptionError, scrubbed
from tfspark.spark.hadoop_azure import azure_filesystem
from tfspark.spark.hadoop_conf import hadoop_conf
from tfspark.spark.hadoop_gcs import gcs_filesystem
from tfspark.spark.hadoop_s3 import s3a_filesystem
from tfspark.store.local_paths import uri_to_path  # (s3a://b/k as s3://b/k)
from tfspark.store.redaction import redact
from tfspark.store.uris import azure_account_host

# Hadoop's schemes taken here, by store; pyarrow's own for the same stores (a backup_path's)
_KIND = {"s3a": "s3", "s3n": "s3", "abfs": "abfs", "abfss": "abfs", "gs": "gs"}
_SAME_STORE = {**_KIND, "s3": "s3", "gcs": "gs", "az": "abfs"}
_SETTINGS = ("backup_path",)  # path settings that name the same store as the output


def _kind(path: Any, kinds: dict[str, str] = _KIND) -> str | None:
    return kinds.get(paths.scheme(path)) if isinstance(path, str) else None


def hadoop_store(spark: Any, path: str, settings: dict[str, Any]
                 ) -> tuple[str, Any, dict[str, Any]]:
    """(path, filesystem, settings) for a write to `path` with Spark's Hadoop settings: the
    path as pyarrow names it (s3a:// as s3://), the filesystem they make (None where they add
    nothing to pyarrow's defaults; through Spark Connect from the session's settings), and the
    settings with a backup_path made the same way. Raises OptionError for a backup_path the same
    filesystem cannot reach, and for credentials pyarrow cannot use (naming the setting)."""
    kind = _kind(path)
    if kind != "s3" and paths.split_query(path)[1]:  # pyarrow's options in the URI: those hold
        kind = None
    conf = hadoop_conf(spark) if kind else None
    if conf is None:
        return path, None, settings
    if kind == "s3":
        fs: Any = s3a_filesystem(conf, path)
    elif kind == "abfs":
        fs = azure_filesystem(conf, path)
    else:
        fs = gcs_filesystem(conf, path)
    if fs is None:
        return path, None, settings
    out = dict(settings)
    for key in _SETTINGS:
        other = out.get(key)
        if isinstance(other, str) and paths.is_store_uri(other):
            if _kind(other, _SAME_STORE) != kind or (kind == "abfs" and azure_account_host(other)
                                                     != azure_account_host(path)):
                raise OptionError(f"{key} {redact(other)!r} is in another store than the path "
                                  f"{redact(path)!r}, and one filesystem made from Spark's "
                                  f"Hadoop settings serves both: put the backup beside it, or "
                                  f"pass filesystem=")
            out[key] = uri_to_path(other) if kind == "s3" else other
    return (uri_to_path(path) if kind == "s3" else path), fs, out


@scrubbed
def spark_filesystem(spark: Any, path: str) -> Any:
    """The pyarrow filesystem that Spark's Hadoop settings in `spark`'s session make for `path`
    (s3a://, abfs[s]://, gs://): the one write_tfrecords writes such a path with, for reading
    it back, `make_dataset(path, 1024, filesystem=spark_filesystem(spark, path))`. None where
    those settings add nothing to pyarrow's own defaults (the path alone then reads the same
    data). Raises OptionError, naming the setting, for a way of signing in that pyarrow cannot
    follow."""
    return hadoop_store(spark, path, {})[1]
