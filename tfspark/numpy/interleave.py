"""One epoch of a shard's files as decoded rows, in an order fixed by the data, the epoch's file
order and the number of slots (never by which thread runs faster), with the place where each
chunk ends, so that a reader can say where it is and start again exactly there.

    files in the epoch's order -> `slots` slots: slot k reads files order[k::slots] one after
    another in a thread of its own (streamed, both CRCs checked, decoded by the compiled
    kernels, which release the GIL) -> turns: chunk 1 of slot 0, chunk 1 of slot 1, ...,
    chunk 2 of slot 0, ... (a slot out of files drops out of the turns)

A chunk is `chunk_records` consecutive records of a file (its last chunk is shorter), so its
bounds depend on the file alone: a read started at the end of a chunk (a Position) goes on
with the same chunks. A chunk may arrive in pieces (where a read buffer ends); a turn hands
on a whole chunk. Memory: at most `QUEUED` pieces wait per slot.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from tfspark.errors import CorruptRecordError, OptionError
from tfspark.numpy.columns import Table, num_rows, slice_table, take_table
from tfspark.numpy.decode import NumpyDecoder
from tfspark.numpy.units import Span
from tfspark.store.concurrency import OpenedAhead
from tfspark.store.fetch import Fetcher, hand_over, reading
from tfspark.store.shards import Shard
from tfspark.wire.stream import CHUNK_BYTES, stream_framed

QUEUED = 4  # decoded pieces waiting per slot


class Position(NamedTuple):
    """Where a slot is: its span `file` (an index into the slot's spans), before the record
    numbered `record` in the span's file, which starts at byte `byte` (of the uncompressed
    stream), with `rows` of the shard's rows of that span read before it ((i, 0, 0, 0): the
    span's start)."""

    file: int
    record: int = 0
    byte: int = 0
    rows: int = 0


@dataclass
class FileChunks:
    """How the files of a shard are read into chunks: the shard, its decoder settings, the
    fetcher that opens files (read ahead when remote) and the records per chunk."""

    part: Shard
    decoder: Callable[[], NumpyDecoder]  # makes one decoder per thread
    fetcher: Fetcher
    chunk_records: int
    ahead: int = 0  # files a slot opens before it needs them (remote files)

    def open(self, span: Span, byte: int | None = None) -> Any:
        """A span's file for streaming from `byte` (default: the span's start; 0 for gzip) to
        the span's end."""
        part, f = self.part, span.file
        return self.fetcher.open(part.files[f], part.sizes[f] if part.sizes else None,
                                 part.versions[f] if part.versions else None,
                                 start=span.byte if byte is None else byte,
                                 end=None if span.end < 0 else span.end)

    def pieces(self, span: Span, at: Position, decoder: NumpyDecoder, opened: Any = None,
               buffer: np.ndarray | None = None) -> Iterator[tuple[Table, Position | None]]:
        """A span's rows from `at` on, in pieces, each with the Position after it when it ends
        a chunk (None otherwise); the last piece, possibly empty, ends the span: its Position
        is the start of the slot's next span. A whole file's rows are counted against the
        manifest at its end. buffer: the reading thread's memory for the file's bytes (the
        pieces are copies: decoded, they hold none of it)."""
        part, f = self.part, span.file
        loc = part.files[f]
        name = loc.uri
        after = Position(at.file + 1)
        counts = part.file_rows()
        whole = counts[f] if counts is not None and span.whole else None
        limit = span.rows
        if limit is not None and at.rows >= limit:
            if opened is not None:
                opened.close()
            yield {}, after
            return
        if at.record == 0 and at.byte == 0:  # the span's start
            at = at._replace(record=span.record, byte=span.byte)
        n, start = part.stride(f)
        gz = part.compressions[f] == "gzip"  # the manifest's, or sniffed when planning
        per_chunk = self.chunk_records
        record, rows = at.record, at.rows

        def decode(buf: np.ndarray, offsets: np.ndarray, base: int) -> tuple[Table, int, int]:
            nonlocal record
            table, sizes = decoder.decode(buf, offsets, path=name, offset=base)
            first, record = record, record + len(sizes)
            if n > 1 or start:
                idx = np.arange(first, record)
                keep = (idx >= start) & ((idx - start) % n == 0)
                table = take_table(table, np.flatnonzero(np.repeat(keep, sizes)))
            return table, record, base + int(offsets[-1])

        stream = opened if opened is not None else self.open(span, 0 if gz else at.byte)
        with reading(loc, name, gz):
            with stream as raw:
                source = pa.CompressedInputStream(raw, "gzip") if gz else raw
                if gz and at.byte:
                    _skip(source, at.byte, name)
                for table, end_record, end_byte in stream_framed(
                        source, name, True, decode, gz, per_chunk, first_record=at.record,
                        base=at.byte, size=None if span.end < 0 else span.end - at.byte,
                        buffer=buffer):
                    got = num_rows(table)
                    if limit is not None and rows + got >= limit:
                        yield slice_table(table, 0, limit - rows), after
                        return  # even shards: the rest of the file is cut (not read)
                    rows += got
                    yield table, (Position(at.file, end_record, end_byte, rows)
                                  if end_record % per_chunk == 0 else None)
                if span.whole:
                    _check_count(name, rows, whole, part, decoder.block)
                if span.whole and at.byte == 0 and hasattr(raw, "complete"):
                    raw.complete()  # read whole and checked: a cache may keep it
        yield {}, after


