"""What a reader reads: files, spec, compression, labels and per-file record counts, from a
tfspark directory (its manifest), one split of it, or explicit TFRecord files with a spec.

No TensorFlow and no pyspark: make_dataset (tfspark.tf) and read_batches (tfspark.numpy) plan
here, so a bad path, split, spec or label fails before any pipeline is built.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from tfspark.errors import OptionError, SchemaError, TfsparkError
from tfspark.spec.layout import rows_of, rows_per_record
from tfspark.spec.model import FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.fs import Location, locate
from tfspark.wire.stream import sniff_gzip
from tfspark.wire.tfrecord import normalize_compression

AUTOTUNE = -1  # the value of tf.data.AUTOTUNE, without importing TensorFlow


@dataclass(frozen=True)
class ReadPlan:
    """What a reader will read: full file paths/URIs, the spec, compression, labels, and (with
    a manifest) each file's record count."""

    files: tuple[str, ...]
    spec: FeatureSpec
    compression: str | None  # None | "gzip": the manifest's, or the files' when all agree
    labels: tuple[str, ...]
    records: tuple[int, ...] | None = None  # per file, from the manifest; None: unknown
    compressions: tuple[str | None, ...] | None = None  # per file, when they differ
    rows_per_record: int = 1  # the layout: > 1 for blocks of rows (spec/layout.py)
    rows: tuple[int, ...] | None = None  # per file, block layout: rows (records are blocks)
    spec_given: bool = False  # spec= came from the caller, not from the data set's manifest

    def file_compressions(self) -> tuple[str | None, ...]:
        """Each file's compression (None or "gzip")."""
        return self.compressions or (self.compression,) * len(self.files)


@dataclass(frozen=True)
class Shard:
    """What one worker reads of a plan: its files, and what it takes of them per epoch."""

    files: tuple[str, ...]
    compressions: tuple[str | None, ...]
    records: tuple[int, ...] | None  # this shard's records of each file; None: unknown
    every: tuple[int, tuple[int, ...]] | None = None  # (n, starts): records s, s+n, s+2n,
    #                                                   ... of each file, s = its start
    rows: tuple[int, ...] | None = None  # this shard's rows of each file (block layout)
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


def shard(plan: ReadPlan, shard: tuple[int, int] | None = None, even: bool = True) -> Shard:
    """The part of `plan` that worker shard=(n, i) reads; the whole plan for None.

    With at least n files, each worker gets whole files, assigned by record count (largest
    first, to the worker with the fewest records), else every n-th record (numbered across
    the files in order, so that the workers' shares differ by one record at most). The
    parts are disjoint and together are everything. even=True (and known counts) cuts every
    worker's epoch to the smallest part's rows, so all take the same number of steps (as
    MultiWorkerMirroredStrategy needs): the rows cut are the last of the worker's files in
    file order, the same in every epoch and in every reader; a warning says how many.
    """
    comps = plan.file_compressions()
    if shard is None:
        return Shard(plan.files, comps, plan.records, rows=plan.rows)
    n, i = shard
    counts = plan.records
    rows = plan.rows if plan.rows is not None else counts  # what a worker's epoch counts
    totals: list[int] | None = None
    if len(plan.files) < n:  # by records
        starts = [_starts(counts, n, k, len(plan.files)) for k in range(n)]
        parts = [tuple(len(range(s, c, n)) for s, c in zip(starts[k], counts))
                 for k in range(n)] if counts else None
        row_parts = [tuple(_every_rows(c, r, plan.rows_per_record, n, s)
                           for c, r, s in zip(counts, rows, starts[k])) for k in range(n)] \
            if counts and rows else None
        mine = Shard(plan.files, comps, parts[i] if parts else None, every=(n, starts[i]),
                     rows=row_parts[i] if row_parts and plan.rows is not None else None)
        totals = [sum(p) for p in row_parts] if row_parts else None
    else:  # by files
        owners = _assign(rows, len(plan.files), n)
        picked = [f for f in range(len(plan.files)) if owners[f] == i]
        mine = Shard(tuple(plan.files[f] for f in picked), tuple(comps[f] for f in picked),
                     tuple(counts[f] for f in picked) if counts else None,
                     rows=tuple(plan.rows[f] for f in picked) if plan.rows else None)
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
    if dropped:
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
            keep=pick(part.keep), dropped=0)
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


