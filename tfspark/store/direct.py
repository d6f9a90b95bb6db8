"""A large local file written past the operating system's page cache (O_DIRECT).

A write task's TFRecord files and its file of the parquet copy are written once and not read
back by the task. Through the page cache every byte is first copied into a fresh page of kernel
memory (on a virtual machine, a page its host may first have to supply) and written out from
there later; with O_DIRECT the bytes go from a reused, aligned buffer of the process to the disk,
and the copy's CPU time is saved (the benchmarks page has the export's figures).

The bytes are gathered in CHUNK-sized aligned buffers; a full one is written in the background
while the next fills (one write at a time, so a slow disk holds the writer back instead of its
memory growing: two buffers per open file at most). At close the aligned part of what is left
goes out the same way and the last bytes (less than ALIGN) through the page cache. Where the
filesystem refuses O_DIRECT (at open, or on a write) the file is written as any other.
"""

from __future__ import annotations

import errno
import mmap
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

ALIGN = 4096  # what O_DIRECT asks of offsets, lengths and addresses: a multiple of any
# logical block size in use (512 or 4,096 bytes)
CHUNK = 4 << 20  # bytes per write (a multiple of ALIGN): 4 MiB, where 1 MiB handed the writing
# thread four times as many writes, and the export took longer in each of two side-by-side runs
_O_DIRECT = getattr(os, "O_DIRECT", 0)
_REFUSED = {errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}  # what a filesystem says to O_DIRECT


def open_direct(path: str) -> DirectFile | None:
    """path for writing (created, or truncated): a DirectFile, or None where O_DIRECT is not
    to be had (a system without it, or a filesystem that refuses it)."""
    if not _O_DIRECT:
        return None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | _O_DIRECT,
                     0o666)
    except OSError as e:
        if e.errno not in _REFUSED:
            raise
        return None
    return DirectFile(fd)


class DirectFile:
    """A binary output stream (write, tell, flush, close) over a file descriptor opened with
    O_DIRECT (see the module docstring). Every byte written is in the file once close()
    returns; flush() keeps what does not fill a chunk until then."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffers: list[mmap.mmap] = []  # page aligned; made as they are needed
        self._filling = 0  # the buffer that takes the next bytes
        self._filled = 0
        self._writer: ThreadPoolExecutor | None = None  # its one thread, from the first chunk
        self._writing: Future | None = None
        self._direct = True
        self._position = 0
        self.closed = False

    def write(self, data: Any) -> int:
        """Take data's bytes (any buffer: bytes, an array, a view); returns how many."""
        if self.closed:
            raise ValueError("write to a closed file")
        view = memoryview(data).cast("B")
        size = view.nbytes
        while view.nbytes:
            if self._filling == len(self._buffers):
                self._buffers.append(mmap.mmap(-1, CHUNK))
            n = min(CHUNK - self._filled, view.nbytes)
            self._buffers[self._filling][self._filled:self._filled + n] = view[:n]
            self._filled += n
            view = view[n:]
            if self._filled == CHUNK:
                self._send()
        self._position += size
        return size

    def tell(self) -> int:
        """The bytes written so far."""
        return self._position

    def writable(self) -> bool:
        """True: a stream for writing (what a Python file object says)."""
        return True

    def flush(self) -> None:
        """Nothing: what does not fill a chunk is written at close."""

    def _send(self) -> None:
        """The full buffer written in the background, once the write before it is done;
        the other buffer fills meanwhile."""
        self._wait()
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="tfspark-direct-write")
        self._writing = self._writer.submit(self._write, memoryview(self._buffers[self._filling]))
        self._filling ^= 1
        self._filled = 0

    def _wait(self) -> None:
        """After the background write; its error raised."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def _write(self, view: memoryview) -> None:
        while view.nbytes:
            try:
                n = os.write(self._fd, view)
            except OSError as e:
                if e.errno not in _REFUSED or not self._direct:
                    raise
                self.buffered()  # refused after all (the alignment): the page cache then
                continue
            if n % ALIGN:  # a short write off the alignment: the rest as any file
                self.buffered()
            view = view[n:]

    def buffered(self) -> None:
        """The rest of the file through the page cache (as where O_DIRECT is refused)."""
        if self._direct:
            import fcntl

            flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
            fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~_O_DIRECT)
            self._direct = False

    def close(self) -> None:
        """Write what is left and close the file; raises the first error of any write."""
        if self.closed:
            return
        self.closed = True
        try:
            self._wait()
            if self._filled:
                rest = memoryview(self._buffers[self._filling])[:self._filled]
                aligned = self._filled // ALIGN * ALIGN
                self._write(rest[:aligned])
                self.buffered()
                self._write(rest[aligned:])
        finally:
            if self._writer is not None:  # (its last write ended: waited for above)
                self._writer.shutdown()
            os.close(self._fd)
