"""The commit lock (store/lock.py): one commit at a time checks and writes a data set's
manifest, on local disk and on each store (a GCS emulator, moto's S3 server, Azurite), with
real threads racing; and a lock left by a driver that died while committing is broken."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tfspark.store import lock
from tfspark.store.fs import locate
from tfspark.store.lock import commit_lock

PLACES = ["local", "gcs", "s3", "azurite"]


@pytest.fixture(params=PLACES)
def place(request, tmp_path):
    if request.param == "local":
        return locate(str(tmp_path / "ds"))
    store = request.getfixturevalue(request.param)
    return locate(f"{store.bucket()}/ds", store.filesystem(delay=0.01))


def test_one_commit_at_a_time_holds_the_lock(place):
    """Each holder reads a counter through the store and writes it back one higher: with two
    holders at once an increment is lost (on a store the lock was check, write, read back,
    which two commits within one request's latency both passed)."""
    threads, rounds = 4, 6
    inside, most = [0], [0]
    guard = threading.Lock()

    def commit(worker: int) -> None:
        for _ in range(rounds):
            with commit_lock(place, f"{worker:016x}"):
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                n = int(place.read_bytes("counter")) if place.exists("counter") else 0
                place.write_bytes_atomic("counter", str(n + 1).encode())
                with guard:
                    inside[0] -= 1

    with ThreadPoolExecutor(threads) as pool:  # (a thread's error is raised here)
        list(pool.map(commit, range(threads)))
    assert most[0] == 1, f"{most[0]} commits held the lock at once"
    assert int(place.read_bytes("counter")) == threads * rounds
    assert [r for r in place.list_files() if "lock" in r] == []  # every holder released


def test_a_lock_left_by_a_dead_committer_is_broken(place, monkeypatch, caplog):
    monkeypatch.setattr(lock, "PATIENCE_S", 0.5)
    with commit_lock(place, "0" * 16):
        assert len([r for r in place.list_files() if "lock" in r]) == 1
    assert [r for r in place.list_files() if "lock" in r] == []
    # as a driver killed inside the lock leaves it
    dead = lock.LOCK if place.is_local else lock.lock_name("d" * 16)
    place.write_bytes_atomic(dead, b'{"write_id": "dddddddddddddddd"}')
    with caplog.at_level(logging.WARNING, logger="tfspark"):
        with commit_lock(place, "1" * 16):  # (locally the lock file is the same name)
            assert not place.exists(dead) or b"1" * 16 in place.read_bytes(dead)
    assert "breaking the commit lock" in caplog.text and "dddddddddddddddd" in caplog.text
