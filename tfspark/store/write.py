"""A write of a data set, whoever runs it: an append's fit to the data set, each task's part
files (and statistics), then the commit on the driver, an abort that removes what a failed job
left, the sweep after a commit, and what a failed write leaves (nothing of its own). Spark's
data source and write_tfrecords run it in Spark's tasks (tfspark.spark's adapter);
write_dataset runs its tasks in one process. No pyspark here.

Files are named by the write id and the task, so a retried or failed attempt never clobbers
another's; the manifest is the commit, written under the commit lock against the version of the
path the write began from (WriteConflictError when another write committed since).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from tfspark import errors, progress
from tfspark.errors import (
    CountMismatchError,
    OptionError,
    SchemaError,
    TfsparkError,
    WriteConflictError,
)
from tfspark.spec import FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.commit import (
    PART_FILE,
    TaskGuard,
    conflict_message,
    existing_manifest,
    last_write,
    marker_write_id,
    task_markers,
    wait_for_tasks,
    write_id_of,
)
from tfspark.store.fs import Location, locate
from tfspark.store.lock import commit_lock
from tfspark.store.options import WriteOptions
from tfspark.store.uris import error_line, redact

if TYPE_CHECKING:
    from tfspark.store.stats.sketch import Partial

log = logging.getLogger("tfspark")


@dataclass
class TaskCommit:
    """What one write task sends the driver: the manifest entries of the files it wrote."""

    write_id: str
    task: str
    files: list[dict[str, Any]] = field(default_factory=list)
    partial_stats: Partial | None = None  # the task's statistics (TaskStats.result())
    nulls: dict[str, int] = field(default_factory=dict)  # of the writer's count_nulls features
    copy_file: str | None = None  # its file of the parquet copy (the writer's `copy_to`)
    copy_rows: int = 0  # the rows the task took in (and its copy file holds)


@dataclass
class DataSetWrite:
    """One write, planned on the driver: sent to the tasks (pickled to Spark's executors: only
    plain data here; files and encoders are made in write_task) and committed by the driver."""

    commit_class: ClassVar[type[TaskCommit]] = TaskCommit  # what a task's report is (Spark's
    # data source needs its own message type)

    uri: str
    home: Location  # the output on its filesystem (pickled with it to the tasks)
    mode: str
    skip: bool
    write_id: str
    base_write: str | None
    spec: FeatureSpec | None
    opts: WriteOptions
    keep: list[str]
    schema: dict[str, Any] | None = None
    created: bool = False  # the output directory did not exist before this write
    # write ids it sweeps: overwrite, the writes it replaces; append, the uncommitted ones
    replaces: list[str] = field(default_factory=list)
    split_column: str | None = None  # write_tfrecords: the column naming each row's split
    splits: list[str] = field(default_factory=list)  # declared: a manifest each, rows or not
    manifest_stats: dict[str, Any] | None = None  # write_tfrecords: the manifest's "stats"
    backup_entry: mf.BackupEntry | None = None  # the manifest's record of the parquet copy
    # write_tfrecords: features whose null rows the tasks count (their backup's footers did not)
    count_nulls: list[str] = field(default_factory=list)
    # write_tfrecords in one pass: where the tasks write their rows' parquet copy (the staging
    # of the backup), from the batches they encode
    copy_to: Location | None = None

    def write_task(self, iterator: Iterator[pa.RecordBatch], task: str) -> TaskCommit:
        """In a task: encode and frame its Arrow batches into its own part files. `task` names
        the task (partition and attempt: "<partition>-<attempt>"), unique within the write.

        Files are named by task and write id, so a retried or failed attempt never clobbers
        another's; on failure this attempt's files are removed before the error propagates.
        """
        from tfspark.arrow.encode import BatchEncoder
        from tfspark.arrow.encode_block import BlockEncoder
        from tfspark.arrow.values import column_of
        from tfspark.store.part_files import ParquetCopy, TaskFiles, batches_by_group

        if self.skip:
            for _ in iterator:
                pass
            return self.commit_class(self.write_id, task)
        block = self.opts.rows_per_record
        encoder = None if self.spec is None else BatchEncoder(
            self.spec, null_elements=self.opts.null_elements) if block == 1 else BlockEncoder(
            self.spec, block, null_elements=self.opts.null_elements)
        loc = self.home
        files = TaskFiles(loc, self.write_id, task, self.opts.compression,
                          self.opts.gzip_level, self.opts.record_type,
                          self.opts.max_records_per_file, encoder,
                          max_bytes=self.opts.max_bytes_per_file, rows_per_record=block)
        guard = TaskGuard(loc, self.write_id, task)
        partial = None
        if self.opts.task_stats and self.spec is not None:
            from tfspark.store.stats.sketch import TaskStats

            partial = TaskStats(self.spec, self.opts.stats_top_k)
        counting = [f for f in self.spec.features if f.name in self.count_nulls] \
            if self.spec is not None else []
        nulls = dict.fromkeys((f.name for f in counting), 0)
        copy = None
        if self.copy_to is not None:
            partition, _, attempt = task.partition("-")
            copy = ParquetCopy(self.copy_to, ParquetCopy.file_name(partition, self.write_id,
                                                                   attempt),
                               drop=(self.split_column,) if self.split_column else ())
            iterator = _teed(iterator, copy)
        try:
            guard.start()
            for split, part, batch, numbers in batches_by_group(
                    iterator, self.split_column, list(self.opts.partition_by), self.keep):
                files.write_group(split, part, batch, numbers)
                if partial is not None:
                    partial.add(split, batch)
                for f in counting:
                    nulls[f.name] += column_of(batch, f.path).null_count
                guard.check()
            done = files.close()
            copied = copy.close() if copy is not None else None
            guard.finish()
            return self.commit_class(self.write_id, task, done,
                                     partial.result() if partial is not None else None, nulls,
                                     copied, copy.rows if copy is not None else 0)
        except BaseException:
            files.discard()  # before deregistering: abort waits on the registration
            if copy is not None:
                copy.discard()
            guard.release()
            raise

    def commit_manifest(self, messages: Sequence[Any]) -> mf.Manifest | None:
        """On the driver, after every task succeeded: write the manifest (the commit point), then
        sweep files of failed attempts and, on overwrite, the old data set's. Returns the
        manifest this write committed (None for mode 'ignore' on an existing path).

        Raises WriteConflictError when another write committed to the path since the version
        this write started from (any mode); the check and the manifest write hold the commit
        lock.
        """
        if self.skip:
            log.info("tfspark: %s exists; mode 'ignore' wrote nothing", self.home.uri)
            return None
        loc = self.home
        files = [f for m in messages if isinstance(m, TaskCommit) for f in m.files]
        try:
            with commit_lock(loc, self.write_id) as seen:  # check and write as one step
                old = existing_manifest(loc, self.mode)
                if last_write(old) != self.base_write:  # a write committed since planning
                    raise WriteConflictError(conflict_message(self.home.uri, self.mode))
                manifest = self._manifest(old, files, messages)
                mf.write_manifest(loc, manifest, seen)
        except BaseException:
            self._remove_ours(loc, [f["path"] for f in files])
            raise
        self._sweep(loc, manifest)
        return manifest

    def _manifest(self, old: mf.Manifest | None, files: list[dict[str, Any]],
                  messages: Sequence[Any]) -> mf.Manifest:
        """The manifest this write commits: the data set's with this write's files added
        (append), or a new one."""
        appended = self.mode == "append" and old is not None
        manifest = old if appended and old is not None else mf.Manifest(
            spec=self.spec, compression=self.opts.compression,
            record_type=self.opts.record_type, partition_by=self.opts.partition_by,
            rows_per_record=self.opts.rows_per_record)
        entries = sorted((mf.FileEntry(**f) for f in files), key=lambda f: f.path)
        manifest = replace(manifest.with_files(entries, self.write_id),
                           splits=tuple(sorted(set(manifest.splits) | set(self.splits)
                                               | {f.split for f in entries if f.split})))
        if self.schema is not None:
            manifest = replace(manifest, schema=self.schema)
        if self.opts.description is not None:
            manifest = replace(manifest, description=self.opts.description)
        stats = self.manifest_stats
        if self.opts.task_stats and self.spec is not None:
            stats = {**(stats or {}), **self._task_stats(messages, appended)}
        if stats is not None:
            manifest = replace(manifest, stats=dict(stats))
        if self.backup_entry is not None:
            manifest = replace(manifest, backup=self.backup_entry)
        elif manifest.backup:  # appended without a backup: it misses rows now
            manifest = replace(manifest, backup=replace(manifest.backup, complete=False))
        return manifest

    def _task_stats(self, messages: Sequence[Any],
                    appended: bool) -> dict[str, Any]:
        """featureStats: the tasks' statistics merged (of this write's rows only)."""
        from tfspark.store.stats.sketch import merge

        assert self.spec is not None
        parts = [m.partial_stats for m in messages
                 if isinstance(m, TaskCommit) and m.partial_stats]
        out = merge(parts, self.spec, self.opts.stats_top_k, self.split_column)
        if appended:
            out["features_scope"] = "last write"
        return out

    def abort_write(self) -> None:
        """On the driver, after a failed job: stop the tasks still running (Spark does not
        wait for them), then remove every file this write id produced."""
        if self.skip:
            return
        loc = self.home
        if loc.exists():
            wait_for_tasks(loc, self.write_id)
        self._remove_ours(loc)

    def _remove_ours(self, loc: Location, written: list[str] | None = None) -> None:
        """Every file of this write: those listed, and those the tasks said they wrote (a
        filesystem of the user's own may list nothing where it may not look: fsspec's)."""
        left = False
        markers = set(task_markers(loc, self.write_id))
        ours = set(written or ())
        for rel in loc.list_files():
            if (self.write_id in rel and PART_FILE.search(rel)) or rel in markers:
                ours.add(rel)
            elif rel not in ours:
                left = True
        loc.delete_files(sorted(ours))
        if self.created and not left:  # nothing else there: take back the directory we made
            loc.delete_all()

    def _sweep(self, loc: Location, manifest: mf.Manifest) -> None:
        """After commit: drop failed attempts' files, those of the writes it replaces (on
        overwrite, the old data set and files of no tfspark write too; on append, the writes
        no manifest named that were there when it was planned), never those of a write begun
        since, which commits or cleans up itself."""
        keep = {f.path for f in manifest.files}
        splits = set(manifest.splits)
        overwrite = self.mode == "overwrite"
        gone = []
        for rel in loc.list_files():  # one listing; the deletes at once on a store
            top = rel.split("/")[0]
            if rel == top:  # tasks killed without deregistering
                wid = marker_write_id(rel)
                if wid == self.write_id or wid in self.replaces:
                    gone.append(rel)
            if rel not in keep and PART_FILE.search(rel):
                wid = write_id_of(rel)
                if self.write_id in rel or wid in self.replaces or (overwrite and wid is None):
                    gone.append(rel)
            elif overwrite and rel.endswith("/" + mf.NAME) and top not in splits and \
                    "=" not in top:  # the manifest of a split the data set no longer has
                gone.append(rel)
        loc.delete_files(gone)


@dataclass(frozen=True)
class SplitResult:
    """What a write put in one split: rows, files and bytes."""

    rows: int = 0
    files: int = 0
    bytes: int = 0


@dataclass(frozen=True)
class WriteResult:
    """What a write did (write_tfrecords, write_dataset): path, spec, rows, files and bytes
    written, what went to each split, the parquet copy ("backup") and the row counts of the
    source and the copy, timings per stage; skipped for mode='ignore' on an existing path.
    """

    path: str
    spec: FeatureSpec | None
    rows: int
    files: int
    bytes: int
    splits: dict[str, SplitResult] = field(default_factory=dict)
    backup: str = ""
    source_rows: int = 0
    backup_rows: int = 0
    compression: str | None = None
    skipped: bool = False
    seconds: dict[str, float] = field(default_factory=dict)  # per stage
    passes: int = 1  # over the source rows: 1, or 2 (the backup staged first)
    two_passes_why: str = ""  # why two (write_tfrecords)
    dali_indexes: int = 0  # DALI index files written after the commit (dali_index=True)

    def summary(self) -> str:
        """A few lines for the terminal: counts (source = backup = tfrecords), splits, timings."""
        if self.skipped:
            return f"tfspark: {self.path} exists; mode 'ignore' wrote nothing"
        lines = [f"tfspark wrote {self.rows:,} rows to {self.path} "
                 f"({progress.many(self.files, 'file')}, {self.bytes / 2**20:,.1f} MiB, "
                 f"compression={self.compression or 'none'})",
                 f"  rows: source {self.source_rows:,} = backup {self.backup_rows:,} = "
                 f"tfrecords {self.rows:,}",
                 f"  backup: {self.backup}"]
        if self.seconds:
            lines.append("  time: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.seconds.items()))
        if self.two_passes_why:
            lines.append(f"  two passes over the rows: {self.two_passes_why}")
        if self.dali_indexes:
            lines.append(f"  DALI index: {progress.many(self.dali_indexes, 'file')} written "
                         f"(tfspark.dali_index(path) pairs them with the data files)")
        for name, s in self.splits.items():
            lines.append(f"  split {name}: {progress.many(s.rows, 'row')}, "
                         f"{progress.many(s.files, 'file')}, {s.bytes / 2**20:,.1f} MiB")
        if self.spec is not None:
            labels = ", ".join(self.spec.label_names) or "none"
            lines.append(f"  features: {len(self.spec.features)} (labels: {labels}); spec in "
                         f"{mf.NAME}")
        return "\n".join(lines)


def write_result(path: str, spec: FeatureSpec | None, manifest: mf.Manifest, *, write_id: str,
                 backup: str, source_rows: int, backup_rows: int,
                 compression: str | None) -> WriteResult:
    """The WriteResult of write `write_id`, committed as `manifest`; CountMismatchError when
    its TFRecords do not hold the rows of its parquet copy."""
    files = manifest.files_of(write_id)
    rows = sum(f.row_count for f in files)
    if rows != backup_rows:
        raise CountMismatchError(f"the TFRecords at {path} hold {rows} rows but the backup "
                                 f"{backup} holds {backup_rows}; the data set is inconsistent: "
                                 f"rewrite it with mode='overwrite'")
    splits = {name: SplitResult() for name in manifest.splits}
    for f in files:
        if f.split:
            s = splits.get(f.split, SplitResult())
            splits[f.split] = SplitResult(s.rows + f.row_count, s.files + 1, s.bytes + f.bytes)
    return WriteResult(path, spec, rows, len(files), sum(f.bytes for f in files),
                       dict(sorted(splits.items())), backup, source_rows, backup_rows,
                       compression)



def replaced_writes(loc: Location, mode: str, old: mf.Manifest | None,
                    created: bool) -> list[str]:
    """The writes whose files are at loc now that a write in `mode` sweeps once it commits
    (never those of writes that start later): overwrite replaces them all (the old data set,
    leftovers of failed or killed writes); an append those no manifest names (a killed
    write's, or a running one's that began before it and so cannot commit after it: it commits
    against the data set as it began, which the append changes). created: the write makes
    the directory (nothing there to sweep)."""
    if mode not in ("overwrite", "append") or (mode == "append" and created):
        return []
    listed = loc.list_files()
    there = {w for w in map(write_id_of, listed) if w} | \
        {w for w in map(marker_write_id, listed) if w}
    committed = {w.write_id for w in (old.writes if old else ())} | \
        {f.write_id for f in (old.files if old else ()) if f.write_id}
    return sorted(there | committed if mode == "overwrite" else there - committed)

# ---------------------------------------------------------------- before a write: an append's fit

def refuse_label_partitions(partition_cols: Any, label_cols: Any, partition_name: str,
                            label_name: str) -> None:
    """A label cannot be a partition column: those become directory names, not features."""
    both = sorted(set(partition_cols) & set(label_cols))
    if both:
        raise OptionError(f"column(s) {both} are both labels and partition columns; a partition "
                          f"column becomes directory names, not a feature of the records, so "
                          f"it cannot be a label: drop it from {partition_name} or "
                          f"{label_name}")


def check_append(opts: WriteOptions, old: mf.Manifest,
                 spec: FeatureSpec | None) -> FeatureSpec | None:
    """The spec an append writes with (_append_spec), once its options and columns fit the
    data set `old`; write_tfrecords asks before its backup (with the spec of the columns
    alone: the fixed lengths found in the rows are checked once the rows are seen)."""
    spec = _append_spec(opts, old, spec)
    _check_same_layout(opts, old)
    return spec


def _check_same_layout(opts: WriteOptions, old: mf.Manifest) -> None:
    """An append keeps the data set's layout: readers take one layout per data set."""
    have = old.rows_per_record
    if have != opts.rows_per_record:
        def what(n: int) -> str:
            return "the row layout (one row per record)" if n == 1 else \
                f"the block layout with rows_per_record={n}"
        raise OptionError(f"{redact(opts.path)!r} holds {what(have)}; this append asks for "
                          f"{what(opts.rows_per_record)}. Append with rowsPerRecord={have} "
                          f"(rows_per_record={have}), or overwrite the data set")


