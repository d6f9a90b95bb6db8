"""A reading process of read_batches(..., processes=N): `python -m tfspark.numpy.process_worker
FD`, FD its end of a socket to the training process (numpy.processes).

It reads its part of the reader (BatchReader.for_worker) and hands each batch over through
shared memory (numpy.processes's segments), at most `depth` batches ahead of what the training
process took. Messages in: ("setup", path_or_files, batch_size, kwargs, processes, index), then
per iteration ("run", state, depth, slots still held there), ("took", [slots freed]) per batch
taken, ("stop",) to end it (early or not), ("quit",). Out: ("ready",), ("segment", slot, size)
followed by its file, ("batch", slot, nbytes, layout, state), ("end",), ("stopped",), ("error",
exception)."""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from tfspark.numpy.processes import Segment, layout, segment_size, unsendable, write


class _Stop(Exception):
    """The training process asked this iteration to end (or to quit)."""

    def __init__(self, quit_: bool):
        super().__init__()
        self.quit = quit_


class Worker:
    """One reading process: its part of the reader, its segments and what it was told."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.reader: Any = None
        self.segments: dict[int, Segment] = {}
        self.free: list[int] = []
        self.unacked = 0  # batches sent and not yet taken
        self.parent = os.getppid()

    def serve(self) -> None:
        """Answer the training process's messages until it quits or is gone."""
        while True:
            try:
                msg = self.conn.recv()
            except EOFError:  # the training process is gone
                return
            except Exception as e:  # noqa: BLE001 - the setup's arguments do not unpickle here
                self.conn.send(("error", unsendable(e)))
                continue
            kind = msg[0]
            try:
                if kind == "setup":
                    self.setup(*msg[1:])
                    self.conn.send(("ready",))
                elif kind == "run":
                    self.run(*msg[1:])
                elif kind == "stop":  # an iteration that had already failed here
                    self.conn.send(("stopped",))
                elif kind == "quit":
                    return
                # "took" between iterations: nothing to do
            except _Stop as stop:
                if stop.quit:
                    return
                self.conn.send(("stopped",))
            except BaseException as e:  # noqa: BLE001 - raised again in the training process
                self.conn.send(("error", _portable(e)))

    def setup(self, path_or_files: Any, batch_size: int, kwargs: dict[str, Any],
              processes: int, index: int) -> None:
        """Make this process's part of the reader (as read_batches made the whole)."""
        from tfspark.numpy.read import read_batches

        self.reader = read_batches(path_or_files, batch_size, **kwargs).for_worker(
            processes, index)

    def run(self, state: dict[str, Any], depth: int, held: list[int]) -> None:
        """One iteration from `state`: every batch handed over, then wait to be stopped."""
        # Every slot is free but those whose batches the training process still holds
        # (batches sent in an iteration it stopped early and never took were dropped there).
        self.free = [slot for slot in sorted(self.segments) if slot not in held]
        self.unacked = 0
        self.reader.load_state_dict(state)
        batches: Iterator[Any] = iter(self.reader)
        try:
            for batch in batches:
                tree, placed, nbytes = layout(batch)
                slot = self.slot(nbytes, depth)
                write(self.segments[slot], placed)
                self.conn.send(("batch", slot, nbytes, tree, self.reader.state_dict()))
                self.unacked += 1
                self.control(block=False)
        finally:
            batches.close()  # type: ignore[attr-defined]  # stops the reading threads
        self.conn.send(("end",))
        while True:  # the training process stops every iteration it starts
            self.control(block=True)

    def slot(self, nbytes: int, depth: int) -> int:
        """A free slot of at least nbytes, once fewer than `depth` batches wait untaken; a new
        segment when none is free (the training process holds them all) or big enough."""
        while self.unacked >= depth:
            self.control(block=True)
        for slot in self.free:
            if self.segments[slot].size >= nbytes:
                self.free.remove(slot)
                return slot
        slot = self.free.pop() if self.free else len(self.segments)
        size = segment_size(nbytes)
        segment = Segment(size)
        self.conn.send(("segment", slot, size))
        segment.send(self.conn, self.parent)
        segment.close_file()
        self.segments[slot] = segment  # the old mapping is dropped
        return slot

    def control(self, block: bool) -> None:
        """Take the training process's messages (one at least when blocking)."""
        while block or self.conn.poll():
            block = False
            try:
                msg = self.conn.recv()
            except EOFError:
                raise _Stop(True) from None
            if msg[0] == "took":
                self.unacked -= 1
                self.free.extend(msg[1])
            elif msg[0] in ("stop", "quit"):
                raise _Stop(msg[0] == "quit")


def _portable(e: BaseException) -> BaseException:
    """The exception itself when it survives pickling, else a RuntimeError saying what it was."""
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:  # noqa: BLE001 - any failure to pickle means: send its text instead
        return RuntimeError(f"{type(e).__name__}: {e}")


def main() -> None:
    """The process's entry point: serve the socket given on the command line."""
    # Ctrl-C reaches the whole process group: the training process ends this one.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        Worker(Connection(int(sys.argv[1]))).serve()
    except (BrokenPipeError, ConnectionResetError):  # the training process is gone
        pass


if __name__ == "__main__":
    main()
