"""A write task's file opens and closes on a store, off the thread that encodes.

On an object store opening a file for writing is a request (GCS starts an upload), and closing
it is its upload's last requests; a task that rolls over from file to file, or writes a file
per partition value, waited for each in turn (at 50 ms a request, a tenth of a second per
file). Here a file's open runs in the background while its first records wait in memory (at
most WAITING_BYTES for all of a task's files), and its close runs in the background while the
task encodes the next rows: at most AT_ONCE closes pending (each holds what its upload has not
sent yet), an error of any raised at the next close or at finish(). On local disk both are
system calls, made in place.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfspark.store.fs import Location

AT_ONCE = 8  # background requests of one task (a Spark executor runs a few tasks)
WAITING_BYTES = 16 * 2**20  # what a task's files hold in memory while their opens are on the way


class _Opening:
    """A file being opened in the background: what is written meanwhile waits in memory
    (within the task's WAITING_BYTES; past them the writer waits for the open)."""

    def __init__(self, opened: Future, budget: _Budget) -> None:
        self._opened = opened
        self._budget = budget
        self._stream: Any = None
        self._waiting: list[bytes] = []

    def write(self, data: Any) -> int:
        n = memoryview(data).nbytes
        if self._stream is None and not self._opened.done() and self._budget.take(n):
            self._waiting.append(bytes(data))  # a copy: the caller may reuse its buffer
            return n
        self._ready().write(data)
        return n

    def _ready(self) -> Any:
        if self._stream is None:
            self._stream = self._opened.result()
            for chunk in self._waiting:
                self._stream.write(chunk)
            self._budget.give(sum(len(c) for c in self._waiting))
            self._waiting.clear()
        return self._stream

    def flush(self) -> None:
        """Nothing to do: close() sends what waits (a store sends nothing before then)."""

    def close(self) -> None:
        self._ready().close()

    def abandon(self) -> None:
        """Close what was opened, without raising (the task is failing)."""
        try:
            self._opened.result().close()
        except Exception:  # noqa: BLE001 - best effort while failing
            pass


class _Budget:
    """The bytes a task's files may hold while their opens are on the way (a file's close
    sends its own in a background thread: hence the lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = 0

    def take(self, n: int) -> bool:
        with self._lock:
            if self._held + n > WAITING_BYTES:
                return False
            self._held += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self._held -= n


class Uploads:
    """The opens and closes of one write task's files (see the module docstring)."""

    def __init__(self, loc: Location) -> None:
        self.loc = loc
        self._pool = None if loc.is_local else ThreadPoolExecutor(
            AT_ONCE, thread_name_prefix="tfspark-upload")
        self._closing: deque[Future] = deque()
        self._budget = _Budget()

    def open(self, rel: str) -> Any:
        """loc/rel for writing: a stream with write, flush and close."""
        if self._pool is None:
            return self.loc.open_output(rel, bulk=True)
        return _Opening(self._pool.submit(self.loc.open_output, rel), self._budget)

    def close(self, stream: Any) -> None:
        """Close a stream open() gave (its last bytes written already): in the background on
        a store, after raising the first error of the closes done so far."""
        if self._pool is None:
            stream.close()
            return
        while self._closing and self._closing[0].done():
            self._closing.popleft().result()
        if len(self._closing) >= AT_ONCE:
            self._closing.popleft().result()
        self._closing.append(self._pool.submit(stream.close))

    def finish(self) -> None:
        """Wait for every close; raise the first error (every close is waited for first)."""
        if self._pool is None:
            return
        pending, self._closing = list(self._closing), deque()
        wait(pending)
        self._pool.shutdown()
        for done in pending:
            done.result()

    def abandon(self, streams: list[Any]) -> None:
        """On failure: close the streams still open and wait for every request, raising
        nothing, so that what the task wrote can then be removed."""
        if self._pool is None:
            for s in streams:
                try:
                    s.close()
                except Exception:  # noqa: BLE001 - best effort while failing
                    pass
            return
        for s in streams:
            s.abandon()
        wait(list(self._closing))
        self._closing.clear()
        self._pool.shutdown()