def _append_spec(opts: WriteOptions, old: mf.Manifest,
                 spec: FeatureSpec | None) -> FeatureSpec | None:
    """The spec an append writes with: the data set's own, when this DataFrame's fits it.

    Fits: the same features, dtypes, encodings and source types. Nullability may differ (the
    stored spec is kept: a null where it has none is refused at its row), and so may a fixed
    length found in the data (fixed [n] stored and variable now: every row must have n values;
    variable stored: kept). Labels and defaults given for this write must match the stored ones.
    """
    checks = [("compression", old.compression, opts.compression),
              ("recordType", old.record_type, opts.record_type),
              ("partitionBy", list(old.partition_by), list(opts.partition_by))]
    for name, was, now in checks:
        if was != now:
            raise OptionError(f"cannot append: the data set at {redact(opts.path)!r} has "
                              f"{name}={was!r} but this write has {now!r}; use the same {name} "
                              f"or overwrite")
    if spec is None or old.spec is None:
        if (spec is None) != (old.spec is None):
            raise SchemaError(f"cannot append to {redact(opts.path)!r}: its feature spec "
                              f"differs from this DataFrame's (the data set has no spec); write "
                              f"to a new path or overwrite")
        return spec
    stored = old.spec
    diff = _spec_diff(stored, spec, labels=bool(opts.label_cols),
                      defaults=set(opts.defaults or {}))
    if diff:
        raise SchemaError(f"cannot append to {redact(opts.path)!r}: its feature spec differs "
                          f"from this DataFrame's ({diff}); cast the columns to the data set's "
                          f"types, write to a new path or overwrite")
    return stored


