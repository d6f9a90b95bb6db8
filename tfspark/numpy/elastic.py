"""Resuming on another number of workers: read_batches(..., shard=(m, j), state=[s_0, ...,
s_{n-1}]) takes the saved states of all n workers of an interrupted run and continues its epoch
on m workers; together they yield every row the old workers had not yet yielded in that epoch,
each exactly once, then further epochs as a run begun on m workers would (the same seed).

What each old worker had left is found without decoding anything: its reader is rebuilt from
its state (the same settings, its shard (n, i)), and the one window its state is in is read
again with a decoder that gives each row's place instead of its values (file, record's byte,
record's size, row in the record). Its rows past the state's `taken` are the window's
leftovers; where the turns stand after that window, each slot's span from its Position and
the slot's later spans, is the rest of its epoch. Every new worker computes the same
remainder from the same states, and takes its part:

    spans        the rest of the old slots' files (or units of the global shuffle): each
                 whole to the new worker with the most room left, the largest first
    the rest     the spans that fit nowhere whole, then the old windows' rows not yet handed
                 on (read back by their records), fill the workers' room in turn: a span is
                 cut at a row (its first part: the span capped at that many rows; its second:
                 the rest of the record the cut falls in, read back by its record, and the
                 span from the next record on, found by reading the framing up to the cut)

With the manifest's counts every new worker gets the same number of rows (so their steps in
that epoch are equal): with even_shards (the default) the fewer than m rows that do not divide
are left out of that epoch, as even shards leave rows out of every epoch; without, the first
workers take one row more. Without counts, the shares are near-equal, by the spans' sizes.
A new worker's epoch is then its rows of the old windows as one window, and its spans read in
turns by its own slots in windows of its own shuffle (from the seed, the epoch and its number
j). Its state says where it is in that epoch and carries the old states, so a state saved then
resumes it with the same m (states saved at its end resume on any number: nothing of it is
left). A loader worker's part, for_worker(k, w), is the w-th of k shares of its rank's. Past
that epoch its states are those of a run begun on m workers (with its own batch size and
shuffle buffer: a run on m workers of the same global batch has another per-worker batch).
What the shares do not keep is the old run's order in the epoch.
"""

from __future__ import annotations

import copy
import warnings
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tfspark.errors import OptionError
from tfspark.numpy.columns import Table, concat_tables, num_rows, slice_table, take_table
from tfspark.numpy.decode import NumpyDecoder
from tfspark.numpy.interleave import FileChunks, Position
from tfspark.numpy.units import UNIT_ROWS, Span
from tfspark.store.fetch import Fetcher
from tfspark.store.read_plan import ReadPlan
from tfspark.store.shards import Shard
from tfspark.store.shards import shard as shard_plan

if TYPE_CHECKING:
    from tfspark.numpy.batches import BatchReader

REF = ("__file", "__byte", "__size", "__row")  # a row's place: the columns of a RefDecoder
# settings that may differ between the old run and the new one (the rest must be the same)
FREE = ("files", "num_threads", "seed", "batch_size", "shuffle_buffer")


class RefDecoder:
    """A NumpyDecoder's stand-in that decodes nothing: each row's place (REF) in a file of
    the plan, from the framing alone (block records are full but a file's last)."""

    def __init__(self, plan: ReadPlan):
        self.block = plan.rows_per_record
        self._files = {loc.uri: i for i, loc in enumerate(plan.locations)}
        self._plan = plan

    def decode(self, buf: np.ndarray, offsets: np.ndarray, *, path: str,
               offset: int = 0) -> tuple[Table, np.ndarray]:
        """(each row's place, rows per record) of the framed records between offsets."""
        f = self._files[path]
        starts = offsets[:-1].astype(np.int64) + offset
        sizes = np.diff(offsets).astype(np.int64)
        rows = np.full(len(sizes), self.block, np.int64)
        if self.block > 1 and len(rows):
            p = self._plan
            assert p.sizes is not None and p.rows is not None and p.records is not None
            if int(starts[-1] + sizes[-1]) == p.sizes[f]:  # the file's last record
                rows[-1] = p.rows[f] - (p.records[f] - 1) * self.block
        n = int(rows.sum())
        within = np.arange(n) - np.repeat(np.cumsum(rows) - rows, rows)
        return {REF[0]: np.full(n, f, np.int64), REF[1]: np.repeat(starts, rows),
                REF[2]: np.repeat(sizes, rows), REF[3]: within}, rows