def _skip(stream: Any, n: int, name: str) -> None:
    """Read and drop the first n bytes of a stream (a gzip file cannot be entered mid-way)."""
    while n:
        got = len(stream.read(min(n, 1 << 24)))
        if not got:
            raise CorruptRecordError(f"{name}: ends before byte {n} of its uncompressed stream, "
                                     f"where the reader's state says it was; the file was "
                                     f"changed after the state was saved", path=name)
        n -= got


def _check_count(name: str, rows: int, whole: int | None, part: Shard, block: int) -> None:
    """A file read to its end holds the rows its manifest entry lists."""
    want = whole if part.rows is not None or block == 1 else None
    if want is not None and rows != want:
        raise CorruptRecordError(f"{name}: holds {rows} rows for this reader but the "
                                 f"manifest lists {want}; the file was changed after the "
                                 f"write: rewrite the data set", path=name)


class Interleave:
    """The turns of one epoch (module docstring): `order` is the epoch's file order (indices
    into the shard's files), `at` where each slot starts (None: a slot out of files) and
    `turn` the slot whose turn is next; both move as turns are handed on."""

    def __init__(self, chunks: FileChunks, order: list[Span], slots: int,
                 at: list[Position | None] | None = None, turn: int = 0):
        self.chunks = chunks
        self.files = [order[k::slots] for k in range(slots)]  # each slot's spans
        self.at: list[Position | None] = list(at) if at is not None else \
            [Position(0) for _ in range(slots)]
        for k, p in enumerate(self.at):
            if p is not None and p.file > len(self.files[k]):
                raise OptionError(f"state: a damaged read_batches state (slot {k} of turns "
                                  f"is at file {p.file} of its {len(self.files[k])}); give "
                                  f"back reader.state_dict() as it was saved")
        self.at = [None if p is None or p.file >= len(self.files[k]) else p
                   for k, p in enumerate(self.at)]
        self.turn = turn

    def snapshot(self) -> dict[str, Any]:
        """Where the turns are, as JSON: the slot whose turn is next, and each slot's Position
        ([file, record, byte, rows]) or None."""
        return {"turn": self.turn, "slots": [None if p is None else list(p) for p in self.at]}

    def turns(self) -> Generator[list[Table], None, None]:
        """Each turn's chunk, as its non-empty pieces; threads stop when this is closed."""
        slots = len(self.files)
        queues: list[queue.Queue] = [queue.Queue(QUEUED) for _ in range(slots)]
        stop = threading.Event()

        def put(k: int, item: Any) -> bool:
            return hand_over(queues[k], item, stop)

        def run(k: int, at: Position) -> None:
            decoder = self.chunks.decoder()
            buffer = np.empty(CHUNK_BYTES, np.uint8)  # this thread's, from file to file
            mine = self.files[k]
            opened = OpenedAhead(self.chunks.open, mine)  # remote: their first bytes on the way
            try:
                for p in range(at.file, len(mine)):
                    opened.open_after(p, self.chunks.ahead)
                    start = at if p == at.file else Position(p)
                    for item in self.chunks.pieces(mine[p], start, decoder, opened.take(p),
                                                   buffer):
                        if not put(k, item):
                            return
            except BaseException as e:  # noqa: BLE001 - handed to the consumer
                put(k, e)
            finally:
                opened.close()

        threads = [threading.Thread(target=run, args=(k, p), daemon=True,
                                    name=f"tfspark-read-{k}")
                   for k, p in enumerate(self.at) if p is not None]
        for t in threads:
            t.start()
        try:
            while any(p is not None for p in self.at):
                k = self.turn
                while self.at[k] is None:
                    k = (k + 1) % slots
                pieces: list[Table] = []
                while True:
                    item = queues[k].get()
                    if isinstance(item, BaseException):
                        raise item
                    table, end = item
                    if num_rows(table):
                        pieces.append(table)
                    if end is not None:
                        break
                self.at[k] = None if end.file >= len(self.files[k]) else end
                self.turn = (k + 1) % slots
                yield pieces
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=10)
