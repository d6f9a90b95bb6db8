"""Batches handed from a reading process to the training process through shared memory
(read_batches(..., processes=N)): the reading process copies a batch's arrays into a segment
and sends only where each lies; the training process views them there, copying nothing, and
the segment is used again once every array viewing it is gone (weakref.finalize on the
arrays' common base). A pickled batch would cost the training process's interpreter a copy
and an unpickle of every array, the cost that bounded Grain's and DataLoader's worker
processes on the GPU machine (docs/benchmarks.md).

A segment is a memfd (Linux) or an unlinked temporary file, mapped by both processes; its file
descriptor is passed over the processes' socket, so no name is left behind if either dies.
"""

from __future__ import annotations

import math
import mmap
import os
import tempfile
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

import numpy as np

from tfspark.errors import OptionError
from tfspark.numpy.columns import Ragged

_ALIGN = 64  # every array starts on a cache line
_GRAIN = 1 << 20  # segments are sized in whole MiB, with room to spare, so they are reused


class Segment:
    """One shared mapping: made by the reading process, received by the training process."""

    def __init__(self, size: int, fd: int | None = None):
        """A new segment of `size` bytes, or (fd given) the mapping of one received; either
        way the segment owns the descriptor (closed if the mapping fails, else by close_file)."""
        self.fd = _anonymous_file(size) if fd is None else fd
        self.size = size
        try:
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise

    def send(self, conn: Connection, pid: int) -> None:
        """Pass this segment's file to the process at the other end of `conn`."""
        send_handle(conn, self.fd, pid)

    @classmethod
    def receive(cls, conn: Connection, size: int) -> Segment:
        """The segment the other end just sent (after its size, in a message of its own)."""
        segment = cls(size, recv_handle(conn))
        segment.close_file()  # the mapping stays
        return segment

    def close_file(self) -> None:
        """Close this process's descriptor (once sent); the mapping stays."""
        os.close(self.fd)


def unsendable(e: BaseException) -> OptionError:
    """The error for reader arguments that do not pickle here or unpickle there."""
    return OptionError(f"processes=: the reader's arguments cannot be sent to a reading "
                       f"process ({type(e).__name__}: {e}); give the filesystem and spec as "
                       f"ones that pickle and import in a fresh Python (a URI, a pyarrow "
                       f"filesystem, a class of an installed module) or leave processes= out")


def segment_size(nbytes: int) -> int:
    """A segment's size for batches of `nbytes`: a quarter more, in whole MiB."""
    return max(_GRAIN, -(-(nbytes + nbytes // 4) // _GRAIN) * _GRAIN)


def _anonymous_file(size: int) -> int:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("tfspark-batch", getattr(os, "MFD_CLOEXEC", 0))
    else:  # macOS: a temporary file, unlinked at once
        where = "/dev/shm" if os.path.isdir("/dev/shm") else None
        fd, path = tempfile.mkstemp(prefix="tfspark-batch-", dir=where)
        os.unlink(path)
    os.ftruncate(fd, size)
    return fd


# ---- a batch as a layout (small, pickled) and its arrays' bytes (in the segment)

def layout(batch: Any) -> tuple[Any, list[tuple[int, np.ndarray]], int]:
    """(layout, [(offset, array)], bytes needed): the batch's structure with each plain array
    replaced by where it goes; object arrays (strings="object") stay in the layout itself."""
    placed: list[tuple[int, np.ndarray]] = []
    end = 0

    def walk(value: Any) -> Any:
        nonlocal end
        if isinstance(value, Ragged):
            return ("r", walk(value.values), walk(value.row_splits))
        if isinstance(value, dict):
            return ("d", [(k, walk(v)) for k, v in value.items()])
        if isinstance(value, tuple):
            return ("t", [walk(v) for v in value])
        if isinstance(value, np.ndarray) and value.dtype != object:
            at = -(-end // _ALIGN) * _ALIGN
            placed.append((at, value))
            end = at + value.nbytes
            return ("a", at, value.dtype.str, value.shape)
        return ("o", value)

    return walk(batch), placed, end


def write(segment: Segment, placed: list[tuple[int, np.ndarray]]) -> None:
    """Copy the arrays into the segment where layout() put them (NumPy releases the GIL)."""
    for at, array in placed:
        if array.nbytes:
            view = np.frombuffer(segment.map, array.dtype, array.size, at)
            np.copyto(view.reshape(array.shape), array)


def view(segment: Segment, tree: Any, nbytes: int, freed: Callable[[], None]) -> Any:
    """The batch whose layout is `tree`, its arrays views of the segment; `freed` is called
    once none of them is referenced any more."""
    base = np.frombuffer(memoryview(segment.map)[:max(nbytes, 1)], np.uint8)
    weakref.finalize(base.base, freed)  # every view of `base` keeps base.base alive
    return _build(tree, base)


def _build(node: Any, base: np.ndarray) -> Any:
    # A function of the module, not a closure: a recursive closure is a reference cycle, and
    # its arrays would live (and hold their segment) until the cycle collector ran.
    kind = node[0]
    if kind == "a":
        _, at, dtype, shape = node
        dt = np.dtype(dtype)
        return base[at:at + math.prod(shape) * dt.itemsize].view(dt).reshape(shape)
    if kind == "r":
        return Ragged(_build(node[1], base), _build(node[2], base))
    if kind == "d":
        return {k: _build(v, base) for k, v in node[1]}
    if kind == "t":
        return tuple(_build(v, base) for v in node[1])
    return node[1]
