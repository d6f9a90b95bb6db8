"""The commit of a write, on the driver (its lock: store.lock): the write ids in part-file
names, and the conflict messages.

A part file is named part-<partition>-<task attempt>-<write id>-<seq>.tfrecord[.gz]; the write
id says which write (and so which manifest entry, or which failed attempt) it belongs to.

A failed job is aborted while other tasks of it may still be writing (Spark cancels them
without waiting), so tasks register while they run and stop when they see the abort marker;
abort waits for them before it removes the job's files (TaskGuard, wait_for_tasks).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass, field

from tfspark.errors import ManifestError, OptionError, store_hint
from tfspark.store import manifest as mf
from tfspark.store.fs import Location
from tfspark.store.uris import failed_request

log = logging.getLogger("tfspark")
PART_FILE = re.compile(r"(^|/)part-[^/]*\.tfrecord(\.gz)?$")
# part-<partition>-<task attempt>-<write id>-<seq>: the write id of one of our part files
_WRITE_ID = re.compile(r"(?:^|/)part-\d+-\d+-([0-9a-f]{16})-\d+\.tfrecord(?:\.gz)?$")
_RUNNING = "_tfspark.running-"  # + <write id>-<task>: a task of that write is running
_ABORTED = "_tfspark.aborted-"  # + <write id>: that write's job failed; its tasks must stop
_CHECK_EVERY_S = 1.0  # how often a running task looks for the abort marker
# How long abort waits for tasks still running; one killed outright never deregisters.
_ABORT_PATIENCE_S = 30.0


class WriteAborted(Exception):
    """Raised in a task that finds its write's job aborted: it has removed its own files."""


@dataclass(frozen=True)
class StartedFrom:
    """The committed version of a path that a write started from: the id of its last write,
    None when there was no data set. The write commits only if it is still the last."""

    write_id: str | None


def existing_manifest(loc: Location, mode: str) -> mf.Manifest | None:
    """The manifest at loc, if any: one read, no look for it first. A damaged one fails every
    mode but overwrite, which is how the data set is repaired."""
    try:
        return mf.manifest_of(loc, loc.read_bytes(mf.NAME))
    except FileNotFoundError:
        return None
    except OSError as e:  # a write's first request: unreachable, or not a file
        if store_hint(e) is not None:
            raise _cannot_look(loc, e) from None
        try:
            there = loc.present(mf.NAME)
        except OSError as again:
            raise _cannot_look(loc, again) from None
        if not there:
            return None
        problem = mf.unreadable(loc, e)  # there, but no file to read (a directory)
    except ManifestError as e:
        problem = e
    if mode != "overwrite":
        raise problem
    log.warning("tfspark: overwriting a data set whose manifest is damaged: %s", problem)
    return None


def _cannot_look(loc: Location, error: OSError) -> OptionError:
    return OptionError(f"cannot look for a data set at {loc.uri!r}: "
                       f"{failed_request(error, 'check the path and the credentials')}")


def last_write(old: mf.Manifest | None) -> str | None:
    """The id of the last write a manifest names; None for no manifest (or no write)."""
    return old.last_write if old is not None else None


def write_id_of(rel: str) -> str | None:
    """The write id in a tfspark part file's name, None for any other file."""
    m = _WRITE_ID.search(rel)
    return m.group(1) if m else None


def new_write_id() -> str:
    """A fresh write id: 16 hex digits."""
    return uuid.uuid4().hex[:16]


def conflict_message(uri: str, mode: str) -> str:
    """What to tell the writer that lost a race with another commit to `uri`."""
    if mode == "append":
        return (f"another write committed to {uri!r} while this append ran; nothing of this "
                f"write was kept: run it again")
    if mode == "overwrite":
        return (f"another write committed to {uri!r} while this overwrite ran (its data is "
                f"there now); nothing of this write was kept: run it again to replace it")
    return (f"another write created a data set at {uri!r} while this {mode} write ran; nothing "
            f"of this write was kept: use mode 'overwrite' or 'append', or another path")


@dataclass
class TaskGuard:
    """A write task's registration: created before its first file, removed after its last
    file is closed (or discarded). Checking the abort marker after registering and again
    before deregistering means a task either finishes before abort lists the files (which
    abort then removes) or sees the marker and removes its own."""

    loc: Location
    write_id: str
    task: str
    _checked: float = field(default=0.0)

    @property
    def name(self) -> str:
        """The registration file's name, under the data set's root."""
        return f"{_RUNNING}{self.write_id}-{self.task}"

    def start(self) -> None:
        """Register, then look for the abort marker (WriteAborted when the job failed)."""
        if self.loc.is_local:  # (one open; the name is this task's alone)
            self.loc.create_exclusive(self.name, b"")
        else:
            self.loc.write_bytes_atomic(self.name, b"")
        self.check(now=True)

    def check(self, now: bool = False) -> None:
        """Raise WriteAborted if the job was aborted (looks at most every _CHECK_EVERY_S)."""
        t = time.monotonic()
        if not now and t - self._checked < _CHECK_EVERY_S:
            return
        self._checked = t
        if self.loc.present(_ABORTED + self.write_id):
            raise WriteAborted(f"write {self.write_id} was aborted: another task failed")

    def finish(self) -> None:
        """All files closed: a last look for the abort marker, then deregister."""
        self.check(now=True)
        self.release()

    def release(self) -> None:
        """Deregister (after this task's files were removed, on failure)."""
        self.loc.delete(self.name)


def wait_for_tasks(loc: Location, write_id: str) -> None:
    """On abort: tell the write's tasks to stop and wait until none is running, so none can
    write a file after abort has removed them."""
    loc.write_bytes_atomic(_ABORTED + write_id, b"")
    mine = _RUNNING + write_id + "-"
    deadline = time.monotonic() + _ABORT_PATIENCE_S
    while True:
        running = [r for r in loc.list_files(recursive=False) if r.startswith(mine)]
        if not running:
            return
        if time.monotonic() > deadline:
            log.warning("tfspark: %d task(s) of aborted write %s did not stop within %.0f s "
                        "(killed?); removing what they wrote", len(running), write_id,
                        _ABORT_PATIENCE_S)
            return
        time.sleep(0.1)


_MARKER = re.compile(r"^_tfspark\.(?:running|aborted)-([0-9a-f]{16})(?:-|$)")


def marker_write_id(rel: str) -> str | None:
    """The write id in a task registration or abort marker's name, None for any other file."""
    m = _MARKER.match(rel)
    return m.group(1) if m else None


def task_markers(loc: Location, write_id: str) -> list[str]:
    """This write's registration and abort marker files (removed when it ends either way)."""
    return [r for r in loc.list_files(recursive=False)
            if r.startswith(_RUNNING + write_id + "-") or r == _ABORTED + write_id]
