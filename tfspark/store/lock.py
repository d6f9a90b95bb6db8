"""The commit lock: while a write's commit checks the data set's version and writes its
manifest, no other commit to that path does (two writers both told success while one's rows
are gone is what it prevents).

Local and POSIX-mounted filesystems: one lock file, created with O_CREAT | O_EXCL (atomic).
Object stores have no conditional put in pyarrow, and two writers of one object there both
succeed (or fail on each other's upload), so each attempt writes an object of its own,
`_tfspark.lock-<write id>-<nonce>` beside the manifest, then lists them all (one listing of
the data set's top level, which a commit lists anyway): the attempt that finds only its own
holds the lock; one that finds others removes its own and tries again after a random pause.
As S3, GCS and Azure list what was written before the listing began (strong consistency), two
attempts that both hold would each have listed before the other's write, which cannot be.
A lock unchanged for PATIENCE_S is taken as left by a driver that died while committing.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from tfspark.errors import OptionError
from tfspark.store.fs import Location

log = logging.getLogger("tfspark")
LOCK = "_tfspark.lock"  # the lock file on local disk
_LOCKS = LOCK + "-"  # + <write id>-<nonce>: the lock objects on an object store
PATIENCE_S = 60.0  # a lock unchanged this long is a dead committer's: broken
_PAUSE_S = (0.02, 1.0)  # the first and the longest pause between attempts on a store


def lock_name(write_id: str) -> str:
    """The name of one attempt's lock object on a store (unique to the attempt)."""
    return f"{_LOCKS}{write_id}-{uuid.uuid4().hex}"


@contextmanager
def commit_lock(loc: Location, write_id: str) -> Iterator[set[str] | None]:
    """Hold the commit lock of the data set at loc while the block runs (module docstring).
    Yields, on a store, the names at the data set's top level when the lock was taken (from
    the lock's own listing: what a commit need not ask again); None on local disk."""
    token = json.dumps({"write_id": write_id, "host": socket.gethostname(), "pid": os.getpid(),
                        "nonce": uuid.uuid4().hex}).encode()
    if loc.is_local:
        held, seen = _take_file(loc, token), None
    else:
        held, seen = _take_object(loc, write_id, token)
    try:
        yield seen
    finally:
        loc.delete(held)


def _take_file(loc: Location, token: bytes) -> str:
    """LOCK, once this call created it exclusively."""
    seen, since = b"", time.monotonic()
    while not loc.create_exclusive(LOCK, token):
        try:
            held = loc.read_bytes(LOCK)
        except FileNotFoundError:
            continue  # released meanwhile
        if held != seen:
            seen, since = held, time.monotonic()
        elif time.monotonic() - since > PATIENCE_S:
            _break(loc, LOCK, held)
            continue
        time.sleep(0.05)
    return LOCK


def _take_object(loc: Location, write_id: str, token: bytes) -> tuple[str, set[str]]:
    """A lock object of this call's, once a listing found no other; and the names that
    listing found at the top level (files and directories, the lock object but no other)."""
    first_seen: dict[str, float] = {}
    pause = _PAUSE_S[0]
    while True:
        mine = lock_name(write_id)
        loc.write_bytes_atomic(mine, token)
        try:
            entries = loc.entries(recursive=False)
            listed = [r for r, is_dir in entries if not is_dir and r.startswith(_LOCKS)]
            if mine not in listed:
                raise OptionError(f"the store of {loc.uri!r} did not list an object just "
                                  f"written there ({mine}), so no commit to it can be made safe "
                                  f"from another's: use a store that lists what it has written "
                                  f"(S3, GCS and Azure do)")
        except BaseException:
            loc.delete(mine)
            raise
        others = [r for r in listed if r != mine]
        if not others:
            return mine, {r for r, _ in entries}
        loc.delete(mine)
        now = time.monotonic()
        first_seen = {r: first_seen.get(r, now) for r in others}  # (names are per attempt)
        for rel, since in first_seen.items():
            if now - since > PATIENCE_S:
                try:
                    _break(loc, rel, loc.read_bytes(rel))
                except FileNotFoundError:
                    pass  # released meanwhile
        time.sleep(random.uniform(0, pause))
        pause = min(2 * pause, _PAUSE_S[1])


def _break(loc: Location, rel: str, held: bytes) -> None:
    log.warning("tfspark: breaking the commit lock %s (%s), unchanged for %.0f s: left by a "
                "driver that died while committing?", loc.child_uri(rel),
                held.decode(errors="replace"), PATIENCE_S)
    loc.delete(rel)


def alive(pid: int) -> bool:
    """Whether process `pid` of this host is running (another user's counts as running)."""
    try:
        os.kill(pid, 0)  # signal 0: only whether it could be sent
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