@dataclass
class Remainder:
    """One new worker's part of an interrupted epoch: the old rows it takes by their records
    (REF columns), and the spans of `part` (a shard of entries from the old workers' shards);
    `rows`: its rows (None: not counted)."""

    epoch: int
    seed: int
    leftovers: Table
    part: Shard
    spans: list[Span]
    rows: int | None = None


def check_states(states: list[Any], shard: tuple[int, int] | None) -> None:
    """What a list of states must be, before anything is read."""
    if not states or not all(isinstance(s, dict) for s in states):
        raise OptionError("state: a list must hold the state_dict() of every worker of the "
                          "interrupted run, in the order of their shard numbers; got "
                          f"{len(states)} item(s), not all dicts" if states else
                          "state: an empty list; give the state_dict() of every worker of the "
                          "interrupted run, in the order of their shard numbers")
    if shard is None and len(states) > 1:
        raise OptionError(f"state: {len(states)} workers' states resume on shard=(m, j): give "
                          f"shard=(1, 0) to read all of it here")


def remainder(reader: BatchReader, states: list[dict[str, Any]],
              workers: int, worker: int) -> Remainder:
    """Worker `worker` of `workers`'s part of the epoch the old workers' `states` are in."""
    from tfspark.numpy import state as st

    n = len(states)
    if "gzip" in reader.plan.file_compressions():
        raise OptionError("state: resuming on another number of workers reads the old "
                          "windows' rows back by their records, which a gzip file cannot "
                          "give; write the data set without compression, or resume on the "
                          "same number of workers")
    loaded = []
    for i, s in enumerate(states):
        if s.get("format") != st.FORMAT:
            raise OptionError(f"state: item {i} is not a read_batches state (a dict from "
                              f"reader.state_dict() with format {st.FORMAT!r})")
        loaded.append(s)
    ours = reader.settings()
    first = loaded[0].get("settings") or {}
    for i, s in enumerate(loaded):
        theirs = s.get("settings") or {}
        differ = [k for k in ours if k not in FREE and theirs.get(k) != ours[k]]
        if differ:
            what = "; ".join(f"{k}={theirs.get(k)!r} there, {ours[k]!r} here" for k in differ)
            raise OptionError(f"state: worker {i} of {n} read with other settings ({what}); "
                              f"resume with the settings of the interrupted run")
        if theirs.get("num_threads") != first.get("num_threads"):
            raise OptionError("state: the workers' states are of readers with different "
                              "num_threads; they must be one run's")
    epochs = sorted({int(s.get("epoch", 0)) for s in loaded})
    if len(epochs) > 1:
        raise OptionError(f"state: the workers' states are in different epochs ({epochs}); "
                          f"save every worker's state at the same step (with even_shards, "
                          f"the default, every worker takes as many steps per epoch)")
    epoch = epochs[0]
    if any(s.get("elastic") for s in loaded):  # saved in an epoch resumed like this one
        if not _finished(reader, loaded):
            raise OptionError(
                f"state: the states were saved while a run resumed on another number of "
                f"workers, mid-epoch {epoch}; resume them with shard="
                f"({len(loaded)}, ...) as saved, and on another number after that epoch")
        return Remainder(epoch, int(loaded[0].get("seed") or 0), _no_rows(),
                         _entries([reader.part], []), [], 0)
    parts, lefts, pieces, seeds = [], [], [], []
    for i, s in enumerate(loaded):
        old, part = _old_reader(reader, s, n, i)
        got = st.load(s, old.settings())  # (checked whole: a damaged one says which field)
        seeds.append(got.seed)
        leftover, spans = _left(old, got, epoch)
        parts.append(part)
        lefts.append(leftover)
        pieces += [(i, sp) for sp in spans]
    left = concat_tables(lefts) if any(num_rows(t) for t in lefts) else _no_rows()
    exact = [_exact_rows(parts[i], sp, reader.plan.rows_per_record) for i, sp in pieces]
    rows: int | None
    if all(w is not None for w in exact):
        refs, mine, rows = _shares(reader, parts, left, pieces, [int(w or 0) for w in exact],
                                   workers, worker)
    else:
        refs, mine = _near_shares(parts, left, pieces, workers, worker)
        rows = None
    entries: dict[tuple[int, int], int] = {}
    my_spans: list[Span] = []
    for i, sp in mine:
        e = entries.setdefault((i, sp.file), len(entries))
        my_spans.append(sp._replace(file=e))
    my_spans.sort(key=lambda sp: sp.file)  # (then shuffled by the reader, as files are)
    part = _entries(parts, list(entries))
    return Remainder(epoch, seeds[0], refs, part, my_spans, rows)


