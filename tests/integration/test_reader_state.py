"""read_batches resumes exactly: a reader stopped after any batch, its
state_dict() saved as JSON and given to a new reader, yields exactly the batches the
uninterrupted iteration would have yielded, in both layouts, gzip or not, shuffled or not,
over epochs, shards, even shards and DataLoader-style worker parts; chunks small enough that
stops fall mid-file and mid-block. No Spark: the files are written by tfspark's encoders."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T
from test_numpy_reader import write_dir
from torchcheck import worker_options

import tfspark
from tfspark.errors import OptionError
from tfspark.numpy import batches as batches_module
from tfspark.numpy import interleave, units
from tfspark.wire import stream

ROWS = 311
pytestmark = pytest.mark.filterwarnings("ignore:even_shards")


def _table(n: int) -> tuple[pa.RecordBatch, object]:
    """id (the label), a float, a nullable string and a ragged int column with nulls."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 4, n)
    batch = pa.RecordBatch.from_pydict({
        "id": pa.array(np.arange(n)), "x": pa.array(rng.standard_normal(n)),
        "s": pa.array([None if i % 5 == 0 else f"s{i}" for i in range(n)]),
        "v": pa.array([None if i % 7 == 3 else [i] * int(k) for i, k in enumerate(lengths)],
                      pa.list_(pa.int64()))})
    schema = T.StructType([T.StructField("id", T.LongType(), False),
                           T.StructField("x", T.DoubleType()), T.StructField("s", T.StringType()),
                           T.StructField("v", T.ArrayType(T.LongType()))])
    return batch, tfspark.infer_spec(schema, label_cols=["id"])


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    batch, spec = _table(ROWS)
    root = tmp_path_factory.mktemp("state")
    return {
        "rows": write_dir(str(root / "rows"), batch, spec, 1, files=3),
        "blocks-gz": write_dir(str(root / "blocks"), batch, spec, 4, files=3,
                               compression="gzip"),
        "one-file": write_dir(str(root / "one"), batch, spec, 3),
        "blocks": write_dir(str(root / "plain-blocks"), batch, spec, 4, files=4),
    }


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of 16 rows: stops fall inside files and inside blocks, turns alternate; the
    global shuffle's units of 8 rows."""
    monkeypatch.setattr(batches_module, "_CHUNK_ROWS", 16)
    monkeypatch.setattr(units, "UNIT_ROWS", 8)


def _rows(batch) -> list:
    """A batch as plain values: every column, so any row out of place shows."""
    x, y = batch
    return [y.tolist(), x["x"].tolist(), x["s"].tolist(), x["v"].to_list()]


CASES = {
    "shuffled, 2 epochs": dict(batch_size=10, shuffle_buffer=40, seed=5, epochs=2,
                               num_threads=2),
    "file order": dict(batch_size=7, shuffle_buffer=0, shuffle_files=False, num_threads=1),
    "three slots, drop_remainder": dict(batch_size=9, shuffle_buffer=25, seed=1, epochs=2,
                                        num_threads=3, drop_remainder=True),
    "even shard of files": dict(batch_size=8, seed=2, epochs=2, shard=(2, 1), num_threads=2),
    "even shard by records": dict(batch_size=6, seed=4, epochs=2, shard=(3, 2)),
    "unseeded": dict(batch_size=11, epochs=2, num_threads=2),
}
GLOBAL = {
    "global": dict(batch_size=10, shuffle_buffer=30, seed=5, epochs=2, num_threads=2,
                   shuffle="global"),
    "global, even shards": dict(batch_size=7, seed=3, epochs=2, shard=(3, 1),
                                shuffle="global"),
}


@pytest.mark.parametrize("layout, case", [(layout, case) for layout in ("rows", "blocks-gz",
                                                                         "one-file")
                                          for case in CASES] +
                         [(layout, case) for layout in ("rows", "blocks", "one-file")
                          for case in GLOBAL])
def test_resume_after_every_batch_gives_the_rest(data, layout, case):
    kw = {**CASES, **GLOBAL}[case]
    if "shard" in kw and layout == "one-file" and kw["shard"][0] == 2:
        kw = {**kw, "shard": (2, 0)}
    _resumes_exactly(data[layout], kw)


@pytest.mark.parametrize("layout", ["rows", "blocks-gz"])
def test_resume_without_shuffle_where_reads_cut_chunks_into_pieces(data, layout, monkeypatch):
    """Reads of 200 bytes: a turn's chunk comes in several pieces, and batches are cut from
    them as they come (no shuffle), some taking rows of two pieces."""
    monkeypatch.setattr(stream, "CHUNK_BYTES", 200)
    _resumes_exactly(data[layout], dict(batch_size=7, shuffle_buffer=0, seed=3, epochs=2,
                                        num_threads=2))


