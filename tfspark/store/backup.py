"""The parquet copy of a data set (its "backup"), staged so that it and the TFRecords change
together: the part of its life that needs no Spark (a directory of parquet files on any
filesystem). A backup table in Spark's catalog is Spark's part (tfspark.spark.backup).

A write puts its rows in a hidden staging directory inside the backup's directory first,
`_tfspark_staging-<write id>-<pid>-<host>/` (Spark, pyarrow and DuckDB skip names starting with
"_"); the TFRecords are written from the staged rows, and only after their manifest commits is
the staging published: it replaces the backup (overwrite) or joins it (append). A failure or a
kill before the commit leaves the old backup untouched, so the data set is entirely old; after
the commit it is entirely new.

The manifest's "backup" entry says where the backup is, its rows and the write that made it;
while the staging is being published it also holds "pending" (the staging and its files), so a
write killed between its commit and the end of publishing is finished by the next write to the
same path (`roll_forward`). In the backup's directory, MARKER names the write the backup
belongs to; `tfspark verify` compares both with the manifest.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
from collections.abc import Callable
from dataclasses import replace

from tfspark.errors import OptionError
from tfspark.store import manifest as mf
from tfspark.store.fs import Location, locate
from tfspark.store.lock import alive, commit_lock
from tfspark.store.placement import enclosing_data_set
from tfspark.store.uris import uri_to_path

log = logging.getLogger("tfspark")
MARKER = mf.BACKUP_MARKER
STAGING_PREFIX = mf.BACKUP_STAGING
# A backup table's publication (Spark's part): (target table, pending, rows) -> its location
PublishTable = Callable[[str, mf.PendingBackup, int], str]


def staging_name(write_id: str) -> str:
    """The staging directory of write `write_id` by this process: the name says which write
    made it, and which driver (host and pid), so a later write can tell the leftovers of dead
    drivers (sweep_dead) from a running write's."""
    return f"{STAGING_PREFIX}{write_id}-{os.getpid()}-{host_tag()}"