def _finished(reader: BatchReader, states: list[dict[str, Any]]) -> bool:
    """Whether states saved in a resumed epoch (each with the states it resumed) are each at
    the end of its worker's share of that epoch: then nothing of it is left."""
    workers = len(states)
    for j, s in enumerate(states):
        was = s.get("elastic")
        if not isinstance(was, dict) or (was.get("workers"), was.get("worker")) != (workers, j) \
                or not isinstance(was.get("states"), list):
            return False
        old, _ = _old_reader(reader, s, workers, j)  # (its batch_size: the state's)
        old._shard = (workers, j)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (said when that epoch was resumed)
            rem = remainder(old, was["states"], workers, j)
        if rem.rows is None or old.part.keep is None:
            return False  # (not counted: cannot tell)
        if int(s.get("batches") or 0) < old._batches_of(rem.rows):
            return False
    return True


def _shares(reader: BatchReader, parts: list[Shard], left: Table,
            pieces: list[tuple[int, Span]], weights: list[int], workers: int, worker: int
            ) -> tuple[Table, list[tuple[int, Span]], int]:
    """Worker `worker`'s rows of the old windows (REF) and spans, of equal shares counted
    exactly (module docstring), and its rows."""
    total = num_rows(left) + sum(weights)
    q, extra = divmod(total, workers)
    even = reader.part.keep is not None
    room = [q + (0 if even else int(k < extra)) for k in range(workers)]
    shares = list(room)
    mine: list[tuple[int, Span]] = []
    # Items of the rest: (i, span, lo, hi): rows lo..hi of a span of old worker i; (None,
    # None, lo, hi): rows lo..hi of the old windows' rows.
    rest: deque[tuple[int | None, Span | None, int, int]] = deque()
    for p in sorted(range(len(pieces)), key=lambda p: (-weights[p], p)):
        k = max(range(workers), key=lambda k: (room[k], -k))
        if weights[p] and weights[p] <= room[k]:
            room[k] -= weights[p]
            if k == worker:
                mine.append(pieces[p])
        elif weights[p]:
            rest.append((*pieces[p], 0, weights[p]))
    if num_rows(left):
        rest.append((None, None, 0, num_rows(left)))
    refs: list[Table] = []
    k = 0
    while rest and k < workers:
        if not room[k]:
            k += 1
            continue
        i, sp, lo, hi = rest.popleft()
        take = min(hi - lo, room[k])
        room[k] -= take
        if take < hi - lo:
            rest.appendleft((i, sp, lo + take, hi))
        if k != worker:
            continue
        if sp is None:
            refs.append(slice_table(left, lo, lo + take))
        else:
            assert i is not None
            got, span = _rows_of_span(reader, parts[i], sp, lo, lo + take)
            refs.append(got)
            if span is not None:
                mine.append((i, span))
    if even and extra:
        warnings.warn(f"even_shards: the resumed epoch leaves out {extra:,} of its rows "
                      f"(fewer than the {workers} workers: they do not divide among them), so "
                      f"that every worker takes {q:,}; even_shards=False reads them (then the "
                      f"workers' steps in that epoch may differ)", stacklevel=5)
    table = concat_tables([t for t in refs if num_rows(t)]) if any(
        num_rows(t) for t in refs) else _no_rows()
    return table, mine, shares[worker]