_SAME = ("path", "dtype", "encoding", "source_type")  # must match for an append


def _spec_diff(stored: FeatureSpec, new: FeatureSpec, labels: bool, defaults: set[str]) -> str:
    """What keeps `new` rows from being appended under `stored` ("" when nothing does)."""
    was = {f.name: f for f in stored.features}
    now = {f.name: f for f in new.features}
    parts = []
    if sorted(set(now) - set(was)):
        parts.append(f"new: {sorted(set(now) - set(was))}")
    if sorted(set(was) - set(now)):
        parts.append(f"missing: {sorted(set(was) - set(now))}")
    changed = []
    for name in sorted(set(was) & set(now)):
        a, b = was[name], now[name]
        fields = [k for k in _SAME if getattr(a, k) != getattr(b, k)]
        both_fixed = a.kind == b.kind == "fixed"
        if (a.kind != b.kind and "varlen" not in (a.kind, b.kind)) or \
                (both_fixed and a.shape != b.shape):
            fields.append(f"shape {list(a.shape) if a.kind == 'fixed' else a.kind} -> "
                          f"{list(b.shape) if b.kind == 'fixed' else b.kind}")
        if labels and a.label != b.label:
            fields.append("label")
        if name in defaults and a.default != b.default:
            fields.append("default")
        if fields:
            changed.append(f"{name} ({', '.join(fields)})")
    if changed:
        parts.append(f"changed: {', '.join(changed)}")
    return "; ".join(parts)


