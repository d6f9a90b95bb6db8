"""Local files written past the page cache (store/direct.py): every byte in order whatever the
sizes of the writes, the file really opened with O_DIRECT, a refusal midway finished through the
page cache, and a failed write raised while the file still gets closed."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tfspark.store import direct
from tfspark.store.direct import ALIGN, DirectFile, open_direct


def _flags(fd: int) -> int:
    with open(f"/proc/self/fdinfo/{fd}") as f:
        return int(next(line for line in f if line.startswith("flags:")).split()[1], 8)


@pytest.fixture(autouse=True)
def _direct_here(tmp_path):
    """These tests need a temporary directory on a filesystem that takes O_DIRECT (ext4, xfs,
    btrfs, tmpfs since Linux 6.6); elsewhere tfspark writes files as any other."""
    f = open_direct(str(tmp_path / "probe"))
    if f is None:
        pytest.skip(f"the filesystem of {tmp_path} refuses O_DIRECT")
    f.close()


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(direct, "CHUNK", 3 * ALIGN)  # many chunks from a few writes
    return 3 * ALIGN


@pytest.mark.parametrize("sizes", [
    [], [0], [1], [ALIGN - 1], [ALIGN], [3 * ALIGN], [3 * ALIGN - 1, 1], [3 * ALIGN + 1],
    [5, 3 * ALIGN * 4 + 17, 0, ALIGN + 3], [7] * 5000, [ALIGN * 7 - 5, 9, 2 * ALIGN],
])
def test_every_byte_is_in_the_file_in_order_whatever_the_writes(tmp_path, small_chunks, sizes):
    rng = np.random.default_rng(len(sizes))
    parts = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    f = open_direct(str(tmp_path / "f"))
    assert isinstance(f, DirectFile)
    assert _flags(f._fd) & os.O_DIRECT  # past the page cache, not a plain file
    for i, p in enumerate(parts):  # arrays, bytes and views, as writers hand them over
        assert f.write(p if i % 3 == 0 else p.tobytes() if i % 3 == 1 else memoryview(p)) \
            == len(p)
    assert f.tell() == sum(sizes)
    f.flush()
    f.close()
    f.close()  # (twice is fine)
    want = b"".join(p.tobytes() for p in parts)
    assert (tmp_path / "f").read_bytes() == want
    with pytest.raises(ValueError, match="closed"):
        f.write(b"x")


def test_a_refusal_midway_finishes_the_file_through_the_page_cache(tmp_path, small_chunks):
    f = open_direct(str(tmp_path / "f"))
    assert f is not None
    first = os.urandom(4 * small_chunks + 100)
    f.write(first)
    f.buffered()  # as when the filesystem refuses a write with O_DIRECT
    assert not _flags(f._fd) & os.O_DIRECT
    second = os.urandom(2 * small_chunks + 5)
    f.write(second)
    f.close()
    assert (tmp_path / "f").read_bytes() == first + second


def test_a_failed_write_is_raised_once_and_the_file_is_closed(tmp_path, small_chunks):
    path = tmp_path / "f"
    f = open_direct(str(path))
    assert f is not None
    fd = f._fd
    read_only = os.open(path, os.O_RDONLY)
    os.dup2(read_only, fd)  # every write to the file now fails (EBADF)
    os.close(read_only)
    f.write(b"x" * (small_chunks + 1))  # the first chunk goes out in the background
    with pytest.raises(OSError):
        f.write(b"y" * small_chunks)  # its error, at the next write that waits for it
    with pytest.raises(OSError):
        f.close()  # the rest fails too, and the descriptor is closed all the same
    assert f.closed
    with pytest.raises(OSError):
        os.fstat(fd)
