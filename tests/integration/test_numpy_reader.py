"""read_batches, the NumPy reader: the same rows as make_dataset (TensorFlow) for every case of the
round-trip table in both layouts, shards that cover everything once, damage named, threads, and
the framework adapters where the framework is installed."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from pyspark.sql import types as T
from test_roundtrip_tf import BLOCK_CASES, Case, case_batch, same
from torchcheck import worker_options

import tfspark
from tfspark.arrow.encode import BatchEncoder
from tfspark.arrow.encode_block import BlockEncoder
from tfspark.errors import CorruptRecordError
from tfspark.numpy import Ragged
from tfspark.store import manifest as mf
from tfspark.store.fs import locate
from tfspark.wire.stream import RecordWriter

CASES = [c for c in BLOCK_CASES if c.error is None]
OWN = pafs.SubTreeFileSystem("/", pafs.LocalFileSystem())  # local files, read as a store's


def write_dir(path: str, batch: pa.RecordBatch, spec, block: int, files: int = 1,
              compression: str | None = None, null_elements: str = "error") -> str:
    """A tfspark directory of `batch` split over `files` files, row (block=1) or block layout."""
    os.makedirs(path, exist_ok=True)
    encoder = BatchEncoder(spec, null_elements=null_elements) if block == 1 else \
        BlockEncoder(spec, block, null_elements=null_elements)
    m = mf.Manifest(spec=spec, compression=compression, rows_per_record=block)
    entries = []
    per = -(-batch.num_rows // files)
    for k in range(files):
        part = batch.slice(k * per, per)
        name = f"part-{k:05d}.tfrecord" + (".gz" if compression else "")
        buf, offsets = encoder.encode(part, framed=True)
        with open(os.path.join(path, name), "wb") as f, RecordWriter(f, compression) as w:
            w.write_framed(buf, count=len(offsets) - 1)
        entry = {"path": name, "records": len(offsets) - 1,
                 "bytes": os.path.getsize(os.path.join(path, name)), "split": None}
        if block > 1:
            entry["rows"] = part.num_rows
        entries.append(entry)
    mf.write_manifest(locate(path), m.with_files([mf.FileEntry(**e) for e in entries], "test"))
    return path


def rows_np(col, depth: int = 0) -> list:
    """Rows as lists; depth > 0: string leaves given as bytes (strings="bytes") that deep."""
    if depth and isinstance(col, Ragged) and depth == _depth(col):
        data, s = col.values.tobytes(), col.row_splits
        return [data[s[i]:s[i + 1]] for i in range(len(s) - 1)]
    if isinstance(col, Ragged):
        inner = rows_np(col.values, depth)
        s = col.row_splits
        return [inner[s[i]:s[i + 1]] for i in range(len(s) - 1)]
    return col.tolist()


def _depth(col) -> int:
    return 1 + _depth(col.values) if isinstance(col, Ragged) else 0


def rows_tf(col) -> list:
    return col.to_list() if hasattr(col, "to_list") else col.numpy().tolist()


@pytest.mark.tf
@pytest.mark.parametrize("block", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_same_rows_as_make_dataset(case: Case, block: int, tmp_path):
    batch, spec = case_batch(case)
    path = write_dir(str(tmp_path / "d"), batch, spec, block, null_elements=case.null_elements)
    ours = list(tfspark.read_batches(path, 3, shuffle_buffer=0, num_threads=1,
                                     shuffle_files=False, label_cols=[]))
    raw = list(tfspark.read_batches(path, 3, shuffle_buffer=0, num_threads=1,
                                    shuffle_files=False, label_cols=[], strings="bytes"))
    ordered = dict(shuffle_buffer=0, deterministic=True, shuffle_files=False, label_cols=[])
    theirs = list(tfspark.make_dataset(path, 3, **ordered))
    # Blocks off the local disk: read by tfspark's reader for TensorFlow (tf/records.py).
    own = list(tfspark.make_dataset(path.lstrip("/"), 3, filesystem=OWN, **ordered)) \
        if block > 1 else theirs
    assert len(ours) == len(theirs) == len(own) == -(-batch.num_rows // 3)
    for f in spec.features:
        got = sum((rows_np(b[f.name]) for b in ours), [])
        want = sum((rows_tf(b[f.name]) for b in theirs), [])
        same(got, want, f"{case.id}: {f.name}")
        same(sum((rows_tf(b[f.name]) for b in own), []), want, f"{case.id}: {f.name} (own)")
        assert own[0][f.name].dtype == theirs[0][f.name].dtype
        assert own[0][f.name].shape.as_list() == theirs[0][f.name].shape.as_list()
        if f.dtype == "string":  # strings="bytes": the same values, as uint8 bytes
            got = sum((rows_np(b[f.name], depth=1) for b in raw), [])
            same(got, want, f"{case.id}: {f.name} (bytes)")
        for b, t in zip(ours, theirs):
            if not isinstance(b[f.name], Ragged):
                assert b[f.name].shape == tuple(t[f.name].shape)
                assert b[f.name].dtype == (object if f.dtype == "string" else
                                           np.dtype(f.dtype))


def _ids_table(n: int, seed: int = 0) -> tuple[pa.RecordBatch, object]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 4, n)
    values = [None if i % 7 == 3 else list(range(int(k))) for i, k in enumerate(lengths)]
    batch = pa.RecordBatch.from_pydict({
        "id": pa.array(np.arange(n)), "x": pa.array(rng.standard_normal(n)),
        "s": pa.array([None if i % 5 == 0 else f"s{i}" for i in range(n)]),
        "v": pa.array(values, pa.list_(pa.int64()))})
    schema = T.StructType([T.StructField("id", T.LongType(), False),
                           T.StructField("x", T.DoubleType()), T.StructField("s", T.StringType()),
                           T.StructField("v", T.ArrayType(T.LongType()))])
    return batch, tfspark.infer_spec(schema, label_cols=["id"])


@pytest.mark.parametrize("block", [1, 16])
@pytest.mark.parametrize("files", [1, 5])
def test_shards_threads_epochs_and_shuffle(tmp_path, block, files):
    batch, spec = _ids_table(1000)
    path = write_dir(str(tmp_path / "d"), batch, spec, block, files=files,
                     compression="gzip" if files > 1 else None)
    # Shards: disjoint, together everything, whatever the thread count.
    seen = []
    for k in range(3):
        r = tfspark.read_batches(path, 64, shard=(3, k), even_shards=False, num_threads=2)
        seen += [int(i) for _, y in r for i in y]
    assert sorted(seen) == list(range(1000))
    # Even shards: every worker the same number of batches.
    assert len({len(tfspark.read_batches(path, 64, shard=(3, k))) for k in range(3)}) == 1
    # Epochs: every row once per epoch, shuffled differently each time; values stay together.
    r = tfspark.read_batches(path, 100, seed=3, epochs=2, num_threads=2)
    assert len(r) == 20
    ids, xs = [], []
    for x, y in r:
        ids += y.tolist()
        xs += x["x"].tolist()
        assert isinstance(x["v"], Ragged) and len(x["v"].row_splits) == len(y) + 1
    assert sorted(ids[:1000]) == sorted(ids[1000:]) == list(range(1000))
    assert ids[:1000] != ids[1000:] and ids[:1000] != list(range(1000))
    by_id = dict(zip(ids, xs))
    assert all(by_id[i] == np.float32(batch.column("x")[i].as_py()) for i in range(0, 1000, 37))
    # drop_remainder, and epochs=None repeating forever
    r = tfspark.read_batches(path, 300, drop_remainder=True, label_cols=[])
    assert [len(b["id"]) for b in r] == [300, 300, 300] and len(r) == 3
    forever = iter(tfspark.read_batches(path, 400, epochs=None, label_cols=[]))
    assert sum(len(next(forever)["id"]) for _ in range(10)) == 4000


def _reading_threads() -> list[str]:
    import threading
    return [t.name for t in threading.enumerate() if t.name.startswith("tfspark-")]


def test_close_and_with_end_the_reading_threads_as_with_processes(tmp_path):
    """Code written for processes=N (with / close()) runs unchanged without it."""
    import time

    batch, spec = _ids_table(1000)
    path = write_dir(str(tmp_path / "d"), batch, spec, 16, files=4)
    before = _reading_threads()
    tfspark.read_batches(path, 64).close()  # nothing iterated: nothing to end
    with tfspark.read_batches(path, 64, epochs=None, num_threads=2, seed=1) as reader:
        it = iter(reader)
        assert len(next(it)[1]) == 64
        assert len(_reading_threads()) > len(before)  # reading, and a window ahead
    for _ in range(100):  # joined as the iteration closes; allow for a straggler's exit
        if _reading_threads() == before:
            break
        time.sleep(0.1)
    assert _reading_threads() == before
    with pytest.raises(StopIteration):
        next(it)
    again = iter(reader)  # a closed reader reads again, as a new pass
    assert len(next(again)[1]) == 64
    reader.close()


def test_even_shards_cut_every_worker_to_the_smallest(tmp_path):
    batch, spec = _ids_table(1000)
    path = write_dir(str(tmp_path / "d"), batch, spec, 1, files=4)
    counts = [sum(len(y) for _, y in tfspark.read_batches(path, 50, shard=(3, k)))
              for k in range(3)]
    assert len(set(counts)) == 1 and counts[0] == 250  # 4 files of 250: shards of 500/250/250


def test_damage_is_named(tmp_path):
    batch, spec = _ids_table(300)
    path = write_dir(str(tmp_path / "d"), batch, spec, 1)
    f = os.path.join(path, "part-00000.tfrecord")
    data = bytearray(open(f, "rb").read())
    data[5000] ^= 0xFF
    open(f, "wb").write(bytes(data))
    with pytest.raises(CorruptRecordError, match=r"part-00000\.tfrecord.*offset \d+"):
        list(tfspark.read_batches(path, 64, num_threads=2))
    path2 = write_dir(str(tmp_path / "e"), batch, spec, 1)
    m = mf.read_manifest(path2)
    first = dataclasses.replace(m.files[0], records=m.files[0].records + 1)
    mf.write_manifest(locate(path2), dataclasses.replace(m, files=(first, *m.files[1:])))
    with pytest.raises(CorruptRecordError, match=r"holds 300 rows.*lists 301"):
        list(tfspark.read_batches(path2, 64))


def test_keras_fit_on_a_generator(tmp_path):
    keras = pytest.importorskip("keras")
    batch, spec = _ids_table(512)
    batch = pa.RecordBatch.from_pydict({"id": batch.column("id"),
                                        "x": batch.column("x").fill_null(0.0)})
    schema = T.StructType([T.StructField("id", T.LongType(), False),
                           T.StructField("x", T.DoubleType(), False)])
    spec = tfspark.infer_spec(schema, label_cols=["id"])
    path = write_dir(str(tmp_path / "d"), batch, spec, 32)
    reader = tfspark.read_batches(path, 64, epochs=None)
    inputs = {"x": keras.Input(shape=(), name="x", dtype="float32")}
    out = keras.layers.Dense(1)(keras.layers.Reshape((1,))(inputs["x"]))
    model = keras.Model(inputs, out)
    model.compile(optimizer="sgd", loss="mse")
    hist = model.fit(iter(reader), steps_per_epoch=reader.steps_per_epoch(), epochs=2,
                     verbose=0)
    assert len(hist.history["loss"]) == 2 and reader.steps_per_epoch() == 8


def test_torch_dataset_shards_over_workers(tmp_path):
    torch = pytest.importorskip("torch")
    from tfspark.numpy.frameworks import torch_dataset

    batch, spec = _ids_table(500)
    path = write_dir(str(tmp_path / "d"), batch, spec, 8, files=4)
    # spawn: how macOS and Windows start workers; the dataset travels to them pickled.
    for context in ("forkserver", "spawn"):
        loader = torch.utils.data.DataLoader(torch_dataset(path, 50), batch_size=None,
                                             num_workers=2, **worker_options(context))
        ids = [int(i) for _, y in loader for i in y]
        assert sorted(ids) == list(range(500)), context


def test_torch_workers_yield_every_row_once_on_uneven_block_files(tmp_path):
    """DataLoader workers of one process split its rows; even_shards
    (the default) must not cut them as if they were training ranks."""
    torch = pytest.importorskip("torch")
    from tfspark.numpy.frameworks import torch_dataset

    batch, spec = _ids_table(1589)
    path = write_dir(str(tmp_path / "d"), batch, spec, 7, files=3)  # 530 + 530 + 529 rows
    one = write_dir(str(tmp_path / "one"), batch.slice(0, 103), spec, 7)  # fewer files
    for where, rows in ((path, 1589), (one, 103)):
        for workers in (2, 3):
            loader = torch.utils.data.DataLoader(torch_dataset(where, 50, epochs=2),
                                                 batch_size=None, num_workers=workers,
                                                 **worker_options())
            ids = sorted(int(i) for _, y in loader for i in y)
            assert ids == sorted(list(range(rows)) * 2), (where, workers)


@pytest.mark.tf
def test_even_shards_drop_the_same_rows_in_both_readers(tmp_path):
    """103 rows in blocks of 7 over 13 workers (every 13th block each): both readers keep
    the same rows of every worker, as many as the smallest worker has, say so, and their
    len() and cardinality match."""
    import warnings

    pytest.importorskip("tensorflow")
    batch, spec = _ids_table(103)
    for block, files in ((7, 1), (7, 3), (1, 2)):
        path = write_dir(str(tmp_path / f"d{block}-{files}"), batch, spec, block, files=files)
        kept: set[int] = set()
        sizes = set()
        for k in range(13):
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                reader = tfspark.read_batches(path, 4, shard=(13, k), shuffle_buffer=0,
                                              shuffle_files=False, num_threads=1, epochs=2)
            ours = [int(i) for _, y in reader for i in y]
            ds = tfspark.make_dataset(path, 4, shard=(13, k), shuffle_buffer=0,
                                      shuffle_files=False, deterministic=True, epochs=2)
            theirs = [int(i) for _, y in ds.as_numpy_iterator() for i in y]
            assert ours == theirs, (block, files, k)
            assert len(reader) == int(ds.cardinality()) == -(-len(ours) // 2 // 4) * 2
            assert ours[:len(ours) // 2] == ours[len(ours) // 2:]  # the same rows each epoch
            sizes.add(len(ours) // 2)
            kept |= set(ours)
            if reader.part.dropped:
                assert any(f"worker {k} of 13 reads" in str(w.message) and
                           f"({reader.part.dropped:,} dropped" in str(w.message)
                           for w in said)
        assert len(sizes) == 1 and len(kept) == 13 * sizes.pop(), (block, files)
    few = write_dir(str(tmp_path / "few"), batch, spec, 16)  # 7 blocks for 13 workers
    for read in (tfspark.read_batches, tfspark.make_dataset):
        with pytest.raises(tfspark.OptionError, match=r"some of the 13 workers get no rows"):
            read(few, 4, shard=(13, 3))


@pytest.mark.tf
@pytest.mark.parametrize("block", [1, 16])
def test_columns_read_a_few_features_of_either_layout_in_both_readers(tmp_path, block):
    batch, spec = _ids_table(300)
    path = write_dir(str(tmp_path / "d"), batch, spec, block, files=3)
    whole = [b for b in tfspark.read_batches(path, 300, shuffle_buffer=0, num_threads=1,
                                             shuffle_files=False)]
    (x, y), = [b for b in tfspark.read_batches(path, 300, shuffle_buffer=0, num_threads=1,
                                               shuffle_files=False, columns=["v", "s"])]
    assert set(x) == {"v", "s"} and np.array_equal(y, whole[0][1])
    assert rows_np(x["v"]) == rows_np(whole[0][0]["v"])
    assert x["s"].tolist() == whole[0][0]["s"].tolist()
    (tx, ty), = list(tfspark.make_dataset(path, 300, shuffle_buffer=0, shuffle_files=False,
                                          deterministic=True, columns="x"))
    assert set(tx) == {"x"} and np.allclose(tx["x"].numpy(), whole[0][0]["x"])
    assert np.array_equal(ty.numpy(), y)
    with pytest.raises(tfspark.OptionError, match=r"columns \['nope'\] are not features.*'x'"):
        tfspark.read_batches(path, 4, columns=["x", "nope"])
    with pytest.raises(tfspark.OptionError, match="columns must be"):
        tfspark.make_dataset(path, 4, columns=[])


def test_bad_arguments(tmp_path):
    batch, spec = _ids_table(10)
    path = write_dir(str(tmp_path / "d"), batch, spec, 1)
    with pytest.raises(tfspark.OptionError, match="num_threads"):
        tfspark.read_batches(path, 4, num_threads=0)
    with pytest.raises(tfspark.OptionError, match="batch_size"):
        tfspark.read_batches(path, 0)
    with pytest.raises(tfspark.SchemaError, match="label"):
        tfspark.read_batches(path, 4, label_cols=["nope"])


# Run in a fresh interpreter: gc.collect() under tracemalloc walks every object of the
# process, and a test process holding TensorFlow, torch and JAX made this test take 2 minutes.
_HELD_PER_EPOCH = """
import gc, json, sys, time, tracemalloc
import tfspark