@dataclass
class RowFacts:
    """What a write learns of its rows while it stages them, before the spec is inferred:
    their number (None: not known yet), the null rows of each feature (those it knows), and
    the fixed length [n] of each array feature whose every row holds n > 0 values."""

    rows: int | None
    null_counts: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, list[int]] = field(default_factory=dict)


def _teed(batches: Iterator[pa.RecordBatch], copy: Any) -> Iterator[pa.RecordBatch]:
    """The batches, each also written to the task's parquet copy as it passes."""
    for batch in batches:
        copy.write(batch)
        yield batch


def check_append_rows(path: str, stored: FeatureSpec, facts: RowFacts) -> None:
    """PriorState an append is written: the rows fit the stored spec's nullability and fixed
    lengths (what the data source would refuse row by row), else how to proceed."""
    for f in stored.features:
        nulls = facts.null_counts.get(f.name, 0)
        if not f.nullable and nulls:
            raise OptionError(f"cannot append to {path!r}: column {f.name!r} has {nulls} null "
                              f"row(s) but the data set stores it as not nullable; fill the "
                              f"nulls (fillna/coalesce), or overwrite the data set")
        if f.kind == "fixed" and f.shape and nulls < (facts.rows or 0) and \
                facts.shapes.get(f.name) != list(f.shape):
            raise OptionError(f"cannot append to {path!r}: column {f.name!r} has {f.shape[0]} "
                              f"values in every row of the data set (found when it was "
                              f"written), but not in every row of this DataFrame; append rows "
                              f"of {f.shape[0]} values, or overwrite it with "
                              f"detect_fixed_lengths=False to store the column as "
                              f"variable-length")


