"""Where paths lead (store/fs.py): what a path or URI may show, and the one-line refusals of
paths tfspark cannot open."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from tfspark.errors import OptionError
from tfspark.store.fs import locate, redact


@pytest.mark.parametrize("uri,shown", [
    ("s3://b/k?endpoint_override=h:1&secret_key=S", "s3://b/k?..."),
    ("s3://AKIA:S3CR3T@b/k", "s3://AKIA:***@b/k"),
    ("s3://AKIA:S3CR3T@b/k?region=x", "s3://AKIA:***@b/k?..."),
    ("abfs://c@acct.dfs.core.windows.net/k", "abfs://c@acct.dfs.core.windows.net/k"),
    ("/tmp/a?b", "/tmp/a?b"),  # a local name may hold '?'
])
def test_redact_hides_query_and_password(uri, shown):
    assert redact(uri) == shown


@pytest.mark.parametrize("scheme,use", [("s3a", "s3"), ("wasbs", "abfs")])
def test_hadoop_schemes_are_refused_naming_pyarrows(scheme, use):
    with pytest.raises(OptionError, match=f"use {use}://") as info:
        locate(f"{scheme}://KEY:SECRET@bucket/data?x=1")
    assert "SECRET" not in str(info.value) and "x=1" not in str(info.value)


def test_a_filesystem_takes_paths_inside_it(tmp_path):
    loc = locate("s3://bucket/data", pafs.SubTreeFileSystem(str(tmp_path),
                                                            pafs.LocalFileSystem()))
    assert loc.base == "bucket/data" and loc.child("x").uri == "s3://bucket/data/x"
    with pytest.raises(OptionError, match="starts with '/' but filesystem="):
        locate("/abs/path", pafs.S3FileSystem(anonymous=True, region="us-east-1"))
