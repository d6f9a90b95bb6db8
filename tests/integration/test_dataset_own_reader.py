"""make_dataset's own reader (tf/records.py), which every file not on local disk goes through:
the same files read through a pyarrow filesystem that is not the local one (SubTreeFileSystem
over the local disk: a real filesystem, read by tfspark's reader, not TensorFlow's) give the
same batches as TensorFlow's native reader; shards, a file order per epoch, damage, a missing
required feature and a reader stopped early included."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pyarrow.fs as pafs
import pytest
from test_missing_features import _spec, holey  # noqa: F401 - holey: a fixture
from test_numpy_reader import _ids_table, write_dir

import tfspark

pytestmark = pytest.mark.tf
OWN = pafs.SubTreeFileSystem("/", pafs.LocalFileSystem())


def ids(ds) -> list[int]:
    return [int(i) for _, y in ds.as_numpy_iterator() for i in y]


def both(path: str, batch_size: int, **kw) -> tuple[list[int], list[int]]:
    """The ids TensorFlow's reader and ours give for the same call."""
    native = ids(tfspark.make_dataset(path, batch_size, **kw))
    own = ids(tfspark.make_dataset(path.lstrip("/"), batch_size, filesystem=OWN, **kw))
    return native, own


@pytest.mark.parametrize("one_by_one", [False, True])
@pytest.mark.parametrize("block", [1, 16])
def test_the_same_batches_as_the_native_reader(tmp_path, monkeypatch, block, one_by_one):
    # Records travel into TensorFlow one object each when they are large on average (blocks
    # of real rows), else as one string cut there: both ways for both layouts.
    from tfspark.tf import records

    monkeypatch.setattr(records, "ONE_BY_ONE_FROM", 1 if one_by_one else 10**9)
    batch, spec = _ids_table(1000)
    path = write_dir(str(tmp_path / "d"), batch, spec, block, files=5, compression="gzip")
    ordered = dict(shuffle_buffer=0, shuffle_files=False, deterministic=True)
    native, own = both(path, 64, num_parallel_reads=1, **ordered)
    assert native == own == list(range(1000))
    native, own = both(path, 64, num_parallel_reads=1, shard=(3, 1), **ordered)
    assert native == own
    # Files in parallel, in turns: every row once, in an order fixed by the call (blocks of 16
    # rows are read a whole file at a time: turns of whole files keep the rows in order).
    _, own = both(path, 64, num_parallel_reads=3, **ordered)
    assert sorted(own) == list(range(1000)) and (own != list(range(1000))) == (block == 1)
    assert own == both(path, 64, num_parallel_reads=3, **ordered)[1]
    # Shuffled over two epochs, deterministic with a seed: reproducible, each epoch whole and
    # in another order; without determinism every row still comes once an epoch.
    _, a = both(path, 100, seed=7, deterministic=True, epochs=2)
    assert a == both(path, 100, seed=7, deterministic=True, epochs=2)[1]
    assert sorted(a[:1000]) == sorted(a[1000:]) == list(range(1000)) and a[:1000] != a[1000:]
    native, own = both(path, 100, epochs=2)
    assert sorted(native) == sorted(own) == sorted(list(range(1000)) * 2)
    # Shards, even and not: each worker the same rows as with the native reader.
    for even in (True, False):
        seen = []
        for k in range(3):
            native, own = both(path, 50, shard=(3, k), even_shards=even, **ordered)
            assert sorted(native) == sorted(own)
            seen += own
        assert sorted(seen) == list(range(1000)) or even


@pytest.mark.parametrize("one_by_one", [False, True])
def test_even_shards_cut_through_a_block_as_the_native_reader_does(tmp_path, monkeypatch,
                                                                  one_by_one):
    # 3 files of 333-334 rows in blocks of 16, 3 workers: each keeps 332 rows, so a cut goes
    # through a block of each file; the own reader reads that block apart (file_blocks).
    from tfspark.tf import records

    monkeypatch.setattr(records, "ONE_BY_ONE_FROM", 1 if one_by_one else 10**9)
    batch, spec = _ids_table(1000)
    path = write_dir(str(tmp_path / "d"), batch, spec, 16, files=3)
    seen = []
    for k in range(3):
        native, own = both(path, 50, shard=(3, k), shuffle_buffer=0, shuffle_files=False,
                           deterministic=True, num_parallel_reads=1)
        assert native == own and len(own) == 332
        seen += own
    assert len(set(seen)) == len(seen)


