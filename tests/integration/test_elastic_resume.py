"""Resuming on another number of workers: read_batches(..., shard=(m, j), state=[every old
worker's state]). Against uninterrupted runs: the rows the old workers yielded in the
interrupted epoch plus the rows the new ones yield in it are that epoch's rows, each exactly
once; the epochs after are, batch for batch, those of a run begun on m workers with the same
seed. Row and block layouts, window and global shuffle, stops mid-window, mid-file and
mid-block, more and fewer workers, fewer files than workers; a state saved in the resumed
epoch resumes it again. Written with write_dataset: no Spark."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

import tfspark
from tfspark.errors import OptionError

ROWS, BATCH, SEED = 700, 16, 7


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("elastic")
    table = pa.table({"id": pa.array(np.arange(ROWS)), "x": pa.array(np.arange(ROWS) * 0.5),
                      "s": pa.array([f"v{i % 17}" for i in range(ROWS)])})
    out = {}
    for name, kw in {"rows": {"max_records_per_file": 100},
                     "blocks": {"max_records_per_file": 100, "rows_per_record": 8},
                     "two_files": {"max_records_per_file": 350}}.items():
        out[name] = str(root / name)
        tfspark.write_dataset(table, out[name], **kw)
    return out


def reader(path, shard, **kw):
    kw = {"seed": SEED, "epochs": 2, "shuffle_buffer": 48, **kw}
    return tfspark.read_batches(path, BATCH, shard=shard, **kw)


def by_epoch(r) -> dict[int, list[list[int]]]:
    """Each batch's ids, by the epoch the reader's state says it belongs to."""
    out: dict[int, list[list[int]]] = {}
    for features in r:
        out.setdefault(r.state_dict()["epoch"], []).append(features["id"].tolist())
    return out


def rows_of(batches) -> Counter:
    return Counter(i for b in batches for i in b)


def interrupted(path, n, stops, **kw):
    """The old workers' rows of epoch 0 up to their stops, and their states."""
    seen, states = Counter(), []
    for i in range(n):
        r = reader(path, (n, i), **kw)
        it = iter(r)
        for _ in range(stops[i]):
            seen.update(_ids(next(it)))
        states.append(r.state_dict())
        r.close()
    return seen, states


def _ids(batch) -> list[int]:
    return batch["id"].tolist()


CASES = [(n, m) for n in (1, 2, 3, 4) for m in (1, 2, 3, 5)]


@pytest.mark.parametrize("n,m", CASES, ids=[f"{n}to{m}" for n, m in CASES])
def test_window_shuffle_row_layout(data, n, m):
    check(data["rows"], n, m)


@pytest.mark.parametrize("n,m", [(2, 3), (4, 3), (1, 5), (3, 2)])
def test_every_row_without_even_shards(data, n, m):
    check(data["rows"], n, m, even_shards=False)
    check(data["blocks"], n, m, even_shards=False, shuffle="global")


@pytest.mark.parametrize("n,m", [(2, 3), (3, 1), (4, 5), (1, 2)])
def test_block_layout_stops_mid_block(data, n, m):
    check(data["blocks"], n, m)


@pytest.mark.parametrize("n,m", [(2, 3), (3, 2), (1, 5), (4, 1)])
def test_global_shuffle(data, n, m):
    check(data["rows"], n, m, shuffle="global")
    check(data["blocks"], n, m, shuffle="global")


@pytest.mark.parametrize("n,m", [(3, 2), (2, 5)])
def test_fewer_files_than_workers(data, n, m):
    check(data["two_files"], n, m)