def _resumes_exactly(path: str, kw: dict) -> None:
    """A reader stopped after each batch (every third of a long epoch) and resumed from its
    state yields the rest of the uninterrupted iteration."""
    full = tfspark.read_batches(path, **kw)
    it = iter(full)
    want = [_rows(b) for b in it]
    # the whole iteration's state, saved before it began, replays it all
    if kw.get("seed") is not None:
        assert [_rows(b) for b in tfspark.read_batches(path, **kw)] == want
    stops = sorted(set(range(0, len(want) + 1, 1 if len(want) < 40 else 3)) | {len(want)})
    for stop in stops:
        reader = tfspark.read_batches(path, **kw)
        if kw.get("seed") is None:  # unseeded: the saved seed is what makes it repeatable
            reader.load_state_dict(json.loads(json.dumps(full.state_dict())) | {
                "epoch": 0, "window": 0, "taken": 0, "turns": None, "batches": 0})
        it = iter(reader)
        got = [_rows(next(it)) for _ in range(stop)]
        saved = json.loads(json.dumps(reader.state_dict()))
        it.close()
        rest = [_rows(b) for b in tfspark.read_batches(path, **kw, state=saved)]
        assert got + rest == want, (stop, len(got), len(rest))
        assert saved["batches"] == stop


def test_every_row_once_per_epoch_and_a_new_shuffle_per_pass(data):
    reader = tfspark.read_batches(data["blocks-gz"], 10, seed=7, epochs=2, num_threads=2)
    first = [int(i) for _, y in reader for i in y]
    second = [int(i) for _, y in reader for i in y]
    assert sorted(first[:ROWS]) == sorted(first[ROWS:]) == list(range(ROWS))
    assert first != second  # each pass over the reader shuffles anew ...
    again = tfspark.read_batches(data["blocks-gz"], 10, seed=7, epochs=2, num_threads=2)
    assert [int(i) for _, y in again for i in y] == first  # ... the same in every run


def test_a_resumed_reader_shuffles_its_next_passes_as_the_saved_run(data):
    """A state given back without the seed: the rest of the pass and the passes after it are
    those of the run that saved it (the seed the state was saved with draws them)."""
    path = data["rows"]
    run = tfspark.read_batches(path, 10, seed=5)
    want = [[_rows(b) for b in run] for _ in range(2)]
    reader = tfspark.read_batches(path, 10, seed=5)
    it = iter(reader)
    got = [_rows(next(it)) for _ in range(7)]
    saved = json.loads(json.dumps(reader.state_dict()))
    it.close()
    again = tfspark.read_batches(path, 10, state=saved)
    assert [got + [_rows(b) for b in again], [_rows(b) for b in again]] == want