def label_nulls(spec: FeatureSpec, null_counts: dict[str, int], rows: int,
                defaults: Any) -> list[str]:
    """A line for each fixed label column with null rows that no `defaults=` entry covers:
    readers fill those rows with the type's default, a label no one gave (a 0 trains as a
    negative). A variable-length label reads as an empty list: nothing made up."""
    given = set(dict(defaults or {}))
    lines = []
    for f in spec.features:
        nulls = null_counts.get(f.name, 0)
        if f.label and f.kind == "fixed" and nulls and f.name not in given:
            lines.append(f"tfspark: label column {f.name!r} is null in {nulls:,} of {rows:,} "
                         f"rows; readers fill them with {f.default!r}, its type's default: "
                         f"drop those rows first (df.dropna(subset=[{f.name!r}])), or give "
                         f"defaults={{{f.name!r}: ...}} with a value that marks them")
    return lines


# ---------------------------------------------------------------- a failed write: what it leaves

def unwrapped(e: BaseException) -> BaseException:
    """The tfspark error inside a Spark exception, as its own class; else `e` itself."""
    if isinstance(e, TfsparkError):
        return e
    found = errors.wrapped(str(e))
    if found is None or found[0] == "MissingExtraError":
        return e
    name, message = found
    return getattr(errors, name)(message)


