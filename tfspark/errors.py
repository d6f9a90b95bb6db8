"""One exception family. Each error also inherits the builtin a caller would catch.

Messages name the column, file or option, the offending value or type, and what to do.
"""

from __future__ import annotations


class TfsparkError(Exception):
    """Base class of every error tfspark raises on purpose."""


class SchemaError(TfsparkError, ValueError):
    """A Spark schema or feature spec that cannot be mapped or is malformed."""


class EncodeError(TfsparkError, ValueError):
    """A batch that does not fit its spec: missing column, wrong type, bad value."""


class OptionError(TfsparkError, ValueError):
    """An unknown option, or an option with a value we do not accept."""


class CorruptRecordError(TfsparkError, IOError):
    """A TFRecord file with a bad CRC or a truncated record."""

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.path = path
        self.offset = offset