def plan_read(path_or_files: Any, *, split: str | None = None,
              spec: FeatureSpec | str | dict | None = None,
              label_cols: Iterable[str] | str | None = None, compression: str | None = None,
              check_files: bool = True) -> ReadPlan:
    """Files, spec, compression and labels to read; errors come here, before any training.
    check_files: every file must exist (a missing one is named in the error). A spec given
    here must name keys the records hold (checked on the first records)."""
    plan = _plan(path_or_files, split, spec, label_cols, compression, check_files)
    if spec is not None and check_files:
        _check_spec_keys(plan)
    return replace(plan, spec_given=spec is not None)


def _plan(path_or_files: Any, split: str | None, spec: Any, label_cols: Any,
          compression: str | None, check_files: bool) -> ReadPlan:
    if isinstance(path_or_files, (str, os.PathLike)):
        path = os.fspath(path_or_files)
        loc = locate(path)
        if _is_file(loc):
            return _plan([path], split, spec, label_cols, compression, check_files)
        return _plan_directory(path, loc, split, spec, label_cols, compression, check_files)
    if isinstance(path_or_files, (bytes, dict)) or not isinstance(path_or_files, Iterable):
        raise OptionError(f"make_dataset needs a directory or a list of TFRecord files, got "
                          f"{type(path_or_files).__name__}")
    files = [os.fspath(f) for f in path_or_files]
    if split is not None:
        raise OptionError("split= only applies to a tfspark directory, not to a list of files")
    if spec is None:
        raise OptionError(f"reading {len(files)} explicit file(s) needs spec=: a FeatureSpec, "
                          f"its JSON, or the path of a spec or _tfspark.json file")
    feature_spec, manifest = _load_spec(spec)
    hint = manifest.get("compression") if manifest else None
    # Block files read as blocks only when the manifest given as spec= says so.
    block = rows_per_record(manifest, "the manifest given as spec") if manifest else 1
    if check_files:
        _check_exist(files, None)
    labels = _labels(feature_spec, label_cols)
    if compression is not None or hint is not None:
        comp = normalize_compression(compression) if compression is not None else hint
        return ReadPlan(tuple(files), feature_spec, comp, labels, rows_per_record=block)
    # No manifest says: each file's first bytes do, as for every tfspark reader.
    comps = tuple(_sniff(f) for f in files)
    common = comps[0] if len(set(comps)) == 1 else None
    return ReadPlan(tuple(files), feature_spec, common, labels,
                    compressions=None if len(set(comps)) <= 1 else comps, rows_per_record=block)


def _plan_directory(path: str, loc: Location, split: str | None, spec: Any, label_cols: Any,
                    compression: str | None, check_files: bool) -> ReadPlan:
    root_uri, root, manifest = _resolve_split(path, loc, split)
    record_type = manifest.get("record_type", "Example")
    if record_type not in ("Example", "SequenceExample") or manifest.get("spec") is None:
        raise SchemaError(f"{root_uri!r} holds raw records (record_type {record_type!r}), not "
                          f"tf.train.Example: there is no spec to parse them with. Read them "
                          f"with tf.data.TFRecordDataset")
    comp = manifest.get("compression")
    if compression is not None and normalize_compression(compression) != comp:
        raise OptionError(f"compression={compression!r} disagrees with the manifest of "
                          f"{root_uri!r} ({comp or 'none'}); leave compression unset for "
                          f"directories")
    feature_spec = _load_spec(spec)[0] if spec is not None else \
        FeatureSpec.from_dict(manifest["spec"])
    if feature_spec.record_type != record_type:
        raise SchemaError(f"{root_uri!r} holds {record_type} records but the spec given is for "
                          f"{feature_spec.record_type} records; leave spec= out or give one "
                          f"of this data set's record type")
    rels = [_safe_rel(e["path"], root_uri) for e in manifest.get("files", [])]
    if root.is_local:
        files = [os.path.join(root.base, r) for r in rels]
    else:
        files = [f"{root_uri.rstrip('/')}/{r}" for r in rels]
    if check_files:
        _check_exist(files, root if not root.is_local else None, rels)
    counts = tuple(int(e["records"]) for e in manifest.get("files", []))
    block = rows_per_record(manifest, root_uri)
    rows = tuple(rows_of(e) for e in manifest.get("files", [])) if block > 1 else None
    return ReadPlan(tuple(files), feature_spec, comp, _labels(feature_spec, label_cols), counts,
                    rows_per_record=block, rows=rows)


