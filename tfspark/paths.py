"""A path or a URI: the one definition every entry point uses.

A URI starts with a scheme of two letters or more and "://" (s3://bucket/key, gs://...,
abfs://..., hdfs://..., file:///tmp/x); anything else is a local path, whatever it holds. Only a
URI on a store carries a query (pyarrow's options after "?"): in a local path, or in a file://
URI, "?", "#", "%" and spaces are characters of a directory's name like any other.

A URI is shown (in messages, logs, progress lines, manifests) without what may be a secret:
its query as "?..." and a password in it as "***".
"""

from __future__ import annotations

import re

# scheme://: two characters at least, so that C:\data (a Windows drive) is a path
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
# A URI inside free text: scheme://, then up to a space or a quote, not ending on the
# punctuation of the sentence around it.
_URI_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*[^\s'\".,;:!?)\]}]")


def scheme(path: str) -> str:
    """The scheme of a URI, lower-cased ("s3", "gs", "file", ...); "" for a local path."""
    m = _SCHEME.match(path) if isinstance(path, str) else None
    return m.group(1).lower() if m else ""


def is_store_uri(path: str) -> bool:
    """Whether `path` is a URI of a store (any scheme but file://): what pyarrow opens."""
    return scheme(path) not in ("", "file")


def split_query(path: str) -> tuple[str, str]:
    """(path or URI without its query, the query with its "?" or ""): the query of a store's
    URI; a local path and a file:// URI have none (their "?" is part of a name)."""
    if not is_store_uri(path):
        return path, ""
    base, mark, query = path.partition("?")
    return base, mark + query


def without_query(path: str) -> str:
    """`path` without a store URI's query (a local path unchanged)."""
    return split_query(path)[0]


def with_child(path: str, name: str) -> str:
    """path/name, a store URI's query kept after it (its options say how to reach the store)."""
    base, query = split_query(path)
    return f"{base.rstrip('/')}/{name}{query}"


def redact(path: str) -> str:
    """A path or URI as it may be shown: a store URI's query (options that may hold keys) as
    "?..." and a password in it (s3://KEY:SECRET@bucket/...) as "***"; a local path as it is."""
    if not is_store_uri(path):
        return path
    base, query = split_query(path)
    head, rest = base.split("://", 1)
    authority, slash, tail = rest.partition("/")
    user, at, host = authority.rpartition("@")
    if at and ":" in user:
        authority = f"{user.split(':', 1)[0]}:***@{host}"
    return f"{head}://{authority}{slash}{tail}" + ("?..." if query else "")


def redact_text(text: str) -> str:
    """`text` with every URI in it redacted: for messages built by others (Spark's, a store
    client's) that may repeat a path as the user gave it."""
    return _URI_IN_TEXT.sub(lambda m: redact(m.group(0)), text)
