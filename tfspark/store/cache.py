"""A local cache of remote files for repeated epochs (cache_dir=): per write of the data set,
filled as a file is read and kept only once it was read whole and checked."""

from __future__ import annotations

import os
import threading
from typing import Any

from tfspark.store.fs import Location


class FileCache:
    """Remote files kept in a local directory, per write: <dir>/<key>/<host and path>. An entry
    is written to a temporary name and renamed into place only once the whole file was read
    (the reader checked every CRC and the count), so a partial entry is never used; a new write
    of the data set has another key, so its files are fetched anew."""

    def __init__(self, directory: str):
        self.directory = os.path.abspath(directory)

    def path(self, loc: Location, key: str) -> str:
        """Where loc's file of write `key` is (or would be) kept."""
        return os.path.join(self.directory, key, loc.uri.split("://", 1)[-1].lstrip("/"))

    def get(self, loc: Location, key: str) -> Any:
        """The cached file, open for reading, or None."""
        target = self.path(loc, key)
        return open(target, "rb") if os.path.isfile(target) else None  # noqa: SIM115

    def filling(self, stream: Any, loc: Location, key: str, size: int) -> Any:
        """stream, copying what is read into the cache; kept when read to its end."""
        return _Filling(stream, self.path(loc, key), size)


class _Filling:
    """A stream that tees what is read into a temporary file, renamed into place at its end."""

    def __init__(self, stream: Any, target: str, size: int):
        self._stream, self._target, self._size = stream, target, size
        os.makedirs(os.path.dirname(target), exist_ok=True)
        self._tmp = f"{target}.tmp-{os.getpid()}-{threading.get_ident()}"
        self._out: Any = open(self._tmp, "wb")  # noqa: SIM115 - closed in close()
        self._seen = 0
        self.closed = False

    def readinto(self, out: Any) -> int:
        """Read into out, and into the cache file."""
        n = self._stream.readinto(out)
        self._keep(memoryview(out).cast("B")[:n])
        return int(n)

    def next_span(self, carry: Any) -> Any:
        """The stream's next span (RangeStream.next_span); its new bytes go into the cache."""
        span = self._stream.next_span(carry)
        if span is not None:
            self._keep(memoryview(span[len(carry):]))
        return span

    def _keep(self, data: Any) -> None:
        """Write bytes just read into the cache file (while it is being filled)."""
        if self._out is not None and len(data):
            self._out.write(data)
            self._seen += len(data)

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is left for n < 0)."""
        data = self._stream.read(n)
        self._keep(data)
        return bytes(data)

    def readable(self) -> bool:
        """A stream for reading."""
        return True

    def complete(self) -> None:
        """The reader read and checked the whole file: keep the copy (when it is whole)."""
        if self._out is None:
            return
        self._out.close()
        self._out = None
        if self._seen == self._size:
            os.replace(self._tmp, self._target)
        else:
            os.unlink(self._tmp)

    def close(self) -> None:
        """Close the stream; a copy not completed is dropped."""
        if self._out is not None:
            self._out.close()
            self._out = None
            os.unlink(self._tmp)
        self._stream.close()
        self.closed = True

    def __enter__(self) -> _Filling:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
