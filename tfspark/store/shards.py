"""Which part of a read plan each worker reads (shard=(n, i)), and how even shards cut the
same rows in every reader; what loader workers of one process take of their rank's part.
No TensorFlow, no pyspark: make_dataset and read_batches both shard here.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

from tfspark.errors import OptionError
from tfspark.store.fs import Location
from tfspark.store.read_plan import ReadPlan


@dataclass(frozen=True)
class Shard:
    """What one worker reads of a plan: its files, and what it takes of them per epoch."""

    files: tuple[Location, ...]
    compressions: tuple[str | None, ...]
    records: tuple[int, ...] | None  # this shard's records of each file; None: unknown
    every: tuple[int, tuple[int, ...]] | None = None  # (n, starts): records s, s+n, s+2n,
    #                                                   ... of each file, s = its start
    rows: tuple[int, ...] | None = None  # this shard's rows of each file (block layout)
    sizes: tuple[int, ...] | None = None  # bytes of each file (the manifest's)
    versions: tuple[str | None, ...] | None = None  # the write of each file (cache keys)
    keep: tuple[int, ...] | None = None  # even shards: rows kept of each file (the first
    #                                      of this shard's rows of it); None: every row
    dropped: int = 0  # rows of this shard cut so that every shard takes as many

    @property
    def total(self) -> int | None:
        """Rows per epoch; None when unknown."""
        if self.keep is not None:
            return sum(self.keep)
        if self.records is None:
            return None
        return sum(self.rows if self.rows is not None else self.records)

    def stride(self, f: int) -> tuple[int, int]:
        """(n, s): this shard reads records s, s+n, s+2n, ... of file f ((1, 0): all)."""
        return (self.every[0], self.every[1][f]) if self.every else (1, 0)

    def file_rows(self) -> tuple[int, ...] | None:
        """This shard's rows of each file (before any cut); None when unknown."""
        return self.rows if self.rows is not None else self.records


def shard(plan: ReadPlan, shard: tuple[int, int] | None = None, even: bool = True,
          warn: bool = True) -> Shard:
    """The part of `plan` that worker shard=(n, i) reads; the whole plan for None.

    With at least n files, each worker gets whole files, assigned by record count (largest
    first, to the worker with the fewest records), else every n-th record (numbered across
    the files in order, so that the workers' shares differ by one record at most). The
    parts are disjoint and together are everything. even=True (and known counts) cuts every
    worker's epoch to the smallest part's rows, so all take the same number of steps (as
    MultiWorkerMirroredStrategy needs): the rows cut are the last of the worker's files in
    file order, the same in every epoch and in every reader; a warning says how many (unless
    warn=False: another worker's shard, worked out).
    """
    comps = plan.file_compressions()
    if shard is None:
        return Shard(plan.locations, comps, plan.records, rows=plan.rows, sizes=plan.sizes,
                     versions=plan.versions)
    n, i = shard
    counts = plan.records
    rows = plan.rows if plan.rows is not None else counts  # what a worker's epoch counts
    totals: list[int] | None = None
    if len(plan.locations) < n:  # by records
        starts = [_starts(counts, n, k, len(plan.locations)) for k in range(n)]
        parts = [tuple(len(range(s, c, n)) for s, c in zip(starts[k], counts))
                 for k in range(n)] if counts else None
        row_parts = [tuple(_every_rows(c, r, plan.rows_per_record, n, s)
                           for c, r, s in zip(counts, rows, starts[k])) for k in range(n)] \
            if counts and rows else None
        mine = Shard(plan.locations, comps, parts[i] if parts else None, every=(n, starts[i]),
                     rows=row_parts[i] if row_parts and plan.rows is not None else None,
                     sizes=plan.sizes, versions=plan.versions)
        totals = [sum(p) for p in row_parts] if row_parts else None
    else:  # by files
        owners = _assign(rows, len(plan.locations), n)
        picked = [f for f in range(len(plan.locations)) if owners[f] == i]
        def chosen(values: tuple | None) -> tuple | None:
            return None if values is None else tuple(values[f] for f in picked)

        mine = Shard(tuple(plan.locations[f] for f in picked), tuple(comps[f] for f in picked),
                     chosen(counts), rows=chosen(plan.rows), sizes=chosen(plan.sizes),
                     versions=chosen(plan.versions))
        totals = [sum(c for c, o in zip(rows, owners) if o == k) for k in range(n)] \
            if rows else None
    if not even or totals is None:
        return mine
    take = min(totals)
    if take == 0 and max(totals):
        unit = "files and records" if plan.rows_per_record == 1 else "files and blocks"
        raise OptionError(f"shard={shard!r}: some of the {n} workers get no rows (the data set "
                          f"has too few {unit} to share), so even_shards would have every "
                          f"worker read nothing; use fewer workers, or even_shards=False")
    dropped = totals[i] - take
    if dropped and warn:
        warnings.warn(f"even_shards: worker {i} of {n} reads {take:,} of its {totals[i]:,} "
                      f"rows per epoch ({dropped:,} dropped, the last of its files) so that "
                      f"every worker takes the same number of rows; even_shards=False reads "
                      f"them all (then the workers' steps per epoch differ)", stacklevel=4)
    return replace(mine, keep=_prefix(mine.file_rows() or (), take), dropped=dropped)


