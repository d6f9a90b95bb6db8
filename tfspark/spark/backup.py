"""write_tfrecords' parquet backup, staged so that it and the TFRecords change together.

The new rows go to a staging place first: for a backup directory, a hidden
`_tfspark_staging-<id>/` inside it (Spark, pyarrow and DuckDB skip names starting with "_");
for a backup table, a table `<name>__tfspark_staging_<id>`. The TFRecords are written from the
staged rows, and only after their manifest commits is the staging published: it replaces the
backup (overwrite) or joins it (append). A failure or a kill before the commit leaves the old
backup untouched, so the data set is entirely old; after the commit it is entirely new.

The manifest's "backup" entry says where the backup is, its rows and the write that made it;
while the staging is being published it also holds "pending" (the staging and its files), so a
write killed between its commit and the end of publishing is finished by the next
write_tfrecords to the same path (`roll_forward`). In the backup's directory, MARKER names the
write the backup belongs to; `tfspark verify` compares both with the manifest.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from dataclasses import dataclass, field, replace
from typing import Any

from tfspark.errors import OptionError, TfsparkError
from tfspark.store import manifest as mf
from tfspark.store import many
from tfspark.store.fs import Location, locate
from tfspark.store.local_paths import uri_to_path
from tfspark.store.lock import commit_lock

log = logging.getLogger("tfspark")
MARKER = mf.BACKUP_MARKER
STAGING_PREFIX = mf.BACKUP_STAGING
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
    def plan(cls, spark: Any, table: str | None, path: Location, mode: str,
             write_id: str, by_tasks: bool = False,
             existed: bool | None = None) -> StagedBackup:
        """The staging of write `write_id` to the backup `table` or, when None, directory
        `path` (existed: whether it does, when known). A staging directory's name says which
        write made it, and which driver (host and pid), so a later write can tell the
        leftovers of dead drivers (sweep_dead) from a running write's."""
        token = write_id
        publish = "append" if mode == "append" else "overwrite"
        if table:
            return cls("table", table, f"{table}{_TABLE_STAGING}{token}", publish)
        created = not (existed if existed is not None else path.exists())
        name = f"{STAGING_PREFIX}{token}-{os.getpid()}-{_host()}"
        return cls("path", path.uri, path.child_uri(name), publish, created, where=path,
                   by_tasks=by_tasks, write_id=write_id)

    def _target(self) -> Location:
        return self.where if self.where is not None else locate(self.target)

    def _staging(self) -> Location:
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
            from tfspark.spark.backup_tasks import read_parquet, write_parquet

            staging = self._staging()
            self.staged[:] = [name for name, _ in write_parquet(df, staging, self.write_id)]
            return read_parquet(spark, df.schema, staging, self.staged)
        writer = df.write.mode("error").format("parquet")
        if self.kind == "table":
            writer.saveAsTable(self.staging)
            return spark.read.schema(df.schema).parquet(table_location(spark, self.staging))
        writer.save(self.staging)
        # By its files: Spark warns that a directory named _... is hidden ("All paths were
        # ignored") when it is read by name.
        files = [literal(f"{self.staging}/{rel}") for rel in _data_files(self._staging())]
        return spark.read.schema(df.schema).parquet(*(files or [literal(self.staging)]))

    def staged_files(self, spark: Any) -> list[str | Location]:
        """The staged parquet files (Locations, or paths and URIs `locate` opens)."""
        if self.kind == "path":
            staging = self._staging()
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
        self._staging().delete_all()
        if self.created:  # unless another write's staging is in it meanwhile
            self._target().remove_if_empty()

    def entry(self, spark: Any, write_rows: int, previous: mf.Manifest | None) -> dict:
        """The manifest's "backup" entry at the commit: pending until published."""
        rows = write_rows
        complete = True  # the backup holds every row of the data set
        if self.mode == "append":
            old = previous.backup if previous else None
            if old and old.get("target") == self.target and old.get("rows") is not None:
                rows, complete = old["rows"] + write_rows, bool(old.get("complete"))
            else:
                before = _count(spark, self) if _exists(spark, self) else 0
                rows, complete = before + write_rows, previous is None
        pending: dict[str, Any] = {"staging": self.staging, "mode": self.mode}
        if self.kind == "path":
            pending["files"] = list(self.staged) if self.by_tasks else \
                _data_files(self._staging())
        elif self.mode == "append":
            pending["rows_before"] = rows - write_rows
        return {"kind": self.kind, "target": self.target, "rows": rows, "complete": complete,
                "pending": pending}


def literal(path: str) -> str:
    """A path for Spark's readers that names itself only: Spark expands a path it reads as a
    glob, where "?", "*", "[...]" and "{...}" would match other directories' files too
    (/data/a?b reads /data/aXb), so those are escaped."""
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", path)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())


