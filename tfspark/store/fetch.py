"""Reading files from where they live, fast behind latency: a file's bytes as a stream that an
object store fills ahead of the reader, in concurrent ranged requests.

A local file is opened as it is. A remote file (S3, GCS, ADLS, HDFS, fsspec) is read in ranges
of `range_bytes`, up to `ahead` ranges of it in flight at once, by a pool of `io_threads`
threads shared by every file being read: I/O concurrency is its own setting, not the number of
threads that decode. Memory is bounded by ahead * range_bytes per open file. A file's size
comes from the manifest when it knows it, so opening a file costs no request of its own.

With a FileCache, a remote file read to its end (every byte, checked by the reader) is kept in
a local directory; later reads of the same file of the same write come from there.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from tfspark.store.fs import Location

RANGE_BYTES = 8 * 2**20  # one ranged request: large enough that latency is a small part of it
AHEAD = 4  # ranges of one file in flight at once
IO_THREADS = 16  # requests in flight at once, over all files (remote reads)


class Fetcher:
    """Opens files for streaming reads: remote ones read ahead by a shared pool of threads
    (module docstring), local ones as they are. Close it (or use it as a context manager) to
    stop the pool."""

    def __init__(self, io_threads: int = IO_THREADS, range_bytes: int = RANGE_BYTES,
                 ahead: int = AHEAD, cache: FileCache | None = None):
        self.range_bytes, self.ahead, self.cache = range_bytes, ahead, cache
        self._io_threads = io_threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def open(self, loc: Location, size: int | None = None, key: str | None = None) -> Any:
        """A readable binary stream of the file at loc (read as is, no decompression).

        size: its bytes when known (the manifest's), else asked of the store. key: what
        identifies this version of the file in the cache (its write's id); None: not cached.
        """
        if self.cache is not None and key is not None:
            cached = self.cache.get(loc, key)
            if cached is not None:
                return cached
        if loc.is_local:
            return loc.open_input()
        if size is None:
            size = loc.size()
        stream = RangeStream(loc, size, self._executor(), self.range_bytes, self.ahead)
        if self.cache is not None and key is not None:
            return self.cache.filling(stream, loc, key, size)
        return stream

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._io_threads, thread_name_prefix="tfspark-io")
            return self._pool

    def close(self) -> None:
        """Stop the pool (requests in flight finish first)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RangeStream:
    """A remote file read front to back, its ranges fetched ahead by a pool: readinto/read as a
    file object, for stream_framed and pyarrow's decompression."""

    def __init__(self, loc: Location, size: int, pool: ThreadPoolExecutor, range_bytes: int,
                 ahead: int):
        self.loc, self.size, self._pool = loc, size, pool
        self._range, self._ahead = max(1, range_bytes), max(1, ahead)
        # Opened in the pool too (a metadata request on most stores), before its first range.
        self._file: Future = pool.submit(loc.open_input)
        self._next = 0  # the start of the next range to request
        self._pending: deque[Future] = deque()
        self._buf = memoryview(b"")
        self.closed = False
        self._fill()

    def _fill(self) -> None:
        while len(self._pending) < self._ahead and self._next < self.size:
            start, n = self._next, min(self._range, self.size - self._next)
            self._pending.append(self._pool.submit(self._read_at, n, start))
            self._next += n

    def _read_at(self, n: int, start: int) -> bytes:
        return self._file.result().read_at(n, start)

    def readinto(self, out: Any) -> int:
        """Copy the next bytes into `out`; 0 at the end of the file."""
        view = memoryview(out).cast("B")
        done = 0
        while done < len(view):
            if not self._buf:
                if not self._pending:
                    break
                self._buf = memoryview(self._pending.popleft().result())
                self._fill()
            n = min(len(view) - done, len(self._buf))
            view[done:done + n] = self._buf[:n]
            self._buf = self._buf[n:]
            done += n
        return done

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is left for n < 0)."""
        if n is None or n < 0:
            n = self.size
        out = bytearray(n)
        got = self.readinto(out)
        return bytes(out[:got])

    def readable(self) -> bool:
        """A stream for reading."""
        return True

    def close(self) -> None:
        """Drop the ranges not read yet and the file."""
        for f in self._pending:
            f.cancel()
        self._pending.clear()
        if not self._file.cancel():
            try:
                self._file.result().close()
            except Exception:  # noqa: BLE001 - it never opened: nothing to close
                pass
        self.closed = True

    def __enter__(self) -> RangeStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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
        if self._out is not None and n:
            self._out.write(memoryview(out).cast("B")[:n])
            self._seen += n
        return int(n)

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is left for n < 0)."""
        data = self._stream.read(n)
        if self._out is not None and data:
            self._out.write(data)
            self._seen += len(data)
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