def test_worker_parts_resume(data):
    """A DataLoader worker's part (for_worker) has a state of its own."""
    for path in (data["rows"], data["one-file"]):
        part = tfspark.read_batches(path, 5, seed=3, epochs=2).for_worker(2, 1)
        want = [_rows(b) for b in part]
        part = tfspark.read_batches(path, 5, seed=3, epochs=2).for_worker(2, 1)
        it = iter(part)
        got = [_rows(next(it)) for _ in range(len(want) // 2)]
        saved = part.state_dict()
        it.close()
        again = tfspark.read_batches(path, 5, seed=3, epochs=2).for_worker(2, 1)
        again.load_state_dict(saved)
        assert got + [_rows(b) for b in again] == want


def test_a_state_of_other_batches_is_refused(data):
    reader = tfspark.read_batches(data["rows"], 10, seed=1)
    next(iter(reader))
    saved = reader.state_dict()
    with pytest.raises(OptionError, match=r"batch_size=10 there, 12 here"):
        tfspark.read_batches(data["rows"], 12, seed=1, state=saved)
    with pytest.raises(OptionError, match=r"shuffle_buffer=100 there, 5 here"):
        tfspark.read_batches(data["rows"], 10, seed=1, shuffle_buffer=5, state=saved)
    with pytest.raises(OptionError, match="files or the shard differ"):
        tfspark.read_batches(data["blocks-gz"], 10, seed=1, state=saved)
    with pytest.raises(OptionError, match="not a read_batches state"):
        tfspark.read_batches(data["rows"], 10, state={"epoch": 1})
    with pytest.raises(OptionError, match="damaged"):
        tfspark.read_batches(data["rows"], 10, seed=1, state={**saved, "epoch": "x"})
    # num_threads shapes the order: a state's count is taken when none is given
    assert saved["settings"]["num_threads"] == tfspark.read_batches(
        data["rows"], 10, seed=1, state=saved).num_threads
    with pytest.raises(OptionError, match="num_threads="):
        tfspark.read_batches(data["rows"], 10, seed=1, num_threads=saved["settings"][
            "num_threads"] + 1, state=saved)
    # the seed draws the next passes' shuffles: another one is refused, none takes the state's
    with pytest.raises(OptionError, match=r"seed=1 there, 2 here"):
        tfspark.read_batches(data["rows"], 10, seed=2, state=saved)
    assert tfspark.read_batches(data["rows"], 10, state=saved).seed == 1


@pytest.mark.parametrize("change,named", [
    (dict(window=-1), "window must be a whole number >= 0, got -1"),
    (dict(taken=-3), "taken must be a whole number >= 0"),
    (dict(epoch=True), "epoch must be a whole number >= 0, got True"),
    (dict(seed=1.5), "seed must be a whole number"),
    (dict(iteration=0), "iteration must be a whole number >= 1"),
    (dict(epoch=9), "epoch 9 is past its 2 epochs"),
    (dict(settings=None), "settings must be a dict"),
    (dict(turns="junk"), "turns must be a dict with a list of slots"),
    (dict(turns={"turn": 0, "slots": [[0]]}), "turns has 1 slots but its num_threads is 2"),
    (dict(turns={"turn": 7, "slots": [[0], [0]]}), r"turn must be a slot's number \(0..1\)"),
    (dict(turns={"turn": 0, "slots": [[0, -1], None]}), "slot 0 of turns must be null or"),
    (dict(turns={"turn": 0, "slots": [[99], [0]]}), "slot 0 of turns is at file 99 of its 2"),
    (dict(taken=10**12), "taken=1000000000000, but window 0 of epoch 0 holds"),
])
def test_a_damaged_state_is_one_option_error_naming_what_is_wrong(data, change, named):
    """A state is user input: a field out of range or of the wrong type, or turns that do not
    fit, is refused in tfspark's words; it never raises Python's own errors or skips rows."""
    reader = tfspark.read_batches(data["rows"], 10, seed=1, epochs=2, num_threads=2)
    it = iter(reader)
    next(it)
    saved = reader.state_dict()
    it.close()
    assert saved["window"] == 0  # (the window `taken` is checked against)
    damaged = {**saved, **change}
    with pytest.raises(OptionError, match=f"damaged read_batches state.*{named}"):
        list(tfspark.read_batches(data["rows"], 10, seed=1, epochs=2, num_threads=2,
                                  state=damaged))


def test_a_file_changed_under_a_gzip_state_is_named(data, tmp_path):
    """Resuming inside a gzip file skips its uncompressed bytes; a shorter file says so."""
    import shutil

    copy = str(tmp_path / "copy")
    shutil.copytree(data["blocks-gz"], copy)
    reader = tfspark.read_batches(copy, 10, shuffle_buffer=0, shuffle_files=False,
                                  num_threads=1)
    it = iter(reader)
    for _ in range(5):
        next(it)
    saved = reader.state_dict()
    it.close()
    at = saved["turns"]["slots"][0]
    assert at[1] > 0 and at[2] > 0  # mid-file: a record and byte offset
    import gzip
    import os

    name = sorted(n for n in os.listdir(copy) if n.endswith(".gz"))[0]
    with gzip.open(os.path.join(copy, name), "wb") as f:
        f.write(b"")
    with pytest.raises(tfspark.CorruptRecordError, match=name):
        list(tfspark.read_batches(copy, 10, shuffle_buffer=0, shuffle_files=False,
                                  num_threads=1, state=saved))


def test_positions_are_json_lists():
    assert list(interleave.Position(1, 2, 3, 4)) == [1, 2, 3, 4]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_dataloader_resumes_exactly(data, workers):
    """torchdata's StatefulDataLoader saves torch_dataset's state (each worker's part) and a
    new loader given it yields exactly the rest."""
    pytest.importorskip("torch")
    loaders = pytest.importorskip("torchdata.stateful_dataloader")
    from tfspark.numpy.frameworks import torch_dataset

    def loader():
        return loaders.StatefulDataLoader(
            torch_dataset(data["blocks-gz"], 10, seed=4, epochs=2), batch_size=None,
            num_workers=workers, **(worker_options() if workers else {}))

    def ids(batch) -> list[int]:
        return batch[1].tolist()

    want = [ids(b) for b in loader()]
    assert sorted(i for b in want for i in b) == sorted(list(range(ROWS)) * 2)
    for stop in (1, len(want) // 2, len(want) - 1):
        first = loader()
        it = iter(first)
        got = [ids(next(it)) for _ in range(stop)]
        saved = first.state_dict()
        del it
        again = loader()
        again.load_state_dict(saved)
        assert got + [ids(b) for b in again] == want, stop


def test_a_grain_pipeline_checkpoints_and_resumes_exactly(data):
    """grain_dataset under a Grain map: the pipeline's iterator state (get_state, as Grain's
    and orbax's checkpoints save it) is the reader's, and set_state resumes exactly."""
    pytest.importorskip("grain")
    ds = tfspark.grain_dataset(data["rows"], 10, seed=2, epochs=2).map(
        lambda b: (b[0]["x"], b[1]))

    def ids(batch) -> list[int]:
        return batch[1].tolist()

    want = [ids(b) for b in ds]
    assert sorted(i for b in want for i in b) == sorted(list(range(ROWS)) * 2)
    for stop in (0, 1, 17, len(want)):
        it = iter(ds)
        got = [ids(next(it)) for _ in range(stop)]
        saved = json.loads(json.dumps(it.get_state()))
        again = iter(ds)
        again.set_state(saved)
        assert got + [ids(b) for b in again] == want, stop


def test_grain_worker_processes_read_every_row_once_and_resume_exactly(data):
    """Under Grain's multiprocess prefetch (worker processes started by spawn, the dataset
    pickled into each, each given its slice) every row comes once per epoch, and the
    pipeline's state (each worker's reader state) resumes it exactly."""
    grain = pytest.importorskip("grain")

    def pipeline():
        return tfspark.grain_dataset(data["blocks"], 10, seed=3, epochs=2).mp_prefetch(
            grain.MultiprocessingOptions(num_workers=2))

    def ids(batch) -> list[int]:
        return batch[1].tolist()

    want = [ids(b) for b in pipeline()]
    assert sorted(i for b in want for i in b) == sorted(list(range(ROWS)) * 2)
    # Each batch is one worker's: its rows all in that worker's part of the data set.
    parts = [{int(i) for _, y in tfspark.read_batches(data["blocks"], 10).for_worker(2, k)
              for i in y} for k in (0, 1)]
    assert not parts[0] & parts[1] and parts[0] | parts[1] == set(range(ROWS))
    assert {next(k for k in (0, 1) if set(b) <= parts[k]) for b in want} == {0, 1}
    stop = len(want) // 2
    it = iter(pipeline())
    got = [ids(next(it)) for _ in range(stop)]
    saved = json.loads(json.dumps(it.get_state()))
    del it
    again = iter(pipeline())
    again.set_state(saved)
    assert got + [ids(b) for b in again] == want


@pytest.mark.parametrize("framework", ["torch", "grain"])
def test_the_loaders_name_a_bad_argument_when_made(data, framework):
    """torch_dataset and grain_dataset read in their loaders' workers: a column, split or
    option that is wrong is named by one line where the dataset is made, not by a worker's
    traceback once the loader runs. Reading processes are not started for the check."""
    pytest.importorskip(framework)
    make = getattr(tfspark, f"{framework}_dataset")
    with pytest.raises(OptionError, match=r"columns \['nope'\] are not features"):
        make(data["rows"], 10, columns=["nope"])
    with pytest.raises(OptionError, match="shuffle_buffer"):
        make(data["rows"], 10, shuffle_buffer=-1, processes=2)
    made = make(data["rows"], 10, processes=2)  # the check starts no reading process
    assert type(made).__name__ in ("TorchBatches", "GrainBatches")
    assert made.kwargs == {"processes": 2}


@pytest.mark.parametrize("layout", ["rows", "blocks", "one-file"])
def test_the_global_shuffle_reads_every_row_once_from_all_over(data, layout):
    """Each epoch every row once, in a new order; a batch's rows come from all over the
    data set (the window shuffle's from the files being read)."""
    path = data[layout]
    reader = tfspark.read_batches(path, 20, seed=1, epochs=2, shuffle="global",
                                  shuffle_buffer=40, num_threads=1)
    ids = [int(i) for _, y in reader for i in y]
    assert sorted(ids[:ROWS]) == sorted(ids[ROWS:]) == list(range(ROWS))
    assert ids[:ROWS] != ids[ROWS:]
    window = tfspark.read_batches(path, 20, seed=1, shuffle_buffer=40, num_threads=1)
    first = [int(i) for i in next(iter(window))[1]]
    spread = [int(i) for i in next(iter(tfspark.read_batches(
        path, 20, seed=1, shuffle="global", shuffle_buffer=40, num_threads=1)))[1]]
    assert max(first) - min(first) < 110  # one file's first rows (the files hold ~104)
    assert max(spread) - min(spread) > 150  # units from across the files
    # worker parts of a global shuffle cover the rows once between them
    parts = [tfspark.read_batches(path, 9, seed=2, shuffle="global").for_worker(2, k)
             for k in (0, 1)]
    assert sorted(int(i) for p in parts for _, y in p for i in y) == list(range(ROWS))
    # shards: disjoint and together everything; even shards as many rows each, the same
    # rows as the window shuffle keeps
    shards = [[int(i) for _, y in tfspark.read_batches(path, 9, seed=2, shuffle="global",
                                                        shard=(3, k), even_shards=False)
               for i in y] for k in range(3)]
    assert sorted(i for part in shards for i in part) == list(range(ROWS))
    for k in range(3):
        even = [int(i) for _, y in tfspark.read_batches(path, 9, seed=2, shuffle="global",
                                                         shard=(3, k)) for i in y]
        kept = [int(i) for _, y in tfspark.read_batches(path, 9, seed=2, shard=(3, k))
                for i in y]
        assert sorted(even) == sorted(kept), k


def test_the_global_shuffle_refuses_gzip_files(data):
    with pytest.raises(OptionError, match=r"shuffle='global'.*is gzip.*without compression"):
        tfspark.read_batches(data["blocks-gz"], 10, shuffle="global")
    with pytest.raises(OptionError, match=r"shuffle must be one of \['window', 'global'\]"):
        tfspark.read_batches(data["rows"], 10, shuffle="everything")


@pytest.mark.parametrize("bench_batches", [3, 1000])
def test_the_train_jobs_input_bench_leaves_the_reader_where_it_was(data, bench_batches):
    """`tfspark train` measures its input pipeline on the reader it then trains from (part of
    an epoch, or all of it when the data ends first): the batches after it are a fresh
    reader's, and the rate counts the rows of a Ragged column by its row splits."""
    from tfspark.cli.train import _input_rate

    def reader() -> object:
        return tfspark.read_batches(data["rows"], 10, label_cols=["id"], seed=3,
                                    shuffle_buffer=50, columns=["v", "x"])

    measured, fresh = reader(), reader()
    assert _input_rate(measured, bench_batches) > 0
    for (a, ya), (b, yb) in zip(measured, fresh, strict=True):
        np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(a["x"], b["x"])


def test_a_loader_resumed_with_another_number_of_workers_says_so(data):
    """Each worker's state is where its part of the data is: a state of 2 workers given to a
    loader of 3 (or of none) is refused in tfspark's words, not torchdata's bare
    AssertionError at the next iteration; the same count resumes exactly."""
    pytest.importorskip("torchdata.stateful_dataloader")
    from tfspark.errors import StateMismatch
    from tfspark.numpy.frameworks import torch_dataset

    def loader(workers: int):
        return torch_dataset(data["rows"], 10, seed=4).loader(
            num_workers=workers, **(worker_options() if workers else {}))

    want = [b[1].tolist() for b in loader(2)]
    first = loader(2)
    it = iter(first)
    got = [next(it)[1].tolist() for _ in range(3)]
    saved = first.state_dict()
    del it
    for other in (3, 0):
        with pytest.raises(StateMismatch, match=f"saved by a DataLoader with num_workers=2, "
                                                f"and this one has {other}: .* resume with "
                                                f"num_workers=2"):
            loader(other).load_state_dict(saved)
    again = loader(2)
    again.load_state_dict(saved)
    assert got + [b[1].tolist() for b in again] == want
    with pytest.raises(OptionError, match="leave batch_size out"):
        torch_dataset(data["rows"], 10).loader(batch_size=4)


def test_the_frameworks_readers_say_their_vocabularies(data):
    """A PyTorch or Grain user sizes an Embedding from the reader's vocabularies, as a
    read_batches user does (they were found only with dir() on a reader inside)."""
    pytest.importorskip("torch")
    from tfspark.numpy.frameworks import grain_dataset, torch_dataset

    ids = dict(strings="ids", vocabulary={"s": ["s1", "s2"]})
    want = tfspark.read_batches(data["rows"], 10, **ids).vocabularies
    assert want and torch_dataset(data["rows"], 10, **ids).vocabularies == want
    pytest.importorskip("grain")
    assert grain_dataset(data["rows"], 10, **ids).vocabularies == want
    assert torch_dataset(data["rows"], 10).vocabularies is None
