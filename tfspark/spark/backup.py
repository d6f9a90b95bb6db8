"""write_tfrecords' parquet backup, as Spark writes it: staged by Spark's parquet writer (or by
tfspark's tasks through pyarrow, on a store Spark cannot reach), and a backup table in Spark's
catalog, staged as a table `<name>__tfspark_staging_<id>`. How a backup directory is staged,
published and checked is the backup's own life (tfspark.store.backup); this is Spark's part.

On a store Spark's parquet writer cannot reach (a `filesystem=` object, or a URI with pyarrow's
query options: Spark's Hadoop connectors know neither, and tfspark ships no jars) tfspark's own
tasks write the backup through pyarrow. Each task writes its rows to one parquet file named by
its partition, the write and its attempt (attempt ids start again at 0 in every Spark
application, so the write's id keeps an append's files apart from those already published);
the driver keeps the files of the attempts Spark counted (what `collect` returns), so a retried
or killed attempt's file is never published. The rows are read back by tasks too (one file per
task), so the TFRecords are written from exactly the staged rows, as with Spark's writer.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tfspark.errors import OptionError, TfsparkError, scrubbed
from tfspark.store import backup as stored
from tfspark.store import manifest as mf
from tfspark.store.backup import data_files as _data_files
from tfspark.store.backup import host_tag, staging_name, sweep_dead
from tfspark.store.fs import Location, locate
from tfspark.store.lock import alive
from tfspark.store.uris import uri_to_path

__all__ = ["StagedBackup", "publish", "roll_forward", "sweep_dead", "sweep_dead_tables",
           "table_location"]
log = logging.getLogger("tfspark")
_TABLE_STAGING = "__tfspark_staging_"


@dataclass(frozen=True)
class StagedBackup:
    """One write's backup: where it goes, where it is staged, and how it is published."""

    kind: str  # "path" | "table"
    target: str  # the backup directory (as the user gave it) or the table name
    staging: str  # the staging directory (under target) or table
    mode: str  # "overwrite" (also a new backup) | "append"
    created: bool = False  # the target directory did not exist: discard removes it again
    where: Location | None = field(default=None, compare=False)  # path kind: the directory
    # Path kind on a store Spark's writer cannot reach: staged by tfspark's tasks (pyarrow),
    # whose files the driver lists (in `staged`) instead of the staging directory's listing.
    by_tasks: bool = field(default=False, compare=False)
    staged: list[str] = field(default_factory=list, compare=False)
    write_id: str = field(default="", compare=False)  # the write's id: in its files' names

    @classmethod
    def plan(cls, spark: Any, table: str | None, path: Location, *, mode: str,
             write_id: str, by_tasks: bool = False,
             existed: bool | None = None) -> StagedBackup:
        """The staging of write `write_id` to the backup `table` or, when None, directory
        `path` (existed: whether it does, when known). A staging directory's name says which
        write made it, and which driver (host and pid), so a later write can tell the
        leftovers of dead drivers (sweep_dead) from a running write's."""
        token = write_id
        publish = "append" if mode == "append" else "overwrite"
        if table:
            return cls("table", table, f"{table}{_TABLE_STAGING}{token}_{os.getpid()}_"
                       f"{_table_host()}", publish)
        created = not (existed if existed is not None else path.exists())
        name = staging_name(token)
        return cls("path", path.uri, path.child_uri(name), publish, created, where=path,
                   by_tasks=by_tasks, write_id=write_id)

    def _target(self) -> Location:
        return self.where if self.where is not None else locate(self.target)

    def staging_location(self) -> Location:
        """The staging directory of a path backup, on the backup's filesystem."""
        return self._target().child(self.staging.rstrip("/").rsplit("/", 1)[-1])

    # ---------------------------------------------------------------- before the commit

    def check_append(self, spark: Any, schema: Any) -> None:
        """Appending to a backup table of other columns would fail only after the commit:
        refuse it now, naming the difference."""
        if self.kind != "table" or self.mode != "append" or \
                not spark.catalog.tableExists(self.target):
            return
        have = [(f.name, f.dataType.simpleString()) for f in spark.table(self.target).schema]
        want = [(f.name, f.dataType.simpleString()) for f in schema]
        if have != want:
            raise OptionError(f"cannot append to backup table {self.target!r}: it has columns "
                              f"{have} but the DataFrame has {want}; write to another "
                              f"backup_table or overwrite")

    def stage(self, spark: Any, df: Any) -> Any:
        """Write df's rows to the staging place; returns them read back (df's schema)."""
        if self.by_tasks:
            staging = self.staging_location()
            self.staged[:] = [name for name, _ in write_parquet(df, staging, self.write_id)]
            return read_parquet(spark, df.schema, staging, self.staged)
        writer = df.write.mode("error").format("parquet")
        if self.kind == "table":
            if "." in self.target:  # its database (schema), as a CREATE TABLE db.t needs
                db = ".".join(f"`{p}`" for p in self.target.split(".")[:-1])
                spark.sql(f"CREATE DATABASE IF NOT EXISTS {db}")
            writer.saveAsTable(self.staging)
            return spark.read.schema(df.schema).parquet(table_location(spark, self.staging))
        writer.save(self.staging)
        # By its files: Spark warns that a directory named _... is hidden ("All paths were
        # ignored") when it is read by name.
        files = [literal(f"{self.staging}/{rel}") for rel in _data_files(self.staging_location())]
        return spark.read.schema(df.schema).parquet(*(files or [literal(self.staging)]))

    def staged_files(self, spark: Any) -> list[str | Location]:
        """The staged parquet files (Locations, or paths and URIs `locate` opens)."""
        if self.kind == "path":
            staging = self.staging_location()
            names = self.staged if self.by_tasks else _data_files(staging)
            return [staging.child(r) for r in names]
        where = uri_to_path(table_location(spark, self.staging) if self.kind == "table"
                            else self.staging).rstrip("/")
        return [f"{where}/{r}" for r in _data_files(locate(where))]

    def discard(self, spark: Any) -> None:
        """Remove the staging (the write failed before its commit); the backup is as it was."""
        if self.kind == "table":
            spark.sql(f"DROP TABLE IF EXISTS {self.staging}")
            return
        self.staging_location().delete_all()
        if self.created:  # unless another write's staging is in it meanwhile
            self._target().remove_if_empty()

    def entry(self, spark: Any, write_rows: int,
              previous: mf.Manifest | None) -> mf.BackupEntry:
        """The manifest's "backup" entry at the commit: pending until published."""
        if self.kind == "path":
            files = list(self.staged) if self.by_tasks else _data_files(self.staging_location())
            return stored.path_entry(self._target(), self.staging_location(), files, mode=self.mode,
                                     write_rows=write_rows, rows_before=lambda: _count(
                                         spark, self) if _exists(spark, self) else 0,
                                     previous=previous)
        rows = write_rows
        complete = True  # the backup holds every row of the data set
        if self.mode == "append":
            old = previous.backup if previous else None
            if old and old.target == self.target and old.rows is not None:
                rows, complete = old.rows + write_rows, old.complete
            else:
                before = _count(spark, self) if _exists(spark, self) else 0
                rows, complete = before + write_rows, previous is None
        pending = mf.PendingBackup(self.staging, self.mode, rows_before=rows - write_rows
                                   if self.mode == "append" else None)
        return mf.BackupEntry(self.kind, self.target, rows, complete, pending=pending)