def host_tag() -> str:
    """This host's name as staging names carry it (letters, digits, dots; others as _)."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())


def sweep_dead(path: str | Location) -> None:
    """Remove the staging directories under a backup directory whose driver ran on this host
    and is gone (a killed write); those of other hosts, or of live drivers, stay."""
    loc = locate(path)
    for name in loc.subdirectories():  # (none when it is not there)
        m = re.fullmatch(re.escape(STAGING_PREFIX) + r"[0-9a-f]+-(\d+)-(.+)", name)
        if m and m.group(2) == host_tag() and not alive(int(m.group(1))):
            log.info("tfspark: removing %s, the staged backup of a write whose driver died",
                     loc.child_uri(name))
            loc.delete_dir(name)


def check_backup_path(given: str | None, loc: Location, backup_loc: Location) -> None:
    """A backup directory of its own: not the output path, not around it, not inside another
    data set (the output's own directory is fine: the default is <path>/_backup)."""
    if not given:
        return
    backup, out = backup_loc.uri, loc.uri
    if backup_loc.base == loc.base:
        raise OptionError(f"backup_path {backup!r} is the output path itself; the parquet copy "
                          f"needs a directory of its own: leave backup_path out (it goes to "
                          f"{out}/_backup) or give another directory")
    if loc.base.startswith(backup_loc.base.rstrip("/") + "/"):
        raise OptionError(f"backup_path {backup!r} holds the output path {out!r}; replacing "
                          f"the backup would delete the data set: give a directory outside "
                          f"it, or leave backup_path out")
    outer = enclosing_data_set(backup_loc)
    if outer is not None and outer[0].rstrip("/") != loc.base.rstrip("/") and \
            outer[0].rstrip("/") != out.rstrip("/"):
        raise OptionError(f"backup_path {backup!r} is inside the tfspark data set at "
                          f"{outer[0]!r}; give a directory outside it")


def data_files(loc: Location) -> list[str]:
    """The data files under loc (relative), skipping hidden names and staging directories."""
    return [r for r in loc.list_files()
            if not any(p.startswith(("_", ".")) for p in r.split("/"))]


def path_entry(target: Location, staging: Location, files: list[str], *, mode: str,
               write_rows: int, rows_before: Callable[[], int],
               previous: mf.Manifest | None) -> mf.BackupEntry:
    """The manifest's "backup" entry of a write staged in a backup directory, at the commit:
    pending until published. mode: "overwrite" (also a new backup) or "append"; files: the
    staged files (relative to `staging`); rows_before: the rows the backup holds now (asked
    only for an append whose previous manifest does not say)."""
    rows, complete = write_rows, True  # complete: the backup holds every row of the data set
    if mode == "append":
        old = previous.backup if previous else None
        if old and old.target == target.uri and old.rows is not None:
            rows, complete = old.rows + write_rows, old.complete
        else:
            rows, complete = rows_before() + write_rows, previous is None
    return mf.BackupEntry("path", target.uri, rows, complete,
                          pending=mf.PendingBackup(staging.uri, mode, tuple(files)))


def publish(output: Location, write_id: str,
            publish_table: PublishTable | None = None) -> None:
    """Move the committed write's staged backup into place, then drop "pending" from the
    manifest. Idempotent: a publish stopped half way is finished by running it again, and
    two publishers of one write (the write itself, and a next write's roll_forward) may run
    at once. The manifest is read afresh: a write committed since this one keeps its own
    backup. What could touch a later write's backup (an overwrite's removal of the old
    files, the marker naming the backup's write) is done under the commit lock, once the
    manifest shows this write still the last one and its backup still pending; the staged
    files themselves are moved before (only this write's, whoever moves them).
    publish_table: how a backup table is published (Spark's), for a "table" entry."""
    manifest = mf.read_manifest(output)
    entry = manifest.backup
    if entry is None or entry.pending is None or manifest.last_write != write_id:
        return
    pending = entry.pending
    staging = output.resolve(pending.staging) if entry.kind == "path" else None
    if staging is not None:  # on the output's filesystem when it names a place there
        place = output.resolve(entry.target)
        _move_staged(place, staging, pending)
        location = place.uri
        target = output.resolve(location)
    else:
        if publish_table is None:
            raise mf.ManifestError(f"{output.uri}: the last write's backup is a table in a "
                                   f"Spark catalog, whose publication needs Spark: write to "
                                   f"this data set with write_tfrecords")
        location = publish_table(entry.target, pending, entry.rows or 0)
        target = locate(uri_to_path(location))
    with commit_lock(output, write_id) as seen:  # as a commit: never over another write's
        manifest = mf.read_manifest(output)
        if manifest.last_write != write_id or manifest.backup is None or \
                manifest.backup.pending is None:
            return  # published meanwhile, or a later write committed
        if staging is not None and pending.mode == "overwrite":
            _drop_old(target, pending)
        target.write_bytes_atomic(MARKER, json.dumps(
            {"write_id": write_id, "rows": entry.rows, "data_set": output.uri}).encode())
        if entry.kind == "path" and pending.mode == "append":  # (an overwrite's drop
            with contextlib.suppress(OSError):  # removed it): where an earlier version kept it
                target.delete(mf.BACKUP_MARKER_BEFORE)
        done = manifest.backup
        # A backup inside the data set is also found by its place there, so a copy of the
        # data set (gsutil cp, aws s3 sync) finds its own copy of the backup.
        inside = target.base[len(output.base) + 1:] if entry.kind == "path" and \
            type(target.fs) is type(output.fs) and \
            target.base.startswith(output.base + "/") else None
        mf.write_manifest(output, replace(manifest, backup=replace(
            done, pending=None, location=location, write_id=write_id,
            inside=inside or done.inside)), seen)
    if staging is not None:
        staging.delete_all()


def _move_staged(loc: Location, staging: Location, pending: mf.PendingBackup) -> None:
    """The staged files into the backup directory (those moved already are skipped)."""

    def move(rel: str) -> None:
        try:
            staging.move(rel, loc, rel)
        except OSError:  # moved already? (by a publish stopped half way, or meanwhile by a
            # next write's roll_forward; a store says so only in words, not FileNotFoundError)
            if loc.kind(rel) != "file" or staging.kind(rel) == "file":
                raise

    loc.at_once(move, list(pending.files or ()))


def _drop_old(loc: Location, pending: mf.PendingBackup) -> None:
    """An overwrite's publication: the old backup's entries go (other writes' staging and
    the marker's directory stay)."""
    keep = set(pending.files or ()) | {MARKER.split("/")[0]}
    old = [(name, is_dir) for name, is_dir in loc.entries()
           if name not in keep and not name.startswith(STAGING_PREFIX)]

    def drop(entry: tuple[str, bool]) -> None:
        (loc.delete_dir if entry[1] else loc.delete)(entry[0])

    loc.at_once(drop, old)


def roll_forward(loc: Location, manifest: mf.Manifest | None,
                 publish_table: PublishTable | None = None) -> bool:
    """Finish the publication of a committed write's backup that a kill interrupted, given
    the manifest at loc (None: none, or damaged: only an overwrite repairs that, afresh).
    Whether it did (the manifest changed)."""
    if manifest is None or manifest.backup is None or manifest.backup.pending is None or \
            not manifest.last_write:
        return False
    log.warning("tfspark: finishing the backup of the write that committed %s but was "
                "stopped before its backup was moved into place", loc.uri)
    publish(loc, manifest.last_write, publish_table)
    return True
