"""Paths and URIs as they may be shown: no credentials of a URI (its password, its query
options, which may hold keys) in a message, log or progress line."""

from __future__ import annotations

import re

# A URI inside free text: scheme://, then up to a space or a quote, not ending on the
# punctuation of the sentence around it.
_URI = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]*[^\s'\".,;:!?)\]}]")


def redact(uri: str) -> str:
    """A path or URI as it may be shown: its query (options that may hold keys) as "?..." and
    a password in it (s3://KEY:SECRET@bucket/...) as "***"."""
    if "://" not in uri:
        return uri
    scheme, rest = uri.split("://", 1)
    rest, query, _ = rest.partition("?")
    authority, slash, tail = rest.partition("/")
    user, at, host = authority.rpartition("@")
    if at and ":" in user:
        authority = f"{user.split(':', 1)[0]}:***@{host}"
    return f"{scheme}://{authority}{slash}{tail}" + ("?..." if query else "")


def redact_text(text: str) -> str:
    """`text` with every URI in it redacted: for messages built by others (Spark's, a store
    client's) that may repeat a path as the user gave it."""
    return _URI.sub(lambda m: redact(m.group(0)), text)
