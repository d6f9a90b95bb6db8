"""A write task's opens and closes on a store run in the background (store/uploads.py), while
the task encodes: what is written before a file's open answers waits in memory, in order;
closes overlap, at most AT_ONCE pending; an upload that fails fails the task and leaves
nothing behind it. The store: the local disk through fsspec (not pyarrow's LocalFileSystem,
so tfspark treats it as a store), whose opens wait until the test lets them go."""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from fsspec.implementations.local import LocalFileOpener, LocalFileSystem
from pyspark.sql.types import LongType, StructField, StructType

import tfspark
from tfspark.arrow.encode import BatchEncoder
from tfspark.spec import infer_spec
from tfspark.store import uploads
from tfspark.store.direct import DirectFile, open_direct
from tfspark.store.fs import locate
from tfspark.store.part_files import TaskFiles
from tfspark.store.uploads import Uploads


class Held(LocalFileSystem):
    """Local files whose opens for writing wait for `go`, counting the opens and closes under
    way at once; a close of a file whose name holds `fail` fails, after writing it."""

    cachable = False

    def __init__(self, fail: str = "", **kwargs):
        super().__init__(**kwargs)
        self.go, self.fail = threading.Event(), fail
        self.lock, self.inside, self.most, self.closes_at_once = threading.Lock(), 0, 0, 0
        self.closing = 0
        self.waiting = threading.Condition(self.lock)
        self.closes_go = threading.Event()
        self.closes_go.set()  # (a test may hold them)

    def when_waiting(self, n: int) -> None:
        """Let the opens go once n of them wait at once."""
        with self.waiting:
            assert self.waiting.wait_for(lambda: self.inside >= n, 30)
        self.go.set()

    def _open(self, path, mode="rb", **kwargs):
        if "w" not in mode:
            return super()._open(path, mode, **kwargs)
        with self.under_way("inside", "most"):
            assert self.go.wait(30), "the test never let the open go"
            return _Closing(self, path, mode, **kwargs)

    @contextlib.contextmanager
    def under_way(self, now: str, most: str):
        """Count a request in flight in attribute `now`, the most at once in `most`."""
        with self.lock:
            setattr(self, now, getattr(self, now) + 1)
            setattr(self, most, max(getattr(self, most), getattr(self, now)))
            self.waiting.notify_all()
        try:
            yield
        finally:
            with self.lock:
                setattr(self, now, getattr(self, now) - 1)


class _Closing(LocalFileOpener):
    def __init__(self, owner: Held, path, mode, **kwargs):
        super().__init__(path, mode, fs=owner, **kwargs)
        self.owner = owner

    def close(self):
        o = self.owner
        with o.under_way("closing", "closes_at_once"):
            assert o.closes_go.wait(10), "the test never let the close go"
            super().close()
            threading.Event().wait(0.01)  # an upload's last request takes a while
            if o.fail and o.fail in self.path:
                raise OSError(f"upload of {self.path} failed: 503 Service Unavailable")


def store(fs: Held, tmp_path):
    return locate(str(tmp_path), pafs.PyFileSystem(pafs.FSSpecHandler(fs)))


def test_what_is_written_while_a_file_opens_waits_in_memory_in_order(tmp_path):
    fs = Held()
    loc = store(fs, tmp_path)
    assert not loc.is_local
    up = Uploads(loc)
    streams = [up.open(f"d/f{i}") for i in range(3)]  # all three opens under way at once
    chunks = [np.full(1000, i, np.uint8) for i in range(5)]
    for s in streams:
        for c in chunks:
            s.write(memoryview(c))
            c[:] = 255  # the caller reuses its buffer: what waits is a copy
        for i, c in enumerate(chunks):
            c[:] = i
    fs.when_waiting(3)  # (all three were still opening while the rows were written)
    for s in streams:
        up.close(s)
    up.finish()
    assert fs.most == 3
    want = b"".join(bytes([i]) * 1000 for i in range(5))
    assert [(tmp_path / "d" / f"f{i}").read_bytes() == want for i in range(3)] == [True] * 3


