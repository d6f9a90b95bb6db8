"""How far the reading threads run ahead: their default number (the cores this process may
use), how many files each opens before it needs them (a share of the requests in flight), and
those opened files themselves. Both readers (numpy.interleave, tf.records) use these."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from tfspark.store.fetch import AHEAD, RANGE_BYTES


def cores() -> int:
    """The CPU cores this process may run on (a container's share, not the host's count): the
    default of the threads that decode, which I/O concurrency (io_threads) does not follow."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def files_ahead(io_threads: int, slots: int, sizes: Sequence[int] | None = None) -> int:
    """Files each of `slots` reading threads opens before it needs them (their first ranges
    requested while it reads one): the requests in flight (io_threads) shared among the
    threads, a file's stream taking up to AHEAD ranges, fewer when the files are smaller
    (`sizes`: their bytes, when known). Small files so have more of them on the way: at 100 ms
    a file of 12 MiB is read in less than one round trip."""
    per_file = AHEAD
    if sizes:
        per_file = max(1, min(AHEAD, -(-(sum(sizes) // len(sizes)) // RANGE_BYTES)))
    return max(1, io_threads // slots // per_file)


class OpenedAhead:
    """The files a reading thread reads after its current one, opened before it needs them
    (a remote file's first ranges on the way); close() closes those it never took."""

    def __init__(self, open_file: Callable[[Any], Any], files: Sequence[Any]):
        self._open, self._files = open_file, files
        self._opened: dict[int, Any] = {}  # by place in `files`

    def open_after(self, p: int, n: int) -> None:
        """Open the n files after the p-th (those not open yet)."""
        for q in range(p + 1, min(len(self._files), p + 1 + n)):
            if q not in self._opened:
                self._opened[q] = self._open(self._files[q])

    def take(self, p: int) -> Any:
        """The p-th file's stream when it was opened ahead, else None."""
        return self._opened.pop(p, None)

    def close(self) -> None:
        """Close the files opened and never taken."""
        for stream in self._opened.values():
            stream.close()
        self._opened.clear()