reader = tfspark.read_batches(sys.argv[1], 256, epochs=None, num_threads=2, seed=0)
steps = reader.steps_per_epoch()
it = iter(reader)

def settled():
    # What is held once the reader's threads have filled every bounded queue ahead of the
    # consumer and stopped (the same state after every epoch).
    last, same = -1, 0
    for _ in range(200):
        gc.collect()
        now = tracemalloc.get_traced_memory()[0]
        same = same + 1 if now == last else 0
        if same == 3:
            break
        last = now
        time.sleep(0.05)
    return now

tracemalloc.start()
held = []
for _ in range(8):
    for _ in range(steps):
        next(it)
    held.append(settled())
print(json.dumps(held))
"""


def test_memory_stays_flat_over_epochs(tmp_path):
    """What the reader holds between epochs does not grow (NumPy reports to tracemalloc)."""
    import json
    import subprocess
    import sys

    batch, spec = _ids_table(10_000)
    path = write_dir(str(tmp_path / "d"), batch, spec, 64, files=4)
    done = subprocess.run([sys.executable, "-c", _HELD_PER_EPOCH, path], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    held = json.loads(done.stdout.strip().splitlines()[-1])
    # Filled queues hold the same each epoch (within ~20 KB here): the last four epochs hold
    # no more than the first four did (one shuffle window kept per epoch adds ~40 KB each).
    assert max(held[4:]) <= max(held[:4]) + 128 * 2**10, held


def test_missing_and_damaged_gzip_files_are_named(tmp_path):
    """A gzip file whose record is damaged names the first damaged record (found again from
    the file's start); a file the manifest names that is gone says the data set is incomplete."""
    import gzip

    batch, spec = _ids_table(3000)
    path = write_dir(str(tmp_path / "g"), batch, spec, 1, files=2, compression="gzip")
    f = os.path.join(path, "part-00001.tfrecord.gz")
    raw = bytearray(gzip.decompress(open(f, "rb").read()))
    raw[len(raw) // 2] ^= 0xFF
    open(f, "wb").write(gzip.compress(bytes(raw)))
    with pytest.raises(CorruptRecordError, match=r"part-00001\.tfrecord\.gz: data CRC mismatch "
                                                 r".*at byte offset \d+ of the uncompressed"):
        list(tfspark.read_batches(path, 64, num_threads=2, shuffle_buffer=0))
    os.remove(f)
    with pytest.raises(FileNotFoundError, match=r"part-00001\.tfrecord\.gz' named for reading "
                                                r"does not exist; the data set is incomplete"):
        list(tfspark.read_batches(path, 64))


def test_files_gone_while_reading_say_what_happened(tmp_path):
    """An overwrite's sweep (or a user) removes the files a reader planned from: the file it
    opens next is named, with what to do, not pyarrow's "Failed to open local file". (Removed
    before its first batch: once it reads, it opens the next files ahead, and an open file
    stays readable on Linux, so how many fail depended on timing: a CI-like run saw none.)"""
    batch, spec = _ids_table(4000)
    path = write_dir(str(tmp_path / "g"), batch, spec, 1, files=4)
    reader = tfspark.read_batches(path, 100, num_threads=1, shuffle_buffer=0)  # (planned)
    for name in os.listdir(path):
        if name.startswith("part-"):
            os.remove(os.path.join(path, name))
    with pytest.raises(FileNotFoundError, match=r"part-\d+\.tfrecord: named for reading but it "
                                                r"does not exist: the data set was overwritten "
                                                r"since this reader began \(start a new reader\)"):
        list(reader)
