"""read_batches(..., processes=N): real reading processes handing batches over in shared
memory. The oracle is the reader's own parts read in this process: process i reads
for_worker(N, i), and the batches come from the processes in turn, so they must be exactly
those parts' batches taken in turn. No Spark: the files are written by tfspark's encoders."""

from __future__ import annotations

import gc
import json
import os
import sys
import types

import fsspec.implementations.local
import numpy as np
import psutil
import pytest
from test_numpy_reader import write_dir
from test_reader_state import _rows, _table

import tfspark
from tfspark.errors import CorruptRecordError, OptionError

ROWS = 2000


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    batch, spec = _table(ROWS)
    root = tmp_path_factory.mktemp("processes")
    return {"rows": write_dir(str(root / "rows"), batch, spec, 1, files=3),
            "blocks": write_dir(str(root / "blocks"), batch, spec, 16, files=5)}


def _in_turn(path: str, processes: int, **kw) -> list:
    """The batches processes=N must yield: its parts read here, taken in turn."""
    parts = [iter(tfspark.read_batches(path, **kw).for_worker(processes, i))
             for i in range(processes)]
    out, alive, turn = [], [True] * processes, 0
    while any(alive):
        while not alive[turn]:
            turn = (turn + 1) % processes
        batch = next(parts[turn], None)
        if batch is None:
            alive[turn] = False
            continue
        out.append(_rows(batch))
        turn = (turn + 1) % processes
    return out


def _children() -> set[int]:
    """This process's reading processes (not Spark's JVM or other tests' children)."""
    out = set()
    for p in psutil.Process().children():
        try:
            if "tfspark.numpy.process_worker" in " ".join(p.cmdline()):
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


CASES = {
    "blocks, 2 processes, 2 epochs": ("blocks", 2, dict(batch_size=64, seed=3, epochs=2)),
    "rows, 3 processes, drop_remainder": ("rows", 3, dict(batch_size=50, seed=1,
                                                          drop_remainder=True)),
    "file order": ("rows", 2, dict(batch_size=70, shuffle_buffer=0, shuffle_files=False)),
}


@pytest.mark.parametrize("case", CASES)
def test_the_parts_in_turn_every_row_once_and_kept_batches_stay_whole(data, case):
    layout, n, kw = CASES[case]
    want = _in_turn(data[layout], n, label_cols="id", **kw)
    with tfspark.read_batches(data[layout], label_cols="id", processes=n, **kw) as reader:
        assert len(reader) == len(want)
        kept = list(reader)  # every batch held at once: none is written over
        assert [_rows(b) for b in kept] == want
        ids = sorted(int(i) for _, y in kept for i in y)
        epochs = kw.get("epochs", 1)
        if not kw.get("drop_remainder"):
            assert ids == sorted(list(range(ROWS)) * epochs)
        assert [_rows(b) for b in reader] != want or kw.get("seed") is None  # a new shuffle
    assert not _children()