@dataclass
class PriorState:
    """A path as it was before write_tfrecords: whether it existed, and its entries (every
    file below it; directories too, where the filesystem lists them)."""

    path: Location
    existed: bool
    entries: set[str]

    @classmethod
    def take(cls, path: str | Location) -> PriorState | None:
        """None when the path is unusable, or a file (the write itself will say so)."""
        try:
            loc = locate(path)
            if not loc.exists():
                return cls(loc, False, set())
            return cls(loc, True, {rel for rel, _ in loc.entries(recursive=True)})
        except (OSError, ValueError):
            return None

    def put_back(self, write_id: str) -> None:
        """Remove what write `write_id` added, unless its manifest committed."""
        loc = self.path
        if not loc.exists() or _committed(loc, write_id):
            return
        new = [(rel, is_dir) for rel, is_dir in loc.entries(recursive=True)
                 if rel not in self.entries]
        # this write's files carry its id (part files, markers, staging)
        loc.delete_files([rel for rel, is_dir in new if not is_dir and write_id in rel])
        dirs = [loc.child(rel) for rel, is_dir in new if is_dir]
        if not self.existed:
            dirs.append(loc)
        # Deepest first; only when empty: another write to the path may be filling them
        for d in sorted(dirs, key=lambda d: d.base.count("/"), reverse=True):
            d.remove_if_empty()


def _committed(loc: Location, write_id: str) -> bool:
    """Whether the manifest at loc names write `write_id` (it committed)."""
    try:
        return any(w.write_id == write_id for w in mf.read_manifest(loc).writes)
    except TfsparkError:  # none, or damaged: no write committed there
        return False


@contextmanager
def undo_on_failure(path: str | Location, write_id: str,
                    before: PriorState | None = None) -> Iterator[None]:
    """Around write `write_id` to `path`: on failure, remove what it added there (module
    docstring) and raise a tfspark error that came back from a Spark task as its own class.
    before: the path as it is now, if taken already (PriorState.take)."""
    before = before if before is not None else PriorState.take(path)
    try:
        yield
    except BaseException as e:
        try:
            if before is not None:
                before.put_back(write_id)
        except Exception as cleanup:  # noqa: BLE001 - report the write's own error
            log.warning("tfspark: could not remove what the failed write left at %s: %s",
                        locate(path).uri, error_line(cleanup))
        err = unwrapped(e)
        if err is e:
            raise
        raise err from e