def split_shard(part: Shard, workers: int, worker: int, rows_per_record: int) -> Shard:
    """One of `workers` disjoint parts of `part` that together are exactly its rows (no
    evening: DataLoader workers of one rank are not ranks of their own): whole files when
    there are at least `workers` files, else every workers-th of the shard's records."""
    if workers == 1:
        return part
    n_files = len(part.files)
    if n_files >= workers:
        owners = _assign(part.keep or part.file_rows(), n_files, workers)
        picked = [f for f in range(n_files) if owners[f] == worker]

        def pick(values: tuple | None) -> tuple | None:
            return None if values is None else tuple(values[f] for f in picked)

        return replace(part, files=pick(part.files) or (), compressions=pick(
            part.compressions) or (), records=pick(part.records), rows=pick(part.rows),
            sizes=pick(part.sizes), versions=pick(part.versions), keep=pick(part.keep),
            dropped=0)
    # The shard's records, numbered across its files, every workers-th: in file f the j-th
    # of the shard's records with j = w_f, w_f + workers, ... (its records are full but the
    # file's last, so rows and kept rows follow as for a file).
    ws = _starts(part.records, workers, worker, n_files)
    strides = [part.stride(f) for f in range(n_files)]
    every = (strides[0][0] * workers if strides else workers,
             tuple(s + n * w for (n, s), w in zip(strides, ws)))
    records = rows = keep = None
    if part.records is not None:
        records = tuple(len(range(w, r, workers)) for w, r in zip(ws, part.records))
        per_file = part.file_rows() or ()
        rows = tuple(_every_rows(r, t, rows_per_record, workers, w)
                     for r, t, w in zip(part.records, per_file, ws)) \
            if part.rows is not None else None
        if part.keep is not None:
            keep = tuple(_kept_every(k, rows_per_record, workers, w)
                         for k, w in zip(part.keep, ws))
    return replace(part, every=every, records=records, rows=rows, keep=keep, dropped=0)


def _starts(counts: tuple[int, ...] | None, n: int, k: int, n_files: int) -> tuple[int, ...]:
    """The first record of each file that worker k of n takes when records are numbered
    across the files in order (each file's own k without counts)."""
    if counts is None:
        return (k,) * n_files
    out, before = [], 0
    for c in counts:
        out.append((k - before) % n)
        before += c
    return tuple(out)


def _prefix(rows: tuple[int, ...], take: int) -> tuple[int, ...]:
    """Rows kept of each file when the first `take` rows in file order are kept."""
    out = []
    for r in rows:
        out.append(min(r, take))
        take -= out[-1]
    return tuple(out)


def _kept_every(kept: int, per_record: int, n: int, k: int) -> int:
    """Of a prefix of `kept` rows over records of `per_record` rows (full but the last), the
    rows in records k, k+n, k+2n, ..."""
    full, part = divmod(kept, per_record)
    rows = len(range(k, full, n)) * per_record
    if part and full % n == k:
        rows += part
    return rows


def _every_rows(records: int, rows: int, per_record: int, n: int, k: int) -> int:
    """Rows in records k, k+n, k+2n, ... of a file of `records` records holding `rows` rows,
    every record full (per_record rows) but the last."""
    taken = len(range(k, records, n))
    if not taken or per_record == 1:
        return taken
    last = records - 1
    if (last - k) % n:
        return taken * per_record
    return (taken - 1) * per_record + rows - last * per_record


def _assign(counts: tuple[int, ...] | None, n_files: int, n: int) -> list[int]:
    """The worker of each file: round robin without counts, else balanced by records (the
    same on every worker: it depends only on the plan)."""
    if counts is None:
        return [f % n for f in range(n_files)]
    load = [0] * n
    owners = [0] * n_files
    for f in sorted(range(n_files), key=lambda f: (-counts[f], f)):
        k = min(range(n), key=lambda k: (load[k], k))
        owners[f] = k
        load[k] += counts[f]
    return owners
