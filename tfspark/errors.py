"""One exception family. Each error also inherits the builtin a caller would catch.

Messages name the column, file or option, the offending value or type, and what to do.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from tfspark.paths import redact_text

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["AccessError", "CorruptRecordError", "CountMismatchError", "EncodeError",
           "ManifestError", "MissingExtraError", "OptionError", "SchemaError", "TfsparkError",
           "TrainingError", "WriteConflictError"]


class TfsparkError(Exception):
    """Base class of every error tfspark raises on purpose. Its message is shown with every URI
    in it redacted (redact_text): a store client's words may name a URL whose query holds a
    credential, which no tfspark message may show. Raised while handling a store's error (the
    usual `raise ... from error`), it scrubs that error too: a traceback shows the chain."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        scrub(sys.exc_info()[1])

    def __str__(self) -> str:
        return redact_text(super().__str__())


class SchemaError(TfsparkError, ValueError):
    """A Spark schema or feature spec that cannot be mapped or is malformed."""


class EncodeError(TfsparkError, ValueError):
    """A batch that does not fit its spec: missing column, wrong type, bad value."""


class OptionError(TfsparkError, ValueError):
    """An unknown option, or an option with a value we do not accept."""


class StateMismatch(OptionError):
    """A state saved by a reader that gives other batches; `what` says what differs."""

    def __init__(self, what: str, message: str | None = None):
        super().__init__(message or f"state: saved by a reader that gives other batches "
                                    f"({what}); resume with the same data set and arguments, "
                                    f"or start without state=")
        self.what = what


class CorruptRecordError(TfsparkError, IOError):
    """A TFRecord file with a bad CRC or a truncated record."""

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset


class AccessError(TfsparkError, PermissionError):
    """A file the file system or store would not let tfspark read (permissions, credentials):
    nothing is known of its data."""

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path


class ManifestError(TfsparkError, ValueError):
    """A manifest (`_tfspark.json`) that is missing, unreadable, damaged or not ours."""


class WriteConflictError(TfsparkError, RuntimeError):
    """Another write committed to the same path while this one ran."""


class CountMismatchError(TfsparkError, RuntimeError):
    """Source, backup and TFRecord row counts disagree."""


class TrainingError(TfsparkError, RuntimeError):
    """Distributed training failed in a worker, more times than Spark retries the stage."""


def install(extra: str) -> str:
    """The pip command that installs tfspark with `extra`."""
    from tfspark import DISTRIBUTION

    return f"pip install '{DISTRIBUTION}[{extra}]'"


class MissingExtraError(TfsparkError, ImportError):
    """A part of tfspark whose optional dependency is not installed; names the extra."""

    def __init__(self, part: str, module: str, extra: str, why: str = ""):
        super().__init__(f"{part} needs {module}, which is not installed: "
                         f"{install(extra)}{why}", name=module)
        self.extra = extra


def require(module: str, part: str, extra: str, why: str = "") -> None:
    """Raise MissingExtraError unless `module` can be imported (found, not imported)."""
    from importlib.util import find_spec

    if find_spec(module) is None:
        raise MissingExtraError(part, module, extra, why)


# How pyarrow's S3, GCS and Azure filesystems say that no server answered (their HTTP clients'
# words: curl's, GCS's and Azure's SDKs).
_UNREACHABLE = re.compile(r"NETWORK_CONNECTION|could(?: not|n't) (?:connect|resolve)|failed to "
                          r"connect|connection refused|timed? ?out|timeout was reached", re.I)


# How file systems and stores refuse access: the OS's EACCES, S3's AccessDenied, GCS's 403 and
# PERMISSION_DENIED, Azure's AuthorizationFailure / AuthorizationPermissionMismatch.
_ACCESS_DENIED = re.compile(r"AccessDenied|Access Denied|PERMISSION_DENIED|Authorization"
                            r"(?:PermissionMismatch|Failure)|HTTP status 403|\b403 Forbidden|"
                            r"Permission denied", re.I)


def access_denied(error: BaseException) -> bool:
    """Whether a file system's or store's error says that it refused access to a file."""
    return isinstance(error, PermissionError) or bool(_ACCESS_DENIED.search(str(error)))


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """" (did you mean 'split'?)" for a name close to one of `known` (a typo), else ""."""
    names = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(names), n=1, cutoff=0.6)
    return f" (did you mean {names[close[0]]!r}?)" if close else ""