@pytest.mark.parametrize("one_by_one", [False, True])
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_blocks_do_not_depend_on_where_reads_end(tmp_path, monkeypatch, compression,
                                                 one_by_one):
    # Files read in parallel, in turns of a block each: the order is the native reader's only
    # when every block holds its full count of records. Local reads of 3,000 bytes and a
    # store's ranges of 1,500 end inside most blocks (as a remote file's 8 MiB ranges end
    # inside some): a block is joined from the reads it spans, and the order stays the same,
    # for records handed over one by one and as one string.
    from functools import partial

    from tfspark.store import fetch
    from tfspark.tf import records
    from tfspark.wire import stream

    monkeypatch.setattr(records, "ONE_BY_ONE_FROM", 1 if one_by_one else 10**9)
    batch, spec = _ids_table(3000)
    ordered = dict(shuffle_buffer=0, shuffle_files=False, deterministic=True,
                   num_parallel_reads=3)
    rows = write_dir(str(tmp_path / "rows"), batch, spec, 1, files=3, compression=compression)
    blocks = write_dir(str(tmp_path / "blocks"), batch, spec, 16, files=3,
                       compression=compression)
    before = both(rows, 64, **ordered)[1]  # (local files of rows: the own reader both times)
    native = both(blocks, 64, **ordered)[0]
    monkeypatch.setattr(stream, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(fetch, "FIRST_BYTES", 700)
    monkeypatch.setattr(records, "Fetcher", partial(fetch.Fetcher, range_bytes=1500, ahead=2))
    assert both(rows, 64, **ordered) == (before, before)
    assert both(blocks, 64, **ordered) == (native, native)
    assert both(blocks, 64, shard=(2, 1), **ordered)[1] == both(blocks, 64, shard=(2, 1),
                                                                **ordered)[0]
    assert sorted(before) == sorted(native) == list(range(3000)) and before != native


def test_the_hand_over_form_is_the_files_whatever_the_shard(tmp_path, monkeypatch):
    # The mean record size decides it; a shard reading every n-th record of fewer files than
    # workers counts 1/n of their records, against the files' whole bytes.
    from tfspark.store.read_plan import plan_read
    from tfspark.store.shards import shard
    from tfspark.tf import records

    batch, spec = _ids_table(1000)
    path = write_dir(str(tmp_path / "d"), batch, spec, 16, files=2).lstrip("/")
    plan = plan_read(path, filesystem=OWN)
    mean = sum(plan.sizes) / sum(plan.records)
    monkeypatch.setattr(records, "ONE_BY_ONE_FROM", 2 * mean)  # between the mean and 8x it
    forms = {records.RecordSource(shard(plan, part), [-1] * 2, 1, 1, None).one_by_one
             for part in [None, *((8, k) for k in range(8))]}
    assert forms == {False}
    monkeypatch.setattr(records, "ONE_BY_ONE_FROM", mean / 2)
    forms = {records.RecordSource(shard(plan, part), [-1] * 2, 1, 1, None).one_by_one
             for part in [None, *((8, k) for k in range(8))]}
    assert forms == {True}


def test_damage_and_a_missing_feature_are_named(tmp_path, tf, holey):  # noqa: F811
    batch, spec = _ids_table(300)
    path = write_dir(str(tmp_path / "d"), batch, spec, 1, files=3)
    victim = os.path.join(path, "part-00001.tfrecord")
    data = bytearray(open(victim, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(victim, "wb").write(bytes(data))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"part-00001\.tfrecord: .*byte offset \d+"):
        ids(tfspark.make_dataset(path.lstrip("/"), 64, filesystem=OWN))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"data\.tfrecord: record 3 has no required feature b "):
        list(tfspark.make_dataset([holey.lstrip("/")], 4, spec=_spec(None), filesystem=OWN,
                                  shuffle_buffer=0).as_numpy_iterator())


def test_a_reader_stopped_early_leaves_no_thread(tmp_path):
    batch, spec = _ids_table(2000)
    path = write_dir(str(tmp_path / "d"), batch, spec, 1, files=4)
    before = {t for t in threading.enumerate() if t.name.startswith("tfspark-tf-read")}
    ds = tfspark.make_dataset(path.lstrip("/"), 10, filesystem=OWN, shuffle_buffer=0)
    for _ in ds.take(3):
        pass
    del ds
    import gc
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        gc.collect()
        left = {t for t in threading.enumerate() if t.name.startswith("tfspark-tf-read")}
        if not left - before:
            break
        time.sleep(0.2)
    assert not left - before, left


def test_files_opened_ahead_are_closed_when_the_reader_stops(tmp_path, monkeypatch):
    # 8 small files in 2 lanes: each lane opens the rest of its files ahead once its first
    # file flows (the lanes take turns: by the third batch, the first lane has opened all 4 of
    # its files and the second at least 2); a consumer that stops then leaves none open.
    from tfspark.tf import records

    batch, spec = _ids_table(4000)
    path = write_dir(str(tmp_path / "d"), batch, spec, 1, files=8)
    streams = []
    real = records.RecordSource._open

    def tracked(self, f):
        streams.append(real(self, f))
        return streams[-1]

    monkeypatch.setattr(records.RecordSource, "_open", tracked)
    ds = tfspark.make_dataset(path.lstrip("/"), 10, filesystem=OWN, shuffle_buffer=0,
                              num_parallel_reads=2, deterministic=True)
    for _ in ds.take(3):
        pass
    del ds
    import gc
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(s.closed for s in streams):
        gc.collect()
        time.sleep(0.2)
    assert len(streams) >= 6  # (one file ahead, as before, opened 4 at most)
    assert all(s.closed for s in streams), [s.loc.uri for s in streams if not s.closed]


def test_no_autograph_warning_for_the_own_reader(tmp_path):
    # TensorFlow's AutoGraph warned on every dataset of the own reader that it could not
    # convert the epoch's generator; a fresh process (it warns once per process).
    batch, spec = _ids_table(100)
    path = write_dir(str(tmp_path / "d"), batch, spec, 16, files=2).lstrip("/")
    code = ("import pyarrow.fs as pafs, tfspark\n"
            "fs = pafs.SubTreeFileSystem('/', pafs.LocalFileSystem())\n"
            f"ds = tfspark.make_dataset({path!r}, 10, filesystem=fs)\n"
            "print(sum(len(y) for _, y in ds))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd="/")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["100"] and "AutoGraph" not in run.stderr, run.stderr[-2000:]