def _rows_of_span(reader: BatchReader, part: Shard, sp: Span, lo: int, hi: int
                  ) -> tuple[Table, Span | None]:
    """Rows lo..hi of a span: as the span capped (lo = 0), else the rest of the record row
    lo falls in (REF, read back by its record) and the span from the next record on (None:
    no rows there); the framing up to row lo is read to find where that record is."""
    if lo == 0:
        return _no_rows(), sp._replace(rows=hi)
    fetcher = Fetcher(reader.io_threads, cache=reader.cache)
    def refs() -> Any:  # rows' places, where the reader's decoder gives rows
        return RefDecoder(reader.plan)

    chunks = FileChunks(part, refs, fetcher, reader._chunk_records())
    got = begun = 0
    pieces: Any = chunks.pieces(sp, Position(0), refs())
    table: Any = {}
    try:
        for table, _ in pieces:
            n = num_rows(table)
            heads = np.asarray(table[REF[3]]) == 0 if n else np.zeros(0, bool)
            if got + n <= lo:
                got, begun = got + n, begun + int(np.count_nonzero(heads))
                continue
            r = lo - got
            begun += int(np.count_nonzero(heads[: r + 1]))
            later = np.flatnonzero(heads[r + 1:])
            end = min(r + 1 + int(later[0]) if len(later) else n, r + hi - lo)
            byte, size = int(table[REF[1]][r]), int(table[REF[2]][r])
            break
        else:
            raise OptionError(f"state: {part.files[sp.file].uri} holds fewer rows than the "
                              f"manifest lists; the file was changed after the states were "
                              f"saved: start the epoch afresh")
    finally:
        pieces.close()
        fetcher.close()
    n_, s = part.stride(sp.file)
    first = max(sp.record, s)
    record = first + (s - first) % n_ + (begun - 1) * n_  # the file's number of that record
    if table[REF[3]][r] == 0:  # the cut is at a record's start
        return _no_rows(), Span(sp.file, record, byte, sp.end, hi - lo)
    record_rows: Table = {k: v[r:end] for k, v in table.items()}
    after = hi - lo - (end - r)
    return record_rows, (Span(sp.file, record + 1, byte + size, sp.end, after)
                         if after > 0 else None)


