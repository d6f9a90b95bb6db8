"""read_batches(..., processes=N): the reader's part split among N reading processes, their
batches handed to this (the training) process through shared memory (below).

One process's reading threads share one interpreter lock, which bounded the reader at 5-6M
rows/s on a 16-core GPU machine (docs/benchmarks.md); N processes decode N times as much, and
the training process only receives each batch: a small message and views of memory the
reading process wrote. The processes are started fresh (`python -m
tfspark.numpy.process_worker`, not a fork: Spark's, TensorFlow's or the reader's threads
would be copied mid-way; not multiprocessing's spawn: that runs the user's script again in
each), once per reader, when it is made (they take a second or two to import, which then
overlaps the caller's model building), and end with it (close(), or when it is garbage; a
later iteration starts new ones).

Batches come from the processes in turn (0, 1, ..., N-1, 0, ...; one whose part has ended is
left out), each process a part of the reader as a DataLoader worker gets it
(BatchReader.for_worker: whole files when there are at least N, else every N-th record, so
that each process reads every file). So the order is fixed by the data, the arguments and
the seed, and state_dict() is every process's reader state plus whose turn it is.

The hand-over through shared memory: the reading process copies a batch's arrays into a segment
and sends only where each lies; the training process views them there, copying nothing, and the
segment is used again once every array viewing it is gone (weakref.finalize on the arrays'
common base). A pickled batch would cost the training process's interpreter a copy and an
unpickle of every array, the cost that bounded Grain's and DataLoader's worker processes on the
GPU machine (docs/benchmarks.md).

A segment is a memfd (Linux) or an unlinked temporary file, mapped by both processes; its file
descriptor is passed over the processes' socket, so no name is left behind if either dies.
"""

from __future__ import annotations

import math
import mmap
import os
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from collections import deque
from collections.abc import Callable, Generator, Iterator
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any, NoReturn

import numpy as np

from tfspark.errors import OptionError, StateMismatch
from tfspark.numpy import state as states
from tfspark.numpy.closing import close_iteration, stoppable
from tfspark.numpy.columns import Ragged

FORMAT = "tfspark.read_batches.processes/1"
DEPTH = 4  # batches a process has ready ahead of the training process


