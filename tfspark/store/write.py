"""A write of a data set, whoever runs it: each task's part files (and statistics), then the
commit on the driver, an abort that removes what a failed write left, and the sweep after a
commit. Spark's data source and write_tfrecords run it in Spark's tasks (tfspark.spark's
adapter); write_dataset runs its tasks in one process. No pyspark here.

Files are named by the write id and the task, so a retried or failed attempt never clobbers
another's; the manifest is the commit, written under the commit lock against the version of the
path the write began from (WriteConflictError when another write committed since).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import pyarrow as pa

from tfspark.errors import WriteConflictError
from tfspark.spec import FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store import many
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
from tfspark.store.fs import Location
from tfspark.store.lock import commit_lock
from tfspark.store.options import WriteOptions

log = logging.getLogger("tfspark")


@dataclass
class TaskCommit:
    """What one write task sends the driver: the manifest entries of the files it wrote."""

    write_id: str
    task: str
    files: list[dict[str, Any]] = field(default_factory=list)
    partial_stats: dict[str, Any] | None = None  # featureStats: this task's (stats_partial)
    nulls: dict[str, int] = field(default_factory=dict)  # of the writer's count_nulls features


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
    backup_entry: dict[str, Any] | None = None  # write_tfrecords: the manifest's "backup"
    # write_tfrecords: features whose null rows the tasks count (their backup's footers did not)
    count_nulls: list[str] = field(default_factory=list)

    def write_task(self, iterator: Iterator[pa.RecordBatch], task: str) -> TaskCommit:
        """In a task: encode and frame its Arrow batches into its own part files. `task` names
        the task (partition and attempt: "<partition>-<attempt>"), unique within the write.

        Files are named by task and write id, so a retried or failed attempt never clobbers
        another's; on failure this attempt's files are removed before the error propagates.
        """
        from tfspark.arrow.encode import BatchEncoder
        from tfspark.arrow.encode_block import BlockEncoder
        from tfspark.arrow.values import column_of
        from tfspark.store.part_files import TaskFiles, batches_by_group

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
            from tfspark.store.stats_partial import PartialStats

            partial = PartialStats(self.spec, self.opts.stats_top_k)
        counting = [f for f in self.spec.features if f.name in self.count_nulls] \
            if self.spec is not None else []
        nulls = dict.fromkeys((f.name for f in counting), 0)
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
            guard.finish()
            return self.commit_class(self.write_id, task, done,
                                     partial.result() if partial is not None else None, nulls)
        except BaseException:
            files.discard()  # before deregistering: abort waits on the registration
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
            manifest = replace(manifest, backup=dict(self.backup_entry))
        elif manifest.backup:  # appended without a backup: it misses rows now
            manifest = replace(manifest, backup=dict(manifest.backup, complete=False))
        return manifest

    def _task_stats(self, messages: Sequence[Any],
                    appended: bool) -> dict[str, Any]:
        """featureStats: the tasks' statistics merged (of this write's rows only)."""
        from tfspark.store.stats_merge import merge

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
        many.delete_files(loc, sorted(ours))
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
        for rel in loc.list_files():  # one listing; the deletes many at once (many.py)
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
        many.delete_files(loc, gone)