def test_resume_at_many_points_gives_the_rest(data):
    kw = dict(batch_size=40, seed=5, epochs=2, label_cols="id")
    path = data["blocks"]
    with tfspark.read_batches(path, processes=2, **kw) as full:
        want = [_rows(b) for b in full]
    for stop in sorted({0, 7, len(want) // 2, len(want)}):
        with tfspark.read_batches(path, processes=2, **kw) as reader:
            it = iter(reader)
            got = [_rows(next(it)) for _ in range(stop)]
            saved = json.loads(json.dumps(reader.state_dict()))
            it.close()
        with tfspark.read_batches(path, processes=2, state=saved, **kw) as again:
            assert got + [_rows(b) for b in again] == want, stop
    unseeded = tfspark.read_batches(path, processes=2, **{**kw, "seed": None})
    saved = unseeded.state_dict()  # before any batch: the seeds the iteration will use
    with unseeded, tfspark.read_batches(path, processes=2, state=saved,
                                        **{**kw, "seed": None}) as again:
        assert [_rows(b) for b in unseeded] == [_rows(b) for b in again]


def test_strings_as_objects_ragged_and_ids_come_through(data):
    kw = dict(batch_size=64, seed=2, label_cols="id")
    for strings in ("object", "bytes"):
        with tfspark.read_batches(data["rows"], processes=2, strings=strings, **kw) as r:
            got = [(y.tolist(), x["s"].to_list() if strings == "bytes" else x["s"].tolist(),
                    x["v"].to_list()) for x, y in r]
        part = [tfspark.read_batches(data["rows"], strings=strings, **kw).for_worker(2, i)
                for i in range(2)]
        first = next(iter(part[0]))[0]
        assert got[0][1] == (first["s"].to_list() if strings == "bytes" else
                             first["s"].tolist())
        assert len(got) == sum(len(p) for p in part)


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_an_early_stop_a_new_pass_and_garbage_end_the_processes(data):
    reader = tfspark.read_batches(data["blocks"], 32, seed=1, processes=2, epochs=None)
    it = iter(reader)
    for _ in range(5):
        next(it)
    pids = _children()
    assert len(pids) == 2
    again = iter(reader)  # a new pass ends the earlier one, in the same processes
    assert next(again)[1].shape == (32,) and _children() == pids
    del it, again, reader
    gc.collect()
    assert not _children()


def test_a_damaged_file_is_named_and_a_killed_process_is_said(data, tmp_path):
    batch, spec = _table(ROWS)
    path = write_dir(str(tmp_path / "bad"), batch, spec, 16, files=2)
    name = os.path.join(path, "part-00001.tfrecord")
    raw = bytearray(open(name, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    open(name, "wb").write(bytes(raw))
    with tfspark.read_batches(path, 16, processes=2) as reader:
        with pytest.raises(CorruptRecordError, match="part-00001"):
            list(reader)
    with tfspark.read_batches(data["blocks"], 8, processes=2, epochs=None) as reader:
        it = iter(reader)
        next(it)
        psutil.Process(sorted(_children())[0]).kill()
        with pytest.raises(RuntimeError, match=r"reading process \d of 2 .* ended"):
            for _ in range(10_000):
                next(it)
    assert not _children()


def test_bad_arguments_are_named_before_anything_starts(data):
    with pytest.raises(OptionError, match="processes must be a positive int"):
        tfspark.read_batches(data["rows"], 8, processes=0)
    saved = tfspark.read_batches(data["rows"], 8, seed=1, processes=2).state_dict()
    with pytest.raises(OptionError, match="processes=2, this reader has processes=3"):
        tfspark.read_batches(data["rows"], 8, seed=1, processes=3, state=saved)
    with pytest.raises(OptionError, match="not a state of read_batches"):
        tfspark.read_batches(data["rows"], 8, seed=1, processes=2,
                             state=tfspark.read_batches(data["rows"], 8).state_dict())
    with pytest.raises(OptionError, match="batch_size=8 there, 9 here"):
        tfspark.read_batches(data["rows"], 9, seed=1, processes=2, state=saved)
    with pytest.raises(OptionError, match="use one of them"):
        tfspark.read_batches(data["rows"], 8, processes=2).for_worker(2, 0)

    class Local(fsspec.implementations.local.LocalFileSystem):  # does not pickle
        pass

    with pytest.raises(OptionError, match="cannot be sent to a reading process") as e:
        tfspark.read_batches(data["rows"], 8, processes=2, filesystem=Local())
    assert "Local" in str(e.value) and not _children()
    # pickles here, but a fresh Python cannot import its module
    ghost = types.ModuleType("tfspark_ghost")
    ghost.Ghost = type("Ghost", (fsspec.implementations.local.LocalFileSystem,),
                       {"__module__": "tfspark_ghost"})
    sys.modules["tfspark_ghost"] = ghost
    try:
        reader = tfspark.read_batches(data["rows"], 8, processes=2, filesystem=ghost.Ghost())
        with pytest.raises(OptionError, match="cannot be sent to a reading process") as e:
            next(iter(reader))
        assert "tfspark_ghost" in str(e.value) and not _children()
    finally:
        del sys.modules["tfspark_ghost"]
    assert not _children()


def _segments() -> int:
    """Shared segments this process maps (memfds, Linux)."""
    with open("/proc/self/maps") as f:
        return len({line.split()[4] for line in f if "memfd:tfspark-batch" in line})


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="counts Linux memfds")
def test_batches_are_views_of_shared_memory_used_again_once_let_go(data):
    with tfspark.read_batches(data["blocks"], 16, seed=1, processes=2, epochs=3,
                              label_cols="id") as reader:
        x, y = next(iter(reader))
        base = x["x"]
        while isinstance(base, np.ndarray):
            assert not base.flags.owndata
            base = base.base
        assert isinstance(base, memoryview)  # of the segment: nothing was copied
        del x, y, base
        batches = sum(1 for _ in reader)  # each let go at once
        assert batches == len(reader) > 300
        assert _segments() <= 2 * 8  # a few per process, used again and again
        kept = list(reader)
        assert _segments() >= len(kept)  # each batch kept holds its own
        del kept
        gc.collect()


def test_torch_dataset_takes_processes_and_refuses_worker_processes_too(data):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    kw = dict(seed=4, label_cols="id", processes=2)
    with tfspark.read_batches(data["rows"], 64, **kw) as reader:
        want = [y.tolist() for _, y in reader]
    ds = tfspark.torch_dataset(data["rows"], 64, **kw)
    got = [y.tolist() for _, y in DataLoader(ds, batch_size=None)]
    assert got == want and isinstance(next(iter(DataLoader(ds, batch_size=None)))[1],
                                      torch.Tensor)
    ds.reader().close()
    with pytest.raises(OptionError, match="use one of them"):
        next(iter(DataLoader(tfspark.torch_dataset(data["rows"], 64, **kw), batch_size=None,
                             num_workers=2)))


@pytest.mark.parametrize("processes", [None, 2])
def test_close_while_another_thread_is_inside_the_iteration(data, processes):
    """Keras fit on TensorFlow reads through tf.data's from_generator, whose threads call
    next(): when fit stops early, one may still be inside the reader's iteration. close()
    from the user's thread then ends it (no "generator already executing") and the thread
    stops at its next step; processes= ends its processes."""
    import threading

    for _ in range(3):
        reader = tfspark.read_batches(data["blocks"], 7, epochs=None, processes=processes)
        it = iter(reader)
        got = threading.Event()
        ended: list = []

        def consume(it=it, got=got, ended=ended) -> None:
            try:
                for _ in it:  # never ends by itself: epochs=None
                    got.set()
            except BaseException as e:  # noqa: BLE001 - reported below
                ended.append(e)
            else:
                ended.append("stopped")

        thread = threading.Thread(target=consume, daemon=True)  # a failure must not hang
        thread.start()
        assert got.wait(60)
        reader.close()
        thread.join(60)
        assert not thread.is_alive() and ended == ["stopped"], ended
    assert not _children()