def _table_host() -> str:
    """This host's name as a part of a table name (no dots; catalogs lower-case names)."""
    return host_tag().lower().replace(".", "_")


def sweep_dead_tables(spark: Any, table: str) -> None:
    """Drop the staging tables of backup `table` whose driver ran on this host and is gone (a
    write killed before its commit; a committed one's is published by roll_forward first);
    those of other hosts, or of live drivers, stay."""
    db, _, name = table.rpartition(".")
    try:
        names = [t.name for t in (spark.catalog.listTables(db) if db
                                  else spark.catalog.listTables())]
    except Exception:  # noqa: BLE001 - no such database yet: nothing staged in it
        return
    pattern = re.escape(f"{name}{_TABLE_STAGING}".lower()) + r"[0-9a-f]+_(\d+)_(.+)"
    for found in names:
        m = re.fullmatch(pattern, found.lower())
        if m and m.group(2) == _table_host() and not alive(int(m.group(1))):
            staging = f"{db}.{found}" if db else found
            log.info("tfspark: dropping %s, the staged backup table of a write whose driver "
                     "died", staging)
            spark.sql(f"DROP TABLE IF EXISTS {staging}")


def literal(path: str) -> str:
    """A path for Spark's readers that names itself only: Spark expands a path it reads as a
    glob, where "?", "*", "[...]" and "{...}" would match other directories' files too
    (/data/a?b reads /data/aXb), so those are escaped."""
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", path)


