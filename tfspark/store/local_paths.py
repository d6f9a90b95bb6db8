"""Paths as they reach local disk: a path Spark reports as a Hadoop URI, a relative path made
absolute once on the driver, and the places only local files can serve (checkpoints, charts,
caches), where an object-store URI is refused before any work."""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

from tfspark import paths
from tfspark.errors import OptionError
from tfspark.store.redaction import redact
from tfspark.store.uris import escaped


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