# How pyarrow's GCS client says it found no credentials (Application Default Credentials: no
# key file, no gcloud login, not on Google Cloud; retried as a failed request to the metadata
# server, so the words of an unreachable server follow).
_NO_GCS_CREDENTIALS = re.compile(r"could not create an? OAuth2 access token", re.I)
# ... and its Azure client (DefaultAzureCredential found none of its ways to sign in).
_NO_AZURE_CREDENTIALS = re.compile(r"failed to get token from \w*Credential", re.I)
_AZURE_TOKEN_OVER_HTTP = re.compile(r"bearer token authentication is not permitted", re.I)


def store_hint(error: BaseException) -> str | None:
    """What to check when an object store's client could not reach it: it found no credentials,
    or no server answered; None for other errors."""
    text = str(error)
    if _NO_GCS_CREDENTIALS.search(text):
        return ("Cloud Storage got no access token (no credentials found): run `gcloud auth "
                "application-default login`, set GOOGLE_APPLICATION_CREDENTIALS to a service "
                "account's key file, or pass filesystem= (the CLI: a [store] table, with "
                "anonymous = true for a public bucket or an emulator)")
    if _NO_AZURE_CREDENTIALS.search(text):
        return ("Azure got no token (no credentials found): run `az login`, set "
                "AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (a service "
                "principal), or pass filesystem= with account_key= or sas_token= (the CLI: a "
                "[store] table)")
    if _AZURE_TOKEN_OVER_HTTP.search(text):
        return ("Azure signs in with a token only over https: for an endpoint over http (an "
                "emulator such as Azurite) give account_key= or sas_token= (the CLI: in a "
                "[store] table)")
    if _UNREACHABLE.search(text):
        return ("no server answered: check the store's endpoint (endpoint_override; Azure: "
                "blob_storage_authority), the network, and that the server runs")
    return None


# A tfspark error raised in a Spark task or in the data source on the driver reaches the caller
# inside a Spark exception, as "tfspark.<module>.<Class>: <message>": a line of its traceback,
# or after Spark's own prefix when spark.sql.execution.pyspark.udf.hideTraceback is on.
_WRAPPED = re.compile(r"(?:^|: )tfspark\.[\w.]*?(\w+Error): (.+)$", re.MULTILINE)


def wrapped(text: str) -> tuple[str, str] | None:
    """(class name, message) of the last tfspark error in a Spark exception's text, or None."""
    found = [(name, message.strip()) for name, message in _WRAPPED.findall(text)
             if name in __all__]
    return found[-1] if found else None


def scrub(error: BaseException | None) -> BaseException | None:
    """`error`, with every URI in its message, and in those of the errors it was raised from or
    while handling, redacted in place (a traceback, Spark's or TensorFlow's included, prints the
    whole chain; Azure's errors name the request's URL, a SAS token's signature in its query)."""
    todo, seen = [error], set()
    while todo:
        each = todo.pop()
        if each is None or id(each) in seen:
            continue
        seen.add(id(each))
        try:
            _scrub_one(each)
        except Exception:  # noqa: BLE001, S110 - an odd class: the error itself must go on
            pass
        todo += [each.__cause__, each.__context__]
    return error


def _scrub_one(error: BaseException) -> None:
    error.args = tuple(redact_text(a) if isinstance(a, str) else a for a in error.args)
    if isinstance(error, OSError):  # (its message is strerror and filenames, when set)
        for name in ("strerror", "filename", "filename2"):
            if isinstance(getattr(error, name), str):
                setattr(error, name, redact_text(getattr(error, name)))
    notes = getattr(error, "__notes__", None)  # (add_note's: printed under the message)
    if isinstance(notes, list):
        notes[:] = [redact_text(n) if isinstance(n, str) else n for n in notes]


def scrubbed(fn: F) -> F:
    """fn, whose errors leave it scrubbed (scrub): for each place an error leaves tfspark's
    code: a public function, a Spark task, a generator that TensorFlow or Spark iterates (there
    the error becomes text, its traceback with it). A generator function stays one."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args: Any, **kwargs: Any) -> Any:
            try:
                return (yield from fn(*args, **kwargs))
            except BaseException as e:
                scrub(e)
                raise
        return generator  # type: ignore[return-value]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BaseException as e:
            scrub(e)
            raise
    return call  # type: ignore[return-value]