def table_location(spark: Any, table: str) -> str:
    """The storage location (a URI) of a catalog table, from DESCRIBE TABLE EXTENDED."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect():
        if str(row[0]).strip() == "Location":
            return str(row[1]).strip()
    raise OptionError(f"backup table {table!r} has no storage location that tfspark can use; "
                      f"use backup_path instead")


def _exists(spark: Any, b: StagedBackup) -> bool:
    if b.kind == "table":
        return bool(spark.catalog.tableExists(b.target))
    return bool(_data_files(b._target()))


def _count(spark: Any, b: StagedBackup) -> int:
    if b.kind == "table":
        return int(spark.table(b.target).count())
    if b.by_tasks:  # from the footers: Spark cannot read this store
        from tfspark.spark.sizing import footers

        where = b._target()
        found = footers([where.child(r) for r in _data_files(where)])
        if found is None:
            raise OptionError(f"cannot read the parquet backup at {b.target}; overwrite it")
        return found.rows
    files = [literal(f"{b.target.rstrip('/')}/{rel}") for rel in _data_files(b._target())]
    return int(spark.read.parquet(*files).count()) if files else 0


# ---------------------------------------------------------------- after the commit

def publish(spark: Any, output: Location, write_id: str) -> None:
    """Move the committed write's staged backup into place (tfspark.store.backup.publish; a
    backup table through Spark)."""
    stored.publish(output, write_id, _table_publisher(spark))


def roll_forward(spark: Any, loc: Location, manifest: mf.Manifest | None) -> bool:
    """Finish a publication a kill interrupted (tfspark.store.backup.roll_forward)."""
    return stored.roll_forward(loc, manifest, _table_publisher(spark))


def _table_publisher(spark: Any) -> stored.PublishTable:
    return lambda target, pending, rows: _publish_table(spark, target, pending, rows)


def _publish_table(spark: Any, target: str, pending: mf.PendingBackup, rows: int) -> str:
    staging = pending.staging
    if spark.catalog.tableExists(staging):
        exists = spark.catalog.tableExists(target)
        if pending.mode == "append" and exists:
            have = spark.table(target).count()
            if have == pending.rows_before:
                spark.sql(f"INSERT INTO {target} SELECT * FROM {staging}")
            elif have != rows:
                raise TfsparkError(f"backup table {target!r} holds {have} rows, neither the "
                                   f"{pending.rows_before} before this write nor the {rows} "
                                   f"after it: it was changed while tfspark appended to it; "
                                   f"rewrite the data set with mode='overwrite'")
            spark.sql(f"DROP TABLE {staging}")
        else:
            spark.sql(f"DROP TABLE IF EXISTS {target}")
            spark.sql(f"ALTER TABLE {staging} RENAME TO {target}")
    return table_location(spark, target)


# ---------------------------------------------------------------- staged by tfspark's tasks

_WRITTEN = "file string, rows long"


def write_parquet(df: Any, staging: Location, write_id: str) -> list[tuple[str, int]]:
    """Write df's rows as parquet files under `staging`, named by the write `write_id` and
    each task attempt; returns (file, rows) of each."""

    @scrubbed
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        from tfspark.store.part_files import parquet_writer  # (the driver loads no kernels)

        ctx = TaskContext.get()
        task = f"{ctx.partitionId():05d}-{write_id}-{ctx.taskAttemptId()}" if ctx else \
            f"00000-{write_id}-0"
        name = f"part-{task}.parquet"
        rows, out, writer = 0, None, None
        try:
            for batch in batches:
                if writer is None:
                    out = staging.open_output(name)
                    writer = parquet_writer(out, batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
            if out is not None:
                out.close()
        if writer is not None:
            yield pa.RecordBatch.from_pydict({"file": [name], "rows": [rows]},
                                             schema=pa.schema([("file", pa.string()),
                                                               ("rows", pa.int64())]))

    return [(r["file"], int(r["rows"])) for r in df.mapInArrow(write, _WRITTEN).collect()]


def read_parquet(spark: Any, schema: Any, staging: Location, files: list[str]) -> Any:
    """A DataFrame of `schema` holding the rows of the parquet `files` under `staging`."""
    if not files:
        return spark.createDataFrame([], schema)

    @scrubbed
    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        for batch in batches:
            for name in batch.column("file").to_pylist():
                with staging.open_input(name) as f:
                    yield from pq.ParquetFile(f).iter_batches(batch_size=10_000)

    names = spark.createDataFrame([(f,) for f in files], "file string")
    return names.repartition(len(files)).mapInArrow(read, schema)
