"""Reading files from where they live, fast behind latency: a file's bytes as a stream that an
object store fills ahead of the reader, in concurrent ranged requests.

A local file is opened as it is. A remote file (S3, GCS, ADLS, HDFS, fsspec) is streamed by
one request, read in ranges of `range_bytes` up to `ahead` ranges ahead of its reader, by a
pool of `io_threads` threads shared by every file being read: I/O concurrency (many files at
once) is its own setting, not the number of threads that decode. Memory is bounded by
ahead * (HEADROOM + range_bytes) per open file; ranges read whole are kept for the next
(Spares). stream_framed frames records in the ranges' own buffers (RangeStream.next_span). A
file's size comes from the manifest when it knows it, so opening a file costs no request of
its own.

With a FileCache (store.cache), a remote file read to its end (every byte, checked by the reader)
is kept in a local directory; later reads of the same file of the same write come from there.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from tfspark.errors import CorruptRecordError, access_denied
from tfspark.store.fs import Location
from tfspark.wire.stream import first_damage, refused

if TYPE_CHECKING:
    from tfspark.store.cache import FileCache

RANGE_BYTES = 8 * 2**20  # one read of a file's stream into the buffer
FIRST_BYTES = 2**20  # the first read: smaller, so decoding starts sooner
AHEAD = 4  # ranges of one file buffered ahead of its reader
# Room left before each range in its buffer: the reader's unused end of the range before (a
# partial record) is put there, so records are framed in the buffer the range was read into
# (RangeStream.next_span): no copy of the range.
HEADROOM = 2**20
IO_THREADS = 16  # requests in flight at once, over all files (remote reads)


class Fetcher:
    """Opens files for streaming reads: remote ones read ahead by a shared pool of threads
    (module docstring), local ones as they are. Close it (or use it as a context manager) to
    stop the pool."""

    def __init__(self, io_threads: int = IO_THREADS, range_bytes: int = RANGE_BYTES,
                 ahead: int = AHEAD, cache: FileCache | None = None):
        self.range_bytes, self.ahead, self.cache = range_bytes, ahead, cache
        self.io_threads = io_threads  # requests in flight at once
        self._spares = SPARES if range_bytes == RANGE_BYTES else \
            Spares(HEADROOM + range_bytes, 2 * ahead)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def open(self, loc: Location, size: int | None = None, key: str | None = None,
             start: int = 0, end: int | None = None) -> Any:
        """A readable binary stream of the file at loc (read as is, no decompression), from
        byte `start` to byte `end` (None: its end).

        size: its bytes when known (the manifest's), else asked of the store. key: what
        identifies this version of the file in the cache (its write's id); None: not cached.
        Only a file read whole fills the cache.
        """
        if self.cache is not None and key is not None:
            cached = self.cache.get(loc, key)
            if cached is not None:
                return Bounded(cached, start, end)
        try:  # (a reader opens files ahead, outside `reading`)
            if loc.is_local:
                return Bounded(loc.open_input(), start, end)
            if size is None:
                size = loc.size()
        except FileNotFoundError:
            raise missing(loc.uri) from None
        except OSError as e:
            if access_denied(e):
                raise refused(loc.uri, e) from e
            raise
        stream = RangeStream(loc, size if end is None else end, self._executor(),
                             range_bytes=min(self.range_bytes,
                                             size if end is None else end - start),
                             ahead=self.ahead, start=start, spares=self._spares)
        if self.cache is not None and key is not None and not start and end is None:
            return self.cache.filling(stream, loc, key, size)
        return stream

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.io_threads, thread_name_prefix="tfspark-io")
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


class Spares:
    """Range buffers read whole, kept (at most `keep`) for the next ranges of any file: a fresh
    buffer per range cost a page fault per 4 KiB, 29% of the own reader's page faults on
    blocks (docs/benchmarks.md). The default ranges' pool (SPARES) is the process's, so a
    reader made anew (a dataset per epoch, a validation set) finds them too: 72 MiB at most."""

    def __init__(self, size: int, keep: int):
        self.size, self.keep = size, keep
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Empty, with a new lock: a forked child (DataLoader workers) starts with its own, not
        with a copy of the parent's lock that a parent's thread may have held at the fork."""
        self._free, self._lock = [], threading.Lock()

    def take(self, want: int) -> np.ndarray:
        """A buffer of at least `want` bytes (uninitialized)."""
        if want <= self.size:
            with self._lock:
                if self._free:
                    return self._free.pop()
        return np.empty(max(want, self.size), np.uint8)

    def give(self, buf: np.ndarray) -> None:
        """buf is read whole: keep it for a next range."""
        if buf.size == self.size:
            with self._lock:
                if len(self._free) < self.keep:
                    self._free.append(buf)


SPARES = Spares(HEADROOM + RANGE_BYTES, 2 * AHEAD)
os.register_at_fork(after_in_child=SPARES.reset)


class RangeStream:
    """A remote file read front to back through one streaming request, `ahead` ranges of it
    buffered ahead of the reader by a task of the shared pool: readinto/read as a file object
    (for pyarrow's decompression), or next_span: the ranges themselves (for stream_framed).

    One stream, not ranged reads (read_at): pyarrow's GCS files serve read_at one request at
    a time and with two requests each, where streams of many files run in parallel (measured:
    8 files of 2 MB behind 50 ms took 0.58 s by read_at and 0.10 s by streams)."""

    def __init__(self, loc: Location, size: int, pool: ThreadPoolExecutor, *, range_bytes: int,
                 ahead: int, start: int, spares: Spares):
        self.loc, self.size, self._pool, self._start = loc, size - start, pool, start
        self._range, self._ahead = max(1, range_bytes), max(1, ahead)
        self._cond = threading.Condition()
        self._chunks: deque[memoryview] = deque()
        self._spares = spares
        self._held: np.ndarray | None = None  # the buffer self._buf is a view of
        self._big: np.ndarray | None = None  # where spans longer than the room gather
        self._big_end = 0  # (its bytes in use end there)
        self._file: Any = None
        self._eof = False
        self._error: BaseException | None = None
        self._pumping = True
        self._read = 0  # bytes read from the stream so far
        self._buf = memoryview(b"")
        self.closed = False
        pool.submit(self._pump)

    def _pump(self) -> None:
        """Read ranges into the buffer until it holds `ahead` of them (or the file ends)."""
        try:
            if self._file is None:
                if self._start:  # a read that resumes mid-file: ranged reads from there
                    self._file = self.loc.open_input()
                    self._file.seek(self._start)
                else:
                    self._file = self.loc.open_stream()
            while True:
                with self._cond:
                    if self.closed or self._eof or len(self._chunks) >= self._ahead:
                        self._pumping = False
                        break
                    first = self._read == 0
                want = min(FIRST_BYTES, self._range) if first else self._range
                want = min(want, self.size - self._read)  # a span ends before the file
                spare = self._spares.take(HEADROOM + want)
                got = self._file.readinto(spare.data[HEADROOM:HEADROOM + want]) if want > 0 \
                    else 0
                self._read += got  # (the network wait above holds no lock)
                with self._cond:
                    if got:
                        self._chunks.append(spare.data[HEADROOM:HEADROOM + got])
                    else:
                        self._eof = True
                    self._cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - handed to the reader
            with self._cond:
                self._error, self._pumping = e, False
                self._cond.notify_all()
        if self.closed and self._file is not None:  # closed while this read was in flight
            self._file.close()

    def _next_chunk(self) -> memoryview | None:
        """The next buffered range (waiting for it), None at the end of the file."""
        with self._cond:
            while not self._chunks and not self._eof and self._error is None \
                    and not self.closed:
                self._cond.wait()
            if self._error is not None:
                raise self._error
            if self.closed:
                raise OSError(f"{self.loc.uri}: read after the stream was closed")
            if not self._chunks:
                return None
            data = self._chunks.popleft()
            if not self._pumping and not self._eof:
                self._pumping = True
                self._pool.submit(self._pump)
            return data

    def readinto(self, out: Any) -> int:
        """Copy the next bytes into `out`; 0 at the end of the file."""
        view = memoryview(out).cast("B")
        done = 0
        while done < len(view):
            if not self._buf:
                if self._held is not None:  # read whole: its buffer takes a next range
                    self._spares.give(self._held)
                    self._held = None
                data = self._next_chunk()
                if data is None:
                    break
                self._buf, self._held = data, cast(np.ndarray, data.obj)
            n = min(len(view) - done, len(self._buf))
            view[done:done + n] = self._buf[:n]
            self._buf = self._buf[n:]
            done += n
        return done

    def next_span(self, carry: np.ndarray) -> np.ndarray | None:
        """The file's next bytes with `carry` (the unused end of the span before) in front, as
        one array: the next range's own buffer when carry fits in the room before it (the
        range is not copied). None at the end of the file. The span before is not to be used
        once this returns: its buffer takes other ranges."""
        held, self._held = self._held, None
        if self._buf:  # what readinto left of a range: after carry, in a copy
            left, self._buf = np.frombuffer(self._buf, np.uint8), memoryview(b"")
            span = np.concatenate([carry, left])
        else:
            data = self._next_chunk()
            if data is None:
                self._held = held  # carry may be a view of it: given back at close
                return None
            buf = cast(np.ndarray, data.obj)
            c, n = len(carry), len(data)
            if c <= HEADROOM:
                buf[HEADROOM - c:HEADROOM] = carry
                span, self._held, self._big = buf[HEADROOM - c:HEADROOM + n], buf, None
            else:
                span = self._grow(carry, np.frombuffer(data, np.uint8))
                self._spares.give(buf)
        if held is not None:
            self._spares.give(held)
        return span

    def _grow(self, carry: np.ndarray, data: np.ndarray) -> np.ndarray:
        """carry + data in one array for a carry longer than the room (a partial record longer
        than HEADROOM, up to records longer than a range): appended after carry where the span
        before was gathered and left room, else in a new array twice as long, so each byte is
        copied about once."""
        big, c, n = self._big, len(carry), len(data)
        at_end = big is not None and c and \
            carry.ctypes.data + c == big.ctypes.data + self._big_end
        if big is None or not at_end or self._big_end + n > big.size:
            big = self._big = np.empty(2 * (c + n), np.uint8)
            big[:c] = carry
            self._big_end = c
        start = self._big_end - c
        big[self._big_end:self._big_end + n] = data
        self._big_end += n
        return big[start:self._big_end]

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
        """Drop what is buffered; the stream closes once no read of it is in flight."""
        with self._cond:
            self.closed = True
            self._chunks.clear()
            if self._held is not None:
                self._spares.give(self._held)
                self._held = None
            busy = self._pumping
            self._cond.notify_all()
        if not busy and self._file is not None:
            self._file.close()

    def __enter__(self) -> RangeStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Bounded:
    """A local file read from byte `start` up to byte `end` (None: its end)."""

    def __init__(self, f: Any, start: int, end: int | None):
        self._f = f
        if start:
            f.seek(start)
        self._left = None if end is None else end - start
        self.closed = False

    def readinto(self, out: Any) -> int:
        """Read into out, up to the end."""
        view = memoryview(out).cast("B")
        if self._left is not None:
            view = view[:self._left]
            n = self._f.readinto(view) if len(view) else 0
            self._left -= n
            return int(n)
        return int(self._f.readinto(view))

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is left for n < 0)."""
        if self._left is not None:
            n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._f.read(n)
        if self._left is not None:
            self._left -= len(data)
        return bytes(data)

    def readable(self) -> bool:
        """A stream for reading."""
        return True

    def close(self) -> None:
        """Close the file."""
        self._f.close()
        self.closed = True

    def __enter__(self) -> Bounded:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@contextlib.contextmanager
def reading(loc: Location, name: str, gz: bool) -> Iterator[None]:
    """The errors of reading data file `loc` (named `name`) as every reader reports them: a
    missing file says the data set is incomplete; damage in a gzip file is looked for again
    from the file's start, to name the first damaged record (a reader of chunks cannot tell
    where in the uncompressed stream it was)."""
    try:
        yield
    except FileNotFoundError:
        raise missing(name) from None
    except CorruptRecordError as e:
        if not gz:
            raise
        with loc.open_stream() as again:
            raise (first_damage(again, "gzip", name) or e) from None


def missing(name: str) -> FileNotFoundError:
    """A data file the reader planned from the manifest is gone: how every reader says so."""
    return FileNotFoundError(f"{name}: named for reading but it does not exist: the data set "
                             f"was overwritten since this reader began (start a new reader), "
                             f"or is incomplete (deleted or moved files?)")


def hand_over(to: queue.Queue, item: Any, stop: threading.Event) -> bool:
    """Put item on a reader thread's bounded queue, waiting for room; False when the consumer
    stopped (`stop` set) first, so the thread can end instead of waiting for ever."""
    while not stop.is_set():
        try:
            to.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False