class ProcessBatches:
    """What read_batches(..., processes=N) returns: iterated, the batches of N reading
    processes in turn; state_dict()/load_state_dict() as BatchReader's."""

    def __init__(self, reader: Any, args: tuple[Any, int, dict[str, Any]], processes: int):
        if os.name != "posix":
            raise OptionError("processes= needs Linux or macOS (it passes shared memory "
                              "between processes over a Unix socket); leave it out here")
        self.processes = processes
        self.parts = [reader.for_worker(processes, i) for i in range(processes)]
        self.batch_size, self.epochs = reader.batch_size, reader.epochs
        self._pool = _Pool(args, processes)
        self._closer = weakref.finalize(self, self._pool.close)
        self._iterations = 0
        self._pending: dict[str, Any] | None = None  # where the next iteration starts
        self._state: dict[str, Any] | None = None  # after the latest batch handed on
        self._running: Generator[Any, Any, None] | None = None
        self._stop = threading.Event()

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def steps_per_epoch(self) -> int | None:
        """Batches per epoch, all processes' together (None without manifest counts)."""
        steps = [p.steps_per_epoch() for p in self.parts]
        return None if None in steps else sum(steps)

    def for_worker(self, workers: int, worker: int) -> Any:
        """Refused: a loader's worker processes and processes= would both start processes."""
        raise OptionError("processes= and a loader's worker processes (DataLoader "
                          "num_workers, Grain's mp_prefetch) both start reading processes: "
                          "use one of them")

    def start(self) -> None:
        """Start the reading processes now (they take a second or two to import: meanwhile
        the caller builds its model); the first iteration waits for them."""
        self._pool.start()

    def close(self) -> None:
        """End the reading processes (a later iteration starts new ones)."""
        self._end_running()
        self._pool.close()

    def _end_running(self) -> None:
        """End the iteration in progress (a tf.data thread may be inside it: Keras fit's)."""
        if self._running is not None:
            close_iteration(self._running, self._stop)

    def __enter__(self) -> ProcessBatches:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- where an iteration is

    def state_dict(self) -> dict[str, Any]:
        """Where the latest iteration is (JSON-serializable), as BatchReader.state_dict()."""
        if self._state is None and self._pending is None:
            self._pending = self._fresh(self._iterations + 1)
        return dict(self._state or self._pending)  # type: ignore[arg-type]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next iteration resume at `state` (from state_dict() of a reader of the same
        data set, arguments and processes)."""
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            got = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise StateMismatch(
                "saved by a reader without processes=",
                f"state: not a state of read_batches(..., processes=...) (format {FORMAT!r}; "
                f"got {got!r}): resume with the arguments it was saved with")
        workers = state.get("workers")
        if state.get("processes") != self.processes or not isinstance(workers, list) or \
                len(workers) != self.processes:
            raise StateMismatch(
                f"processes={state.get('processes')!r} there, {self.processes} here",
                f"state: saved with processes={state.get('processes')!r}, this reader has "
                f"processes={self.processes}; resume with the same")
        for part, saved in zip(self.parts, workers):
            states.load(saved, part.settings())  # says what differs
        self._pending, self._state = dict(state), None

    def _fresh(self, iteration: int) -> dict[str, Any]:
        return {"format": FORMAT, "processes": self.processes, "iteration": iteration,
                "turn": 0, "workers": [states.fresh(p.seed, iteration, p.settings()).to_dict()
                                       for p in self.parts]}

    # ---- iterating

    def __iter__(self) -> Iterator[Any]:
        self._end_running()  # one iteration at a time: the earlier one ends
        start = self._pending or self._fresh(self._iterations + 1)
        self._pending, self._state = None, start
        self._iterations = int(start["iteration"])
        self._stop = threading.Event()
        self._running = stoppable(self._run(start), self._stop)
        return self._running

    def _run(self, start: dict[str, Any]) -> Iterator[Any]:
        pool = self._pool
        pool.start()
        workers = list(start["workers"])
        turn, alive = int(start["turn"]), [True] * self.processes
        pool.begin(workers)
        try:
            while any(alive):
                while not alive[turn]:
                    turn = (turn + 1) % self.processes
                msg = pool.receive(turn)
                if msg[0] == "end":
                    alive[turn] = False
                    continue
                if msg[0] == "error":
                    raise msg[1]
                _, slot, nbytes, tree, workers[turn] = msg
                batch = pool.batch(turn, slot, nbytes, tree)
                turn = (turn + 1) % self.processes
                self._state = {**start, "turn": turn, "workers": list(workers)}
                yield batch
        finally:
            # self._running stays: dropping it here could free the generator that wraps this
            # one (when the reader is garbage), whose close would then find this one running
            pool.end()


class _Pool:
    """The reading processes, their sockets and shared segments; not a ProcessBatches
    attribute cycle, so the reader can be garbage-collected (and close them) while iterated."""

    def __init__(self, args: tuple[Any, int, dict[str, Any]], processes: int):
        self.args, self.n = args, processes
        self.procs: list[subprocess.Popen] = []
        self.conns: list[Connection] = []
        self.segments: list[dict[int, Segment]] = []
        self.live: list[set[int]] = []  # slots whose batch is still referenced here
        self.freed: list[deque[int]] = []  # slots let go, to tell their process
        self.ready = False  # every process said it made its reader

    def start(self) -> None:
        if self.procs:
            return
        path_or_files, batch_size, kwargs = self.args
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            for _ in range(self.n):
                ours, theirs = socket.socketpair()
                proc = subprocess.Popen(
                    [sys.executable, "-m", "tfspark.numpy.process_worker",
                     str(theirs.fileno())], pass_fds=[theirs.fileno()], env=env,
                    stdin=subprocess.DEVNULL)
                theirs.close()
                self.procs.append(proc)
                self.conns.append(Connection(ours.detach()))
                self.segments.append({})
                self.live.append(set())
                self.freed.append(deque())
            for i, conn in enumerate(self.conns):
                try:
                    conn.send(("setup", path_or_files, batch_size, kwargs, self.n, i))
                except OSError:
                    self._ended(i)
                except Exception as e:  # noqa: BLE001 - what pickle raises varies by object
                    raise unsendable(e) from None
        except BaseException:
            self.close()
            raise

    def begin(self, workers: list[dict[str, Any]]) -> None:
        """Start an iteration: each process from its state, told which of its segments
        batches still view here (the first, once every process has made its reader)."""
        if not self.ready:
            for i in range(self.n):
                msg = self.receive(i)
                if msg[0] == "error":
                    self.close()
                    raise msg[1]
            self.ready = True
        for i in range(self.n):
            self._release(i)
            self.send(i, ("run", workers[i], DEPTH, sorted(self.live[i])))

    def send(self, i: int, msg: tuple) -> None:
        try:
            self.conns[i].send(msg)
        except OSError:  # a broken pipe: the process is gone
            self._ended(i)

    def receive(self, i: int) -> tuple:
        conn = self.conns[i]
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                self._ended(i)
            if msg[0] == "segment":
                self.segments[i][msg[1]] = Segment.receive(conn, msg[2])
                continue
            return msg

    def _ended(self, i: int) -> NoReturn:
        proc = self.procs[i]
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        raise RuntimeError(f"read_batches: reading process {i + 1} of {self.n} (pid "
                           f"{proc.pid}) ended (exit code {code}); its error, if any, is "
                           f"printed above") from None

    def batch(self, i: int, slot: int, nbytes: int, tree: Any) -> Any:
        """A batch process i sent, its arrays in its slot; the process is told it was taken
        (and which slots are free again)."""
        freed = self.freed[i]
        batch = view(self.segments[i][slot], tree, nbytes, lambda: freed.append(slot))
        self.live[i].add(slot)
        self.send(i, ("took", self._release(i)))
        return batch

    def _release(self, i: int) -> list[int]:
        out, freed = [], self.freed[i]
        while freed:
            slot = freed.popleft()
            self.live[i].discard(slot)
            out.append(slot)
        return out

    def end(self) -> None:
        """End the iteration in every process (batches ready but not taken are dropped)."""
        if not self.procs:
            return
        try:
            for i in range(self.n):
                self.send(i, ("stop",))
            for i in range(self.n):
                while self.receive(i)[0] != "stopped":
                    pass
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the processes: asked to quit, or killed while still starting (they hold
        nothing then but their imports)."""
        for conn in self.conns:
            try:
                conn.send(("quit",))
                conn.close()
            except OSError:
                pass
        for proc in self.procs:
            if not self.ready:
                proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs, self.conns, self.segments, self.live, self.freed = [], [], [], [], []
        self.ready = False


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
