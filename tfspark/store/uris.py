"""A path or URI as the stores see it: how pyarrow parses it, how it may be shown, and how
it reaches local disk.

Parsed: what a user types in a path that a URI may not hold escaped, and the path in the store
that a URI names, for the filesystem= given with it.

Shown: paths, URIs and store errors carry no credentials of a URI (its password, its query
options, which may hold keys or a SAS token's signature) in a message, log or progress line.
redact and redact_text are defined with what a path or URI is (every tfspark error's message
passes through redact_text), and given here to the store's modules.

Local: paths as they reach local disk: a path Spark reports as a Hadoop URI, a relative path
made absolute once on the driver, and the places only local files can serve (checkpoints,
charts, caches), where an object-store URI is refused before any work."""

from __future__ import annotations

import datetime
import os
import re
import urllib.parse
from typing import Any

import pyarrow.fs as pafs

from tfspark import paths
from tfspark.errors import OptionError, store_hint
from tfspark.paths import redact, redact_text

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


__all__ = ["error_line", "failed_request", "redact", "redact_text"]


def error_line(error: BaseException) -> str:
    """A store client's error as it may be shown: on one line (Azure's ends in a blank line and
    a request id), every URI in it redacted (Azure's name the request's URL, whose query holds a
    SAS token's signature)."""
    text = _without_error_info(" ".join(str(error).split()))
    return redact_text(_MANGLED.sub(_demangled, text))


# A C++ class's name as pyarrow's Azure client shows it, mangled: N5Azure4Core...ExceptionE.
_MANGLED = re.compile(r"\bN(\d[0-9A-Za-z_]*?)E\b")


def _demangled(m: re.Match[str]) -> str:
    """Azure::Core::...Exception for a mangled nested name; the text as it was otherwise."""
    body, parts, i = m.group(1), [], 0
    while i < len(body):
        digits = re.match(r"\d+", body[i:])
        if digits is None:
            return m.group(0)
        start = i + digits.end()
        parts.append(body[start:start + int(digits.group())])
        i = start + int(digits.group())
    return "::".join(parts) if i == len(body) and len(parts) > 1 else m.group(0)


def _without_error_info(text: str) -> str:
    """text without a google::cloud::Status's " error_info={...}": the GCS client's metadata
    of the error, which repeats its message whole."""
    start = text.find(" error_info={")
    if start < 0:
        return text
    depth = 0
    for i in range(start + len(" error_info="), len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[:start] + text[i + 1:]
    return text[:start]


def failed_request(error: BaseException, otherwise: str) -> str:
    """A store request's error for a message: the client's words (error_line), then what to check
    (`otherwise` unless no server answered)."""
    return f"{error_line(error).rstrip('.')}; {store_hint(error) or otherwise}"


def uri_to_path(uri: str) -> str:
    """A path as Spark reports it (Hadoop URIs: `file:/tmp/a%20b`, `s3a://bucket/k%23`) as a
    path or URI that `locate` opens: escapes decoded, file: dropped, s3a/s3n -> s3."""
    parsed = urllib.parse.urlsplit(escaped(uri))  # (a path typed with "#" or " " too)
    if not parsed.scheme or len(parsed.scheme) == 1:  # a plain path (or a Windows drive)
        return uri
    path = urllib.parse.unquote(parsed.path)
    if parsed.scheme == "file":
        return path
    scheme = {"s3a": "s3", "s3n": "s3"}.get(parsed.scheme, parsed.scheme)
    return f"{scheme}://{parsed.netloc}{path}"


def absolute(path: str) -> str:
    """A local path made absolute against this process's working directory (URIs unchanged):
    resolved once, on the driver, so Spark's JVM and Python workers write the same place."""
    if not isinstance(path, str) or paths.scheme(path) or not path.strip():
        return path
    if path.startswith("file:"):
        return path
    return os.path.abspath(path)


def local_only(path: Any, option: str, why: str, after: str = "", where: str = "") -> str:
    """`path` (a local path, a PathLike or a file:// URI) as a local path, for what only plain
    files serve. Anything else, an object-store URI above all, is one OptionError:
    `{option} '{path}'{where}: {why}, so give a local path{after}` (the URI redacted)."""
    if not isinstance(path, (str, os.PathLike)):
        raise OptionError(f"{option}{where} must be a local path, got {type(path).__name__}")
    text = os.fspath(path)
    if paths.is_store_uri(text):
        raise OptionError(f"{option} {redact(text)!r}{where}: {why}, so give a local "
                          f"path{after}")
    return text[len("file://"):] if text.startswith("file://") else text


def local_directory(path: str, option: str) -> str:
    """`path` (a local path or file:// URI) as an absolute local directory, created if missing:
    for what Keras saves through plain files (checkpoints). OptionError names `option` for an
    object-store URI or a directory that cannot be made."""
    local = os.path.abspath(local_only(
        path, option, "Keras saves checkpoints to files", " (a mounted or network one every "
        "machine training sees, e.g. /dbfs/... on Databricks), not an object-store URI"))
    try:
        os.makedirs(local, exist_ok=True)
    except OSError as e:
        raise OptionError(f"{option} {path!r} cannot be created here: {e}") from e
    return local
