"""A local cache of remote files for repeated epochs (cache_dir=): per write of the data set,
filled as a file is read and kept only once it was read whole and checked."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from tfspark.store.fs import Location
from tfspark.store.lock import alive


class FileCache:
    """Remote files kept in a local directory, per write: <dir>/<key>/<host and path>. An entry
    is written to a temporary name and renamed into place only once the whole file was read
    (the reader checked every CRC and the count), so a partial entry is never used; a new write
    of the data set has another key, so its files are fetched anew."""

    def __init__(self, directory: str):
        self.directory = os.path.abspath(directory)

    @classmethod
    def swept(cls, directory: str | os.PathLike | None, files: Sequence[Location],
              versions: Sequence[str | None] | None) -> FileCache | None:
        """The cache in `directory` (None: no cache), first rid of what these files' data set
        left there that no reader can use again: its directories under the keys of writes it
        no longer holds (an overwrite's: else each rewrite would add a copy), and copies a
        process killed while filling left half-written."""
        if directory is None:
            return None
        cache = cls(os.fspath(directory))
        current = {v for v in versions or () if v}
        if not current:  # files of no known write are not cached
            return cache
        dirs = {os.path.relpath(os.path.dirname(cache.path(loc, "")), cache.directory)
                for loc in files if not loc.is_local}  # as they lie under each key
        try:
            keys = os.listdir(cache.directory)
        except FileNotFoundError:
            return cache
        for key in keys:
            for d in dirs:
                here = os.path.join(cache.directory, key, d)
                if key not in current:  # files only: a data set's directory may hold others'
                    _drop_files(here, _not_filling)  # (a newer write's being filled: kept)
                    _prune(here, os.path.join(cache.directory, key))
                else:
                    _drop_files(here, _dead_fill)
        return cache

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
        # Unique to this fill: a cache directory may be shared by processes of several hosts
        # (a network mount), where pids and thread ids repeat; the host and pid say whether
        # its filler is gone (_dead_fill).
        self._tmp = f"{target}.tmp-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
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
        try:  # (gone: swept by a reader of an older version of the data set; not kept)
            if self._seen == self._size:
                os.replace(self._tmp, self._target)
            else:
                os.unlink(self._tmp)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        """Close the stream; a copy not completed is dropped."""
        if self._out is not None:
            self._out.close()
            self._out = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)
        self._stream.close()
        self.closed = True

    def __enter__(self) -> _Filling:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())
# _Filling's temporary name: .tmp-<host>-<pid>-<nonce>
_FILLING = re.compile(r"\.tmp-([A-Za-z0-9._]+)-(\d+)-[0-9a-f]{12}$")


def _drop_files(directory: str, drop: Callable[[str], bool]) -> None:
    """Remove the files directly in directory whose name `drop` accepts."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.is_file(follow_symlinks=False) and drop(entry.name):
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                pass


def _not_filling(name: str) -> bool:
    """A kept copy, or a temporary one whose filling process is gone."""
    return not _FILLING.search(name) or _dead_fill(name)


def _dead_fill(name: str) -> bool:
    """A temporary copy whose filling process, on this host, is gone (killed); another
    host's are left to that host."""
    m = _FILLING.search(name)
    return bool(m) and m.group(1) == _HOST and not alive(int(m.group(2)))  # type: ignore[union-attr]


def _prune(directory: str, stop: str) -> None:
    """Remove directory and its parents up to and including `stop` while they are empty."""
    while directory.startswith(stop):
        try:
            os.rmdir(directory)
        except OSError:
            return
        directory = os.path.dirname(directory)
