"""What the readers read as one piece of work: a Span of a file's records. Reading in file order
takes each file whole; the global shuffle (read_batches(shuffle="global")) takes units of
about UNIT_ROWS rows (whole records) of every file, found by one scan of the files' framing
(lengths only: nothing decoded, CRCs checked later, when a unit is read), and reads them in a
new permutation over all files each epoch.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tfspark.errors import CorruptRecordError, OptionError
from tfspark.store.fetch import Fetcher
from tfspark.store.shards import Shard
from tfspark.wire.stream import stream_framed

UNIT_ROWS = 4096  # rows per unit of the global shuffle (at least one record): 1,024 mixed
# better (a window of 10 batches spans more units) but read at 0.4-0.6x the window shuffle,
# decoding a unit per call; 4,096: 0.75-0.88x (bench/bench_shuffle.py)


class Span(NamedTuple):
    """Records of file `file` (an index into the shard's files) from `record`, which starts at
    byte `byte`, to byte `end` (-1: the file's end); at most `rows` of its rows (None: all)."""

    file: int
    record: int = 0
    byte: int = 0
    end: int = -1
    rows: int | None = None

    @property
    def whole(self) -> bool:
        """The whole file (its rows are counted against the manifest at its end)."""
        return self.record == 0 and self.end == -1


def whole_files(part: Shard) -> list[Span]:
    """Each file of the shard whole (even shards: up to the rows it keeps of it)."""
    counts = part.file_rows()
    return [Span(f, rows=part.keep[f] if part.keep is not None and
                 (counts is None or part.keep[f] != counts[f]) else None)
            for f in range(len(part.files))]


def check_global(part: Shard) -> None:
    """The global shuffle reads records out of file order: no gzip file (the manifest says,
    or planning sniffed it)."""
    gz = [part.files[f].uri for f, c in enumerate(part.compressions) if c == "gzip"]
    if gz:
        raise OptionError(f"shuffle='global' reads records out of file order, which gzip files "
                          f"cannot give ({gz[0]} is gzip); write the data set without "
                          f"compression, or read it with the window shuffle (the default)")


def units(part: Shard, rows_per_record: int, fetcher: Fetcher) -> list[Span]:
    """The global shuffle's units of every file of the shard: runs of UNIT_ROWS rows (whole
    records), the even shards' cut applied; one pass over the files' bytes."""
    per = max(1, UNIT_ROWS // rows_per_record)
    out: list[Span] = []
    for f, loc in enumerate(part.files):
        starts, records = _scan(fetcher, part, f, per)
        n, s = part.stride(f)
        keep = part.keep[f] if part.keep is not None else None
        for u, byte in enumerate(starts):
            first = u * per
            cap = None
            if keep is not None:  # the shard's records before this one are full records
                before = len(range(s, first, n)) * rows_per_record
                if before >= keep:
                    break
                cap = keep - before
            end = starts[u + 1] if u + 1 < len(starts) else -1
            out.append(Span(f, first, int(byte), int(end), cap))
        if part.records is not None and n == 1 and records != part.records[f]:
            raise CorruptRecordError(f"{loc.uri}: holds {records} records but the manifest "
                                     f"lists {part.records[f]}; the file was changed after the "
                                     f"write: rewrite the data set", path=loc.uri)
    return out


def _scan(fetcher: Fetcher, part: Shard, f: int, per: int) -> tuple[list[int], int]:
    """(the byte where each run of `per` records of file f starts, its records)."""
    starts: list[int] = []
    seen = 0

    def mark(buf: np.ndarray, offsets: np.ndarray, base: int) -> None:
        nonlocal seen
        if seen % per == 0:
            starts.append(base + int(offsets[0]))
        seen += len(offsets) - 1

    loc = part.files[f]
    with fetcher.open(loc, part.sizes[f] if part.sizes else None) as raw:
        for _ in stream_framed(raw, loc.uri, False, mark, False, per, first_record=0):
            pass
    return starts, seen