def test_past_the_tasks_memory_a_write_waits_for_its_open(tmp_path, monkeypatch):
    """The memory is the task's, not each file's: a second file's write that would take it
    past WAITING_BYTES waits for that file's open, then goes out after what waited."""
    monkeypatch.setattr(uploads, "WAITING_BYTES", 1500)
    fs = Held()
    up = Uploads(store(fs, tmp_path))
    one, two = up.open("one"), up.open("two")
    one.write(b"a" * 1000)  # waits in memory
    two.write(b"b" * 400)  # so does this: 1,400 in all
    threading.Timer(0.05, fs.go.set).start()
    two.write(b"c" * 400)  # 1,800: waits for the open
    assert fs.go.is_set()
    two.write(b"d")
    one.write(b"e")
    up.close(one)
    up.close(two)
    up.finish()
    assert (tmp_path / "one").read_bytes() == b"a" * 1000 + b"e"
    assert (tmp_path / "two").read_bytes() == b"b" * 400 + b"c" * 400 + b"d"


def _task_files(loc, max_records=None):
    spec = infer_spec(StructType([StructField("id", LongType(), False)]))
    return spec, TaskFiles(loc, "0123456789abcdef", "00000-1", None, 6, "Example", max_records,
                           BatchEncoder(spec))


def test_a_tasks_files_open_and_close_many_at_a_time_each_holding_its_rows(tmp_path):
    """A file per partition value, each rolled over every 30 rows: 8 x 4 files. The task goes
    on encoding while the closes of the files it rolled over are under way (it waited for
    each before: a request or two each, at a store's latency)."""
    fs = Held()
    fs.go.set()
    fs.closes_go.clear()
    loc = store(fs, tmp_path)
    spec, files = _task_files(loc, max_records=30)
    ids = np.arange(800, dtype=np.int64)
    for start in range(0, 100, 25):  # four batches, each with rows of all 8 values
        if start == 50:  # the eight files rolled over at 30 rows are all closing now
            with fs.waiting:
                assert fs.waiting.wait_for(lambda: fs.closing == 8, 10)
            fs.closes_go.set()
        for value in range(8):
            rows = ids[value * 100 + start:value * 100 + start + 25]
            files.write_group(None, {"c": str(value)}, pa.record_batch({"id": rows}))
    done = files.close()
    assert sorted(d["records"] for d in done) == sorted([30, 30, 30, 10] * 8)
    assert len({d["path"] for d in done}) == 32
    for value in range(8):
        paths = [str(tmp_path / d["path"]) for d in done if d["partition"]["c"] == str(value)]
        got = [int(i) for b in tfspark.read_batches(paths, 1000, spec=spec) for i in b["id"]]
        assert sorted(got) == list(range(value * 100, value * 100 + 100))


def test_an_upload_that_fails_fails_the_task_and_leaves_nothing(tmp_path):
    """The third file's upload fails in the background: the task's close raises it (named),
    and once discarded no file of the task is left, none written after (every request ended
    first)."""
    fs = Held(fail="-0002.tfrecord")
    fs.go.set()
    loc = store(fs, tmp_path)
    _, files = _task_files(loc, max_records=10)
    batch = pa.record_batch({"id": np.arange(100, dtype=np.int64)})
    with pytest.raises(OSError, match=r"-0002\.tfrecord failed: 503"):
        try:
            files.write_group(None, {}, batch)
            files.close()
        except BaseException:
            files.discard()
            raise
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == []


def test_local_disk_opens_and_closes_in_place(tmp_path):
    up = Uploads(locate(str(tmp_path)))
    s = up.open("f")
    probe = open_direct(str(tmp_path / "probe"))
    assert isinstance(s, DirectFile if probe else pa.NativeFile)  # no thread; no page cache
    if probe:
        probe.close()
    s.write(b"x")
    up.close(s)
    assert s.closed and (tmp_path / "f").read_bytes() == b"x"
    up.finish()