SPEC_CHECK_RECORDS = 100  # records looked at for the keys of a given spec


def _check_spec_keys(plan: ReadPlan) -> None:
    """SchemaError when none of the spec's keys is in the first records of the data: such a
    spec would read rows of pure defaults (a spec of other files, or of other names)."""
    from tfspark.spec.layout import value_keys
    from tfspark.wire.example_py import record_keys

    if plan.rows_per_record > 1:  # (every block has "__rows": not a key of the spec's)
        want = {k for f in plan.spec.features for k in value_keys(f)}
    else:
        want = {k for f in plan.spec.features for k in f.keys}
    seen: set[str] = set()
    looked = 0
    try:
        for data in _first_records(plan, SPEC_CHECK_RECORDS):
            seen |= record_keys(data)
            looked += 1
            if seen & want:
                return
    except (TfsparkError, OSError):  # damage or a wrong compression: the read will say so
        return
    if looked and not seen & want:
        shown = sorted(seen)[:20]
        raise SchemaError(f"the spec given names none of the keys in {plan.files[0]!r} (first "
                          f"{looked} records): the spec has {sorted(want)[:20]}, the records "
                          f"hold {shown}; give the spec these files were written with")


def _first_records(plan: ReadPlan, n: int) -> Any:
    """The data of the first n records of the plan's files, in order."""
    from tfspark.wire.stream import read_records

    for name, comp in zip(plan.files, plan.file_compressions()):
        loc = locate(name)
        with loc.fs.open_input_stream(loc.base, compression=None) as f:
            for data in read_records(f, comp, path=name):
                yield data
                n -= 1
                if n <= 0:
                    return


def _resolve_split(path: str, loc: Location, split: str | None) -> tuple[str, Location, dict]:
    """(uri, location, manifest) of the directory to read."""
    if split is None:
        manifest = mf.read_manifest(loc)
        if manifest.get("splits"):
            raise OptionError(f"{path!r} holds the splits {manifest['splits']}; read one at a "
                              f"time with split='{manifest['splits'][0]}' (or another)")
        return path, loc, manifest
    if not isinstance(split, str) or not split or "/" in split or split in (".", ".."):
        raise OptionError(f"split must be a split name like 'train', got {split!r}")
    sub_uri = f"{path.rstrip('/')}/{split}"
    sub = locate(sub_uri)
    if sub.exists(mf.NAME):
        return sub_uri, sub, mf.read_manifest(sub)
    if loc.exists(mf.NAME):
        manifest = mf.read_manifest(loc)
        if manifest.get("split") == split:  # the path is that split's directory already
            return path, loc, manifest
        have = manifest.get("splits") or []
        raise mf.ManifestError(f"{path!r} has no split {split!r}; "
                               + (f"its splits are {have}" if have else
                                  "it was written without splits: leave split unset"))
    return sub_uri, sub, mf.read_manifest(sub)  # raises: no manifest here


def _safe_rel(rel: str, where: str) -> str:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or ".." in parts or "://" in rel:
        raise mf.ManifestError(f"the manifest of {where!r} names {rel!r}, which is not a "
                               f"relative path inside the directory; the manifest is damaged")
    return rel


def _is_file(loc: Location) -> bool:
    import pyarrow.fs as pafs

    try:
        return loc.fs.get_file_info(loc.base).type == pafs.FileType.File
    except OSError:
        return False


def _check_exist(files: list[str], remote_root: Location | None,
                 rels: list[str] | None = None) -> None:
    if remote_root is not None and rels is not None:  # one listing, not a request per file
        present = set(remote_root.list_files())
        missing = [f for f, r in zip(files, rels) if r not in present]
    else:
        missing = [f for f in files if not _exists(f)]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise FileNotFoundError(f"TFRecord file {missing[0]!r}{more} named for reading does not "
                                f"exist; the data set is incomplete (deleted or moved files?): "
                                f"rewrite it or fix the file list")


