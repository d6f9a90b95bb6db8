"""Remote files streamed in ranges read ahead (store/fetch.py), with range buffers shared by
every file of a Fetcher and taken again once read: many files read at once, in uneven reads,
whole, from an offset and up to an end, give their exact bytes. The store is a real pyarrow
filesystem that is not the local one (a SubTreeFileSystem over a temporary directory), so the
ranged path runs; ranges are made tiny so that each file spans many of them."""

from __future__ import annotations

import os
import threading

import numpy as np
import pyarrow.fs as pafs
import pytest

from tfspark.store.concurrency import cores, files_ahead
from tfspark.store.fetch import Fetcher, Spares
from tfspark.store.fs import locate

SIZES = [0, 1, 999, 4096, 4097, 50_000, 123_457]


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(5)
    store = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    out = []
    for k, n in enumerate(SIZES):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        (tmp_path / f"f{k}").write_bytes(data)
        loc = locate(f"f{k}", filesystem=store)
        assert not loc.is_local
        out.append((loc, data))
    return out


def _read(stream, rng) -> bytes:
    got = bytearray()
    while True:
        buf = bytearray(int(rng.integers(1, 600)))
        n = stream.readinto(buf)
        if not n:
            return bytes(got)
        got += buf[:n]


def in_threads(run, n: int) -> None:
    """run(k) in n threads at once; the first error any raised is raised here."""
    errors: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            run(k)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_many_files_at_once_in_uneven_reads(files):
    with Fetcher(io_threads=3, range_bytes=4099, ahead=2) as fetcher:
        def run(k: int) -> None:
            rng = np.random.default_rng(k)
            for _ in range(3):  # again and again: the buffers go round
                for loc, data in files[k % 2::2]:
                    with fetcher.open(loc, len(data)) as stream:
                        assert _read(stream, rng) == data, loc.uri

        in_threads(run, 4)


def test_a_span_of_a_file(files):
    loc, data = files[-1]
    with Fetcher(io_threads=2, range_bytes=1000, ahead=3) as fetcher:
        for start, end in ((0, None), (5000, None), (5000, 77_777), (len(data) - 1, None)):
            with fetcher.open(loc, len(data), start=start, end=end) as stream:
                assert _read(stream, np.random.default_rng(start)) == data[start:end]


def test_spares_are_taken_again_and_bounded():
    spares = Spares(100, keep=2)
    a, b, c = (spares.take(100) for _ in range(3))
    for buf in (a, b, c):
        spares.give(buf)
    assert {id(spares.take(50)), id(spares.take(100))} == {id(a), id(b)}  # c was not kept
    assert spares.take(101).size == 101 and spares.take(10).size == 100  # a fresh one each
    spares.give(np.empty(7, np.uint8))  # not of the pool's size: not kept
    assert spares.take(7).size == 100


def test_smaller_files_are_opened_further_ahead():
    mib = 2**20
    # 16 requests in flight shared by 2 reading threads: 8 each; a file of the block layout's
    # bench (12.7 MiB: 2 ranges) is 4 files, a file of 4 ranges or more (or of unknown size) 2
    assert files_ahead(16, 2, [int(12.7 * mib)] * 8) == 4
    assert files_ahead(16, 2, [300 * mib, 900 * mib]) == 2
    assert files_ahead(16, 2, None) == files_ahead(16, 2, []) == 2
    assert files_ahead(16, 2, [1000, 0]) == 8  # tiny (or empty) files: one range each
    assert files_ahead(1, 4, [10]) == 1  # never none


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and 2 cores")
def test_cores_are_the_ones_this_process_may_use():
    # a container given 1 of the host's cores decodes with 1 thread, not os.cpu_count()'s
    pid = os.fork()
    if pid == 0:
        try:
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
            os._exit(0 if cores() == 1 else 1)
        except BaseException:  # noqa: BLE001 - the child must not return into pytest
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert cores() == len(os.sched_getaffinity(0))


def test_a_forked_child_has_a_pool_of_its_own():
    from tfspark.store.fetch import SPARES

    SPARES.give(SPARES.take(1))
    with SPARES._lock:  # held by this process at the fork, as a reading thread might hold it
        pid = os.fork()
        if pid == 0:  # the child: its pool is empty and its lock free (not the parent's)
            if not SPARES._lock.acquire(timeout=5):
                os._exit(2)
            SPARES._lock.release()
            os._exit(0 if not SPARES._free else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("headroom", [16, 2**20])
def test_records_framed_where_the_ranges_were_read(tmp_path, monkeypatch, headroom, aligned):
    # stream_framed takes a remote file's ranges as they were read (next_span), the partial
    # record of one put in the room before the next: records larger than a range and than the
    # room included (then gathered apart), and batches aligned to multiples of 7 records in
    # the file (a batch also ends where a range does: make_dataset joins those pieces), many
    # files at once over the same buffers, again and again; a truncated file
    # still fails naming its offset.
    from tfspark.errors import CorruptRecordError
    from tfspark.store import fetch
    from tfspark.wire.stream import stream_framed
    from tfspark.wire.tfrecord import HEADER_BYTES, TRAILER_BYTES, frame_record

    monkeypatch.setattr(fetch, "HEADROOM", headroom)
    rng = np.random.default_rng(3)
    store = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    files = []
    for k in range(6):
        records = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes()
                   for n in rng.integers(0, 3000, 40 + k)]
        (tmp_path / f"r{k}").write_bytes(b"".join(map(frame_record, records)))
        files.append((locate(f"r{k}", filesystem=store), records))

    def records_of(stream, name):
        batches = list(stream_framed(
            stream, name, True, lambda buf, off, base: [
                buf[a + HEADER_BYTES:b - TRAILER_BYTES].tobytes()
                for a, b in zip(off[:-1].tolist(), off[1:].tolist())], batch_records=7,
            first_record=0 if aligned else None))
        ends = np.cumsum([len(b) for b in batches])
        assert not aligned or all((end - len(b)) // 7 == (end - 1) // 7
                                  for b, end in zip(batches, ends))
        return [r for batch in batches for r in batch]

    with Fetcher(io_threads=3, range_bytes=1500, ahead=2) as fetcher:
        def run(k: int) -> None:
            for _ in range(3):
                for loc, records in files[k % 3::3]:
                    with fetcher.open(loc, os.path.getsize(tmp_path / loc.base)) as s:
                        assert hasattr(s, "next_span")
                        assert records_of(s, loc.uri) == records, loc.uri

        in_threads(run, 3)
        loc, records = files[0]
        whole = (tmp_path / "r0").read_bytes()
        (tmp_path / "cut").write_bytes(whole[:-5])
        cut = locate("cut", filesystem=store)
        with pytest.raises(CorruptRecordError, match="truncated record") as info:
            with fetcher.open(cut, len(whole) - 5) as s:
                records_of(s, "cut")
        assert info.value.offset == len(whole) - len(frame_record(records[-1]))