def sweep_dead(path: str | Location) -> None:
    """Remove the staging directories under a backup directory whose driver ran on this host
    and is gone (a killed write_tfrecords); those of other hosts, or of live drivers, stay."""
    loc = locate(path)
    for name in loc.subdirectories():  # (none when it is not there)
        m = re.fullmatch(re.escape(STAGING_PREFIX) + r"[0-9a-f]+-(\d+)-(.+)", name)
        if m and m.group(2) == _host() and not _alive(int(m.group(1))):
            log.info("tfspark: removing %s, the staged backup of a write whose driver died",
                     loc.child_uri(name))
            loc.delete_dir(name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def table_location(spark: Any, table: str) -> str:
    """The storage location (a URI) of a catalog table, from DESCRIBE TABLE EXTENDED."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect():
        if str(row[0]).strip() == "Location":
            return str(row[1]).strip()
    raise OptionError(f"backup table {table!r} has no storage location that tfspark can use; "
                      f"use backup_path instead")


def _data_files(loc: Location) -> list[str]:
    """The data files under loc (relative), skipping hidden names and staging directories."""
    return [r for r in loc.list_files()
            if not any(p.startswith(("_", ".")) for p in r.split("/"))]


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
    """Move the committed write's staged backup into place, then drop "pending" from the
    manifest. Idempotent: a publish stopped half way is finished by running it again. The
    manifest is read afresh: a write committed since this one keeps its own backup."""
    manifest = mf.read_manifest(output)
    entry = manifest.backup or {}
    pending = entry.get("pending")
    if not pending or manifest.last_write != write_id:
        return
    if entry["kind"] == "path":  # on the output's filesystem when it names a place there
        location = _publish_path(output.resolve(entry["target"]),
                                 output.resolve(pending["staging"]), pending)
        target = output.resolve(location)
    else:
        location = _publish_table(spark, entry["target"], pending, entry["rows"])
        target = locate(uri_to_path(location))
    marker = json.dumps({"write_id": write_id, "rows": entry["rows"],
                         "data_set": output.uri}).encode()
    target.write_bytes_atomic(MARKER, marker)
    with commit_lock(output, write_id) as seen:  # as a commit: never over another write's
        manifest = mf.read_manifest(output)
        if manifest.last_write != write_id:
            return
        done = {k: v for k, v in (manifest.backup or {}).items() if k != "pending"}
        # A backup inside the data set is also found by its place there, so a copy of the
        # data set (gsutil cp, aws s3 sync) finds its own copy of the backup.
        inside = target.base[len(output.base) + 1:] if entry["kind"] == "path" and \
            type(target.fs) is type(output.fs) and \
            target.base.startswith(output.base + "/") else None
        mf.write_manifest(output, replace(manifest, backup=dict(
            done, location=location, write_id=write_id, **({"inside": inside} if inside
                                                            else {}))), seen)


def _publish_path(loc: Location, staging: Location, pending: dict[str, Any]) -> str:
    files = list(pending.get("files", []))
    if pending["mode"] == "overwrite":  # the old backup's entries go; others' staging stays
        keep = set(files) | {MARKER}
        old = [(name, is_dir) for name, is_dir in loc.entries()
               if name not in keep and not name.startswith(STAGING_PREFIX)]

        def drop(entry: tuple[str, bool]) -> None:
            (loc.delete_dir if entry[1] else loc.delete)(entry[0])

        many.each(loc, drop, old)

    def move(rel: str) -> None:
        try:
            staging.move(rel, loc, rel)
        except OSError:  # moved already? (by a publish stopped half way, or meanwhile by a
            # next write's roll_forward; a store says so only in words, not FileNotFoundError)
            if loc.kind(rel) != "file" or staging.kind(rel) == "file":
                raise

    many.each(loc, move, files)
    staging.delete_all()
    return loc.uri


def _publish_table(spark: Any, target: str, pending: dict[str, Any], rows: int) -> str:
    staging = pending["staging"]
    if spark.catalog.tableExists(staging):
        exists = spark.catalog.tableExists(target)
        if pending["mode"] == "append" and exists:
            have = spark.table(target).count()
            if have == pending["rows_before"]:
                spark.sql(f"INSERT INTO {target} SELECT * FROM {staging}")
            elif have != rows:
                raise TfsparkError(f"backup table {target!r} holds {have} rows, neither the "
                                   f"{pending['rows_before']} before this write nor the {rows} "
                                   f"after it: it was changed while tfspark appended to it; "
                                   f"rewrite the data set with mode='overwrite'")
            spark.sql(f"DROP TABLE {staging}")
        else:
            spark.sql(f"DROP TABLE IF EXISTS {target}")
            spark.sql(f"ALTER TABLE {staging} RENAME TO {target}")
    return table_location(spark, target)


def roll_forward(spark: Any, loc: Location, manifest: mf.Manifest | None) -> bool:
    """Finish the publication of a committed write's backup that a kill interrupted, given
    the manifest at loc (None: none, or damaged: only an overwrite repairs that, afresh).
    Whether it did (the manifest changed)."""
    if manifest is None or not (manifest.backup or {}).get("pending") or \
            not manifest.last_write:
        return False
    log.warning("tfspark: finishing the backup of the write that committed %s but was "
                "stopped before its backup was moved into place", loc.uri)
    publish(spark, loc, manifest.last_write)
    return True
