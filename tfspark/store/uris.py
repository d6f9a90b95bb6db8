"""A URI as pyarrow parses it: what a user types in a path that a URI may not hold escaped,
and the path in the store that a URI names, for the filesystem= given with it."""

from __future__ import annotations

import datetime
import re
import urllib.parse

import pyarrow.fs as pafs

from tfspark import paths

# How long pyarrow's GCS client retries a request that fails, where tfspark makes the client
# (a gs:// URI, a [store] table, Spark's settings): its own default is 15 minutes (with no
# credentials it gave up after 1,066 s here), so a missing credential or a wrong endpoint said
# nothing for that long; pyarrow's S3 client gives up after 3 attempts.
GCS_RETRY = datetime.timedelta(seconds=60)

_LONE_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
# scheme:, //authority (optional: file:/tmp/x), the path, ?query
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*:)(//[^/?]*)?([^?]*)(\?.*)?$", re.DOTALL)
# <account>.dfs.<cloud> or <account>.blob.<cloud>: an Azure account's host
_ACCOUNT_HOST = re.compile(r"^[^.:]+\.(dfs|blob)\.[^:]+$", re.IGNORECASE)


def escaped(uri: str) -> str:
    """`uri` with what its path holds that a URI may not (a space, "#", non-ASCII letters, a
    "%" starting no escape) percent-escaped, as pyarrow and urllib parse only URIs: what a user
    types (s3://b/my data/ds) names that object. Escapes already there and the query are kept,
    so a URI as Hadoop reports one (s3a://b/my%20data) is unchanged."""
    m = _URI.match(uri)
    if m is None:
        return uri
    scheme, authority, path, query = m.groups()
    path = urllib.parse.quote(_LONE_PERCENT.sub("%25", path), safe="/%!$&'()*+,;=:@~")
    return f"{scheme}{authority or ''}{path}{query or ''}"


def store_defaults(uri: str) -> str:
    """`uri` with tfspark's defaults for its store where its query does not set them: an s3://
    URI asks pyarrow to open files for writing on their first write (a file smaller than a
    part, a manifest or a marker, is then one PUT, not a multipart upload of three requests);
    a gs:// URI retries a failing request for GCS_RETRY."""
    scheme = paths.scheme(uri)
    if scheme == "s3" and "allow_delayed_open=" not in uri:
        return uri + ("&" if paths.split_query(uri)[1] else "?") + "allow_delayed_open=true"
    if scheme in ("gs", "gcs") and "retry_limit_seconds=" not in uri:
        return uri + ("&" if paths.split_query(uri)[1] else "?") + \
            f"retry_limit_seconds={GCS_RETRY.total_seconds():g}"
    return uri


def bucket_path(uri: str) -> str:
    """bucket/key of an s3:// or gs:// URI, as pyarrow reads it: escapes decoded, without the
    URI's user and password or its query (options that filesystem= replaces)."""
    parts = urllib.parse.urlsplit(escaped(uri))
    return parts.netloc.rpartition("@")[2] + urllib.parse.unquote(parts.path)


def azure_account_host(uri: str) -> str | None:
    """The account's host of an Azure URI in Hadoop's and Azure's form, container@<account>.
    dfs.<cloud> (or .blob.), lower-cased; None for any other form (pyarrow's account@host:port,
    an account key in the URI)."""
    container, at, host = urllib.parse.urlsplit(escaped(uri)).netloc.rpartition("@")
    if at and container and ":" not in container and _ACCOUNT_HOST.match(host):
        return host.lower()
    return None


def azure_path(uri: str, inner: str) -> str:
    """The container/path an abfs:// URI names: Hadoop's and Azure's container@account.dfs.
    <cloud>/path in any cloud (pyarrow reads the container so only in core.windows.net's), else
    as pyarrow reads it (a password, account@c, host:port/c/...); `inner` (the URI without its
    scheme) where it names no account (abfs://c/path, the account being filesystem='s)."""
    if azure_account_host(uri):
        parts = urllib.parse.urlsplit(escaped(uri))
        return parts.netloc.rpartition("@")[0] + urllib.parse.unquote(parts.path)
    try:
        return pafs.FileSystem.from_uri(escaped(uri))[1]  # (parses only: no request made)
    except Exception:  # no account in it
        return inner