def _near_shares(parts: list[Shard], left: Table, pieces: list[tuple[int, Span]],
                 workers: int, worker: int) -> tuple[Table, list[tuple[int, Span]]]:
    """Near-equal shares where the rows are not counted: the old windows' rows in m equal
    runs, then each span whole to the worker with the fewest rows so far (by its size)."""
    total = num_rows(left)
    cut = [total * k // workers for k in range(workers + 1)]
    load = [cut[k + 1] - cut[k] for k in range(workers)]
    mine: list[tuple[int, Span]] = []
    weights = [_rows(parts[i], sp) for i, sp in pieces]
    for p in sorted(range(len(pieces)), key=lambda p: (-weights[p], p)):
        k = min(range(workers), key=lambda k: (load[k], k))
        load[k] += weights[p]
        if k == worker:
            mine.append(pieces[p])
    return slice_table(left, cut[worker], cut[worker + 1]), mine


def _exact_rows(part: Shard, sp: Span, block: int) -> int | None:
    """The rows a span holds, from the manifest's counts (None: not known): its records'
    (a file's records are full but its last; a span that ends before the file's end is a
    unit of the global shuffle, which ends where the next unit starts), at most its cap."""
    counts = part.file_rows()
    if counts is None or (part.rows is None and block > 1):
        return None
    n, s = part.stride(sp.file)

    def before(r: int) -> int:  # the shard's records of the file before record r
        return len(range(s, r, n))

    if sp.end < 0:
        got = counts[sp.file] - before(sp.record) * block
    else:
        per = max(1, UNIT_ROWS // block)
        got = (before((sp.record // per + 1) * per) - before(sp.record)) * block
    return got if sp.rows is None else min(got, sp.rows)


def _old_reader(reader: BatchReader, s: dict[str, Any], n: int, i: int
                ) -> tuple[BatchReader, Shard]:
    """A reader as worker i of n had it (its shard, its slots), decoding row places only."""
    from tfspark.numpy import state as st

    theirs = s.get("settings") or {}
    for even in (True, False):
        part = shard_plan(reader.plan, (n, i), even, warn=False)
        if st.files_digest(part) == theirs.get("files"):
            break
    else:
        raise OptionError(f"state: item {i} is not the state of worker {i} of {n} of this "
                          f"data set (its files differ: the data set or split changed, the "
                          f"states are out of order, or the list lacks some workers' states: "
                          f"it holds {n}); give every worker's state, in shard order")
    old = copy.copy(reader)
    old.part = part
    old.num_threads = int(theirs.get("num_threads") or reader.num_threads)
    old.batch_size = int(theirs.get("batch_size") or reader.batch_size)
    old.buffer = int(theirs.get("shuffle_buffer", reader.buffer))
    old.decoder_factory = lambda: RefDecoder(reader.plan)
    old.stacks, old.pad_widths, old.labels = (), {}, ()
    old.elastic = old._rem = None
    old._units = None
    return old, part


def _left(old: BatchReader, state: Any, epoch: int) -> tuple[Table, list[Span]]:
    """An old worker's rows of its state's window not yet handed on, and the spans of the
    rest of its epoch."""
    windows = old._windows(state.seed, epoch, state)
    try:
        pieces, w, _ = next(windows)
        rows = concat_tables(pieces)
        turns = old.last_turns
        assert turns is not None
        after = turns.snapshot()
        slots = turns.files
    except StopIteration:  # an epoch without rows
        return _no_rows(), []
    finally:
        windows.close()  # (its reading threads stop)
    taken = state.taken if w == state.window else 0
    if taken > num_rows(rows):
        raise OptionError(f"state: a damaged read_batches state (taken={taken}, but window "
                          f"{w} holds {num_rows(rows)} rows)")
    leftover = slice_table(rows, taken, num_rows(rows))
    spans: list[Span] = []
    for k, at in enumerate(after["slots"]):
        if at is None:
            continue
        p = Position(*at)
        mine = slots[k]
        first = mine[p.file]
        if p != Position(p.file):
            first = Span(first.file, p.record, p.byte, first.end,
                         None if first.rows is None else first.rows - p.rows)
        spans += [first, *mine[p.file + 1:]]
    return leftover, spans


def _no_rows() -> Table:
    out: Table = {k: np.empty(0, np.int64) for k in REF}
    return out


def _rows(part: Shard, sp: Span) -> int:
    """About how many rows a span holds (for balancing the shares; exactness is not needed)."""
    if sp.rows is not None:
        return sp.rows
    counts = part.file_rows()
    whole = counts[sp.file] if counts is not None else 1
    size = part.sizes[sp.file] if part.sizes else None
    if not size:
        return whole
    end = size if sp.end < 0 else sp.end
    return max(1, round(whole * (end - sp.byte) / size))


def _entries(parts: list[Shard], picked: list[tuple[int, int]]) -> Shard:
    """A shard of the files (i, f): file f of old shard i, each with that shard's stride and
    counts (the spans carry the even shards' caps)."""
    def pick(name: str) -> tuple | None:
        values = [getattr(parts[i], name) for i, _ in picked]
        if any(v is None for v in values):
            return None
        return tuple(v[f] for v, (_, f) in zip(values, picked))

    every = None
    if parts[0].every is not None:
        every = (parts[0].every[0], tuple(parts[i].stride(f)[1] for i, f in picked))
    return Shard(files=tuple(parts[i].files[f] for i, f in picked),
                 compressions=tuple(parts[i].compressions[f] for i, f in picked),
                 records=pick("records"), every=every, rows=pick("rows"),
                 sizes=pick("sizes"), versions=pick("versions"), keep=None)


def read_leftovers(reader: BatchReader, refs: Table, decoder: NumpyDecoder) -> Table:
    """The rows at the places `refs` (REF columns), decoded, in refs' order: each record
    holding one read once."""
    n = num_rows(refs)
    if not n:
        return {}
    files, starts, sizes, within = (refs[k] for k in REF)
    keys = np.stack([files, starts], axis=1)
    uniq, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    tables, base = [], []
    done = 0
    for f in np.unique(uniq[:, 0]):
        at = np.flatnonzero(uniq[:, 0] == f)
        loc = reader.plan.locations[int(f)]
        with loc.open_input() as src:
            bufs = [src.read_at(int(sizes[first[a]]), int(uniq[a, 1])) for a in at]
        lengths = np.array([len(b) for b in bufs], np.int64)
        buf = np.frombuffer(b"".join(bufs), np.uint8)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        table, rows = decoder.decode(buf, offsets, path=loc.uri)
        starts_of = np.concatenate([[0], np.cumsum(rows)[:-1]]) + done
        tables.append(table)
        base.append((at, starts_of))
        done += int(np.sum(rows))
    row_of = np.empty(len(uniq), np.int64)
    for at, starts_of in base:
        row_of[at] = starts_of
    return take_table(concat_tables(tables), row_of[inverse] + within)