def _exists(path: str) -> bool:
    loc = locate(path)
    return _is_file(loc)


def _sniff(path: str) -> str | None:
    """A file's compression from its content (the gzip magic bytes), whatever its name."""
    loc = locate(path)
    try:
        with loc.fs.open_input_file(loc.base) as f:
            return "gzip" if sniff_gzip(f) else None
    except OSError:  # unreadable here (a file TF's filesystems reach): fall back on the name
        return "gzip" if path.endswith(".gz") else None


def _load_spec(spec: Any) -> tuple[FeatureSpec, dict[str, Any] | None]:
    """(FeatureSpec, the manifest it came from or None) from the forms `spec=` accepts."""
    if isinstance(spec, FeatureSpec):
        return spec, None
    if isinstance(spec, (str, os.PathLike)) and not str(spec).lstrip().startswith("{"):
        return _spec_from_path(os.fspath(spec))
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise SchemaError(f"spec is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise SchemaError(f"spec must be a FeatureSpec, JSON text, a dict or a path, got "
                          f"{type(spec).__name__}")
    if spec.get("format") == mf.FORMAT:
        if spec.get("spec") is None:
            raise SchemaError("the manifest given as spec has no spec (record_type "
                              f"{spec.get('record_type')!r}): its records are not Examples")
        return FeatureSpec.from_dict(spec["spec"]), spec
    return FeatureSpec.from_dict(spec), None


def _spec_from_path(path: str) -> tuple[FeatureSpec, dict[str, Any] | None]:
    loc = locate(path)
    if not _is_file(loc):
        if loc.exists(mf.NAME):
            return _load_spec(mf.read_manifest(loc))
        raise SchemaError(f"spec path {path!r} is neither a JSON file nor a tfspark directory")
    with loc.fs.open_input_stream(loc.base, compression=None) as f:
        text = f.read()
    try:
        return _load_spec(json.loads(text))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"spec file {path!r} is not valid JSON: {e}") from None


def _labels(spec: FeatureSpec, label_cols: Iterable[str] | str | None) -> tuple[str, ...]:
    if label_cols is None:
        return tuple(spec.label_names)
    cols = [label_cols] if isinstance(label_cols, str) else list(label_cols)
    missing = [c for c in cols if c not in spec.names]
    if missing:
        raise SchemaError(f"label column(s) {missing} not in the spec; features are "
                          f"{spec.names}")
    return tuple(cols)


def check_read_args(batch_size: Any, shuffle_buffer: Any, epochs: Any, num_parallel_reads: Any,
                    shard: Any, cache: Any, seed: Any = None) -> None:
    """OptionError for a bad batch_size, shuffle_buffer, epochs, num_parallel_reads, shard,
    cache or seed argument of a reader (make_dataset, read_batches)."""

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not is_int(batch_size) or batch_size < 1:
        raise OptionError(f"batch_size must be a positive int, got {batch_size!r}")
    if shuffle_buffer is not None and (not is_int(shuffle_buffer) or shuffle_buffer < 0):
        raise OptionError(f"shuffle_buffer must be an int >= 0 (0: no shuffling) or None, got "
                          f"{shuffle_buffer!r}")
    if epochs is not None and (not is_int(epochs) or epochs < 1):
        raise OptionError(f"epochs must be a positive int, or None to repeat forever, got "
                          f"{epochs!r}")
    if not is_int(num_parallel_reads) or (num_parallel_reads < 1 and
                                          num_parallel_reads != AUTOTUNE):
        raise OptionError(f"num_parallel_reads must be a positive int or AUTOTUNE (-1), got "
                          f"{num_parallel_reads!r}")
    if shard is not None:
        ok = (isinstance(shard, (tuple, list)) and len(shard) == 2 and all(map(is_int, shard))
              and shard[0] >= 1 and 0 <= shard[1] < shard[0])
        if not ok:
            raise OptionError(f"shard must be (num_workers, index) with 0 <= index < "
                              f"num_workers, got {shard!r}")
    if seed is not None and not is_int(seed):
        raise OptionError(f"seed must be an int or None, got {seed!r}")
    if not isinstance(cache, (bool, str)):
        raise OptionError(f"cache must be True/False or a file path, got {cache!r}")