def check(path, n, m, **kw):
    even = kw.get("even_shards", True)
    if not even:  # uneven shards' batches run on across epochs: one epoch is read
        kw = {**kw, "epochs": 1}
    full, stops = Counter(), []
    for i in range(n):  # what an uninterrupted run on n workers reads in epoch 0
        own = rows_of(by_epoch(reader(path, (n, i), **{**kw, "epochs": 1})).get(0, []))
        full += own
        stops.append(max(1, (sum(own.values()) // BATCH * (i + 1)) // (n + 1)))  # mid-window
    seen, states = interrupted(path, n, stops, **kw)
    rest, later, shares = Counter(), [], []
    for j in range(m):
        r = reader(path, (m, j), state=states, **kw)
        steps = r.resumed_steps()  # (known before reading: a training loop's steps)
        got = by_epoch(r)
        assert steps == (len(got.get(0, [])) if even else None), (steps, j)
        mine = rows_of(got.get(0, []))
        shares.append(sum(mine.values()))
        rest += mine
        later.append(got.get(1, []))
    assert sum(full.values()) >= ROWS // 2 and seen and rest  # (evened: some rows cut)
    assert max((seen + rest).values()) == 1 and not (seen + rest) - full
    left_out = sum((full - seen - rest).values())
    if not even:  # every row; the shares differ by one row at most
        assert left_out == 0 and max(shares) - min(shares) <= 1, (shares, left_out)
        return
    assert len(set(shares)) == 1 and left_out < m, (shares, left_out)  # what does not divide
    for j in range(m):  # the next epoch: as a run begun on m workers
        fresh = by_epoch(reader(path, (m, j), **kw))
        assert later[j] == fresh.get(1, []) and later[j], j


def test_a_state_saved_in_the_resumed_epoch_resumes_it_again(data):
    path, n, m = data["rows"], 3, 2
    seen, states = interrupted(path, n, [3, 5, 4])
    full = Counter()
    for i in range(n):
        full += rows_of(by_epoch(reader(path, (n, i), epochs=1)).get(0, []))
    rest = Counter()
    for j in range(m):
        r = reader(path, (m, j), state=states)
        it = iter(r)
        for _ in range(4):
            rest.update(_ids(next(it)))
        again = r.state_dict()
        assert again["elastic"]["workers"] == m and again["epoch"] == 0
        r.close()
        r2 = reader(path, (m, j), state=again)
        left = r2.resumed_steps()
        got = by_epoch(r2).get(0, [])
        assert left == len(got) and left, (left, len(got))
        rest += rows_of(got)
        with pytest.raises(OptionError, match=r"saved by worker \d of 2 while resuming on that "
                           r"many workers; this reader is shard=\(3, 0\)"):
            reader(path, (3, 0), state=again)
    assert seen + rest == full and max((seen + rest).values()) == 1


def test_states_at_the_end_of_a_resumed_epoch_resume_on_yet_another_number(data):
    """2 workers interrupted, 3 resume and finish that epoch, their states then go on 4:
    nothing of the epoch is read again, the next is as a run begun on 4 workers."""
    path = data["rows"]
    _, states = interrupted(path, 2, [2, 3])
    ends, mids = [], []
    for j in range(3):
        r = reader(path, (3, j), state=states)
        steps = r.resumed_steps()
        it = iter(r)
        next(it)
        mids.append(r.state_dict())
        for _ in range(steps - 1):
            next(it)
        ends.append(r.state_dict())
        r.close()
    for j in range(4):
        got = by_epoch(reader(path, (4, j), state=ends))
        assert 0 not in got and got[1] == by_epoch(reader(path, (4, j)))[1], j
    with pytest.raises(OptionError, match=r"saved while a run resumed on another number of "
                       r"workers, mid-epoch 0; resume them with shard=\(3, \.\.\.\)"):
        reader(path, (4, 0), state=mids)


def test_a_checkpoint_saved_part_way_through_a_taken_over_epoch_names_its_workers(data):
    """What resumable_fit (tfspark train) says of one: in the terms of a training run."""
    from tfspark.keras.fitting import Feed, _load

    path = data["rows"]
    _, states = interrupted(path, 2, [2, 3])
    mids = []
    for j in range(3):
        r = reader(path, (3, j), state=states)
        next(iter(r))
        mids.append(r.state_dict())
        r.close()
    with pytest.raises(OptionError, match=r"checkpoint 'ck' was saved by 3 workers part-way "
                       r"through an epoch they took over from a run on another number of "
                       r"workers: resume it on 3 workers \(tfspark train --workers 3\) until "
                       r"that epoch ends, then on any number"):
        _load(Feed(reader(path, (2, 0))), mids, "ck", "dir", 0, 2)


def test_the_same_global_batch_on_another_number_of_workers(data):
    """A run on m workers with the global batch of one on n: another per-worker batch and
    shuffle buffer (their default, ten batches) resume the epoch, in equal steps."""
    path, n, m = data["rows"], 2, 4
    seen, states = Counter(), []
    for i in range(n):
        r = tfspark.read_batches(path, 32, shard=(n, i), seed=SEED, epochs=2)
        it = iter(r)
        for _ in range(3):
            seen.update(_ids(next(it)))
        states.append(r.state_dict())
    steps, rest = set(), Counter()
    for j in range(m):
        r = tfspark.read_batches(path, 16, shard=(m, j), seed=SEED, epochs=2, state=states)
        got = by_epoch(r)[0]
        steps.add(len(got))
        rest += rows_of(got)
    assert len(steps) == 1  # every new worker takes as many steps
    # even shards: 300 rows per old worker (files of 100 rows); the 408 left divide by 4
    assert sum((seen + rest).values()) == 600 and max((seen + rest).values()) == 1


def test_states_that_cannot_resume_say_why(data):
    path = data["rows"]
    _, states = interrupted(path, 2, [2, 3])
    with pytest.raises(OptionError, match="is not the state of worker 0 of 2 of this data "
                       "set"):
        reader(path, (3, 0), state=[states[1], states[0]])
    with pytest.raises(OptionError, match=r"worker 0 of 2 read with other settings "
                       r"\(strings='object' there, 'bytes' here\)"):
        reader(path, (3, 0), state=states, strings="bytes")
    with pytest.raises(OptionError, match="is read in this process: leave processes out"):
        reader(path, (3, 0), state=states, processes=2)
    with pytest.raises(OptionError, match=r"2 workers' states resume on shard=\(m, j\)"):
        tfspark.read_batches(path, BATCH, seed=SEED, epochs=2, shuffle_buffer=48,
                             state=states)
    late = reader(path, (2, 0))
    it = iter(late)
    for _ in range(25):  # into epoch 1
        next(it)
    with pytest.raises(OptionError, match=r"in different epochs \(\[0, 1\]\)"):
        reader(path, (3, 0), state=[late.state_dict(), states[1]])


def test_torch_and_grain_resume_on_another_number_of_workers(data):
    pytest.importorskip("torch")
    pytest.importorskip("grain")
    path = data["rows"]
    _, states = interrupted(path, 3, [2, 4, 3])
    kw = {"seed": SEED, "epochs": 2, "shuffle_buffer": 48}
    for j in range(2):
        want = [_ids(b) for b in reader(path, (2, j), state=states)]
        torch_ids = [b["id"].tolist() for b in
                     tfspark.torch_dataset(path, BATCH, shard=(2, j), state=states, **kw)]
        grain_ids = [b["id"].tolist() for b in
                     tfspark.grain_dataset(path, BATCH, shard=(2, j), state=states, **kw)]
        assert torch_ids == want and grain_ids == want and want


def test_loaders_with_worker_processes_resume_on_another_number_of_workers(data):
    """Two ranks, each a StatefulDataLoader of 2 workers, continue 3 workers' epoch: each
    loader worker takes an equal share (1/4 of the rest), every row once; a loader's state
    saved in that epoch resumes it in a new loader. Grain's worker processes the same."""
    pytest.importorskip("torchdata")
    path = data["rows"]
    seen, states = interrupted(path, 3, [2, 4, 3], epochs=1)
    full = Counter()
    for i in range(3):
        full += rows_of(by_epoch(reader(path, (3, i), epochs=1)).get(0, []))
    kw = {"seed": SEED, "epochs": 1, "shuffle_buffer": 48}
    rest, sizes = Counter(), []
    for j in range(2):
        ds = tfspark.torch_dataset(path, BATCH, shard=(2, j), state=states, **kw)
        loader = ds.loader(num_workers=2, multiprocessing_context="forkserver")
        with pytest.raises(OptionError, match=r"read by its loader's 2 worker processes, so "
                           r"its own state is not where they are: save the loader's"):
            ds.state_dict()  # (it would say: from the start)
        it = iter(loader)
        first = [next(it)["id"].tolist() for _ in range(3)]
        saved = loader.state_dict()
        del it
        again = tfspark.torch_dataset(path, BATCH, shard=(2, j), **kw).loader(
            num_workers=2, multiprocessing_context="forkserver")
        again.load_state_dict(saved)
        got = first + [b["id"].tolist() for b in again]
        sizes.append(sum(len(b) for b in got))
        rest += rows_of(got)
    assert max((seen + rest).values()) == 1 and not (seen + rest) - full
    assert sizes[0] == sizes[1] and sum((full - seen - rest).values()) < 4, sizes
    grain = pytest.importorskip("grain")
    rest = Counter()
    for j in range(2):  # Grain's worker processes, the same way
        pipeline = tfspark.grain_dataset(path, BATCH, shard=(2, j), state=states, **kw)
        rest += rows_of(b["id"].tolist() for b in pipeline.mp_prefetch(
            grain.MultiprocessingOptions(num_workers=2)))
    assert max((seen + rest).values()) == 1 and not (seen + rest) - full
    assert sum((full - seen - rest).values()) < 4
