"""Clean-ups that run while another write works on the same path (real threads, real files).

A failed write removes the directories it made once they are empty (the write of a data set), and a
committed write removes its emptied backup staging (spark/backup.py). Both may run at the
moment another write of the same path fills or removes the same directories; neither may
remove that write's files, nor fail because the other removed a directory first.
"""

from __future__ import annotations

import random
import shutil
import sys
import threading
import time

import pytest

from tfspark.store.fs import locate
from tfspark.store.write import PriorState

ROUNDS = 300


def _run(*jobs) -> list[BaseException]:
    """Run the jobs in threads that start together; the errors they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def wrap(job):
        def run():
            start.wait()
            try:
                job()
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)
        return run

    threads = [threading.Thread(target=wrap(job)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize("how", ["delete_all", "delete_dir"])
def test_two_removals_of_one_directory_both_succeed(tmp_path, how):
    """A publish and a failed write's clean-up both removing an emptied staging directory
    (delete_all); two writes starting at once both sweeping a dead write's staging
    (delete_dir)."""
    root = locate(str(tmp_path))
    for k in range(ROUNDS):
        d = tmp_path / f"staging-{k}"
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "f").write_bytes(b"x")
        remove = (locate(str(d)).delete_all if how == "delete_all"
                  else lambda name=d.name: root.delete_dir(name))
        errors = _run(remove, remove)
        assert not errors, f"round {k}: {errors[0]!r}"
        assert not d.exists()


def test_a_failed_writes_clean_up_keeps_another_writes_new_files(tmp_path):
    """While write A puts files into new directories of the path, failed write B (which saw
    the path empty when it began) removes the directories it found empty: A's files all stay."""
    out = tmp_path / "ds"
    out.mkdir()
    before = PriorState.take(str(out))
    assert before is not None
    lost: list[str] = []
    done = threading.Event()

    def write_a() -> None:
        try:
            _write_a()
        finally:
            done.set()

    def _write_a() -> None:
        pause = random.Random(0)
        loc = locate(str(out))
        for k in range(ROUNDS * 3):
            rel = f"split-{k}/part-a"
            loc.make_dir(f"split-{k}")  # as a job makes its directories before its tasks run
            time.sleep(pause.uniform(0, 0.001))  # land anywhere in B's clean-up
            with loc.open_output(rel) as f:  # as the write tasks do
                f.write(b"rows")
            time.sleep(0.001)  # B's pass that saw the directory empty is over
            if not (out / rel).exists():
                lost.append(rel)
            else:  # A's commit would keep it; gone here so that B's passes stay short
                shutil.rmtree(out / f"split-{k}", ignore_errors=True)

    def clean_b() -> None:
        while not done.is_set():  # pass after pass, as many failing writes would
            before.put_back("b0b0b0b0")
            time.sleep(0.0002)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the threads take turns often, as processes would
    try:
        errors = _run(write_a, clean_b)
    finally:
        sys.setswitchinterval(switch)
    assert not errors, repr(errors[0])
    assert not lost, f"{len(lost)} of A's files removed: {lost[:3]}"
