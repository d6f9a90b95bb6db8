"""Paths, URIs and store errors as they may be shown: no credentials of a URI (its password,
its query options, which may hold keys or a SAS token's signature) in a message, log or
progress line. redact and redact_text are defined with what a path or URI is (every tfspark
error's message passes through redact_text), and given here to the store's modules."""

from __future__ import annotations

import re

from tfspark.errors import store_hint
from tfspark.paths import redact, redact_text

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
