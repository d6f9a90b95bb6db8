"""The commit of a write, on the driver: the lock that keeps two commits to one path from
interleaving, the write ids in part-file names, and the conflict messages.

A part file is named part-<partition>-<task attempt>-<write id>-<seq>.tfrecord[.gz]; the write
id says which write (and so which manifest entry, or which failed attempt) it belongs to.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from tfspark.fs import Location

log = logging.getLogger("tfspark")
PART_FILE = re.compile(r"(^|/)part-[^/]*\.tfrecord(\.gz)?$")
# part-<partition>-<task attempt>-<write id>-<seq>: the write id of one of our part files
_WRITE_ID = re.compile(r"(?:^|/)part-\d+-\d+-([0-9a-f]{16})-\d+\.tfrecord(?:\.gz)?$")
LOCK = "_tfspark.lock"  # held by a commit while it checks and writes the manifest
_LOCK_PATIENCE_S = 60.0  # a lock left unchanged this long is a dead committer's: broken


def write_id_of(rel: str) -> str | None:
    """The write id in a tfspark part file's name, None for any other file."""
    m = _WRITE_ID.search(rel)
    return m.group(1) if m else None


def new_write_id() -> str:
    """A fresh write id: 16 hex digits."""
    return uuid.uuid4().hex[:16]


@contextmanager
def commit_lock(loc: Location, write_id: str) -> Iterator[None]:
    """Hold LOCK (created exclusively: see Location.create_exclusive for what each filesystem
    guarantees) while a commit checks and writes the manifest, so two commits to one path never
    interleave. A lock that stays the same for _LOCK_PATIENCE_S is taken as left by a driver
    that died while committing, and broken."""
    token = json.dumps({"write_id": write_id, "host": socket.gethostname(), "pid": os.getpid(),
                        "nonce": uuid.uuid4().hex}).encode()
    seen, since = b"", time.monotonic()
    while not loc.create_exclusive(LOCK, token):
        try:
            held = loc.read_bytes(LOCK)
        except FileNotFoundError:
            continue  # released meanwhile
        if held != seen:
            seen, since = held, time.monotonic()
        elif time.monotonic() - since > _LOCK_PATIENCE_S:
            log.warning("tfspark: breaking the commit lock %s (%s), unchanged for %.0f s: left "
                        "by a driver that died while committing?", loc.join(LOCK),
                        held.decode(errors="replace"), _LOCK_PATIENCE_S)
            loc.delete(LOCK)
            continue
        time.sleep(0.05)
    try:
        yield
    finally:
        loc.delete(LOCK)


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
