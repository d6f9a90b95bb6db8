"""The write tasks' statistics (their FeatureSketches) on Arrow batches, without Spark: what several
tasks gather merges into the statistics of all their rows, exact where the module says so and
within the recorded error where it estimates (KLL deciles, HLL distinct counts)."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

from tfspark.spec import Feature, FeatureSpec
from tfspark.store.stats import rules
from tfspark.store.stats.sketch import TaskStats, merge

SPEC = FeatureSpec((
    Feature("s", ("s",), "fixed", "string", "bytes", "string"),
    Feature("n", ("n",), "fixed", "int64", "int", "bigint"),
    Feature("x", ("x",), "fixed", "float32", "float", "double"),
))


def _tasks(columns_per_task, top_k, splits=None):
    """Each task's result as the commit message carries it (pickled), then merged."""
    parts = []
    for t, cols in enumerate(columns_per_task):
        st = TaskStats(SPEC, top_k)
        for lo in range(0, len(cols["x"]), 10_000):  # batches, as a task sees them
            batch = pa.record_batch({k: pa.array(v[lo:lo + 10_000]) for k, v in cols.items()})
            st.add(splits[t] if splits else None, batch)
        parts.append(pickle.loads(pickle.dumps(st.result())))
    return merge(parts, SPEC, top_k, "split" if splits else None)


def _columns(rng, n, strings, ints):
    return {"s": [f"v{int(i)}" for i in rng.integers(0, strings, n)],
            "n": rng.integers(0, ints, n).tolist(), "x": rng.normal(size=n).tolist()}


def test_past_the_cap_distinct_counts_are_estimated_within_the_recorded_error():
    rng = np.random.default_rng(1)
    tasks = [_columns(rng, 50_000, 10**9, 10**9) for _ in range(4)]
    out = _tasks(tasks, top_k=100)  # cap 200 per task: every task prunes both
    sd = out["distinct_relative_sd"]
    for name in ("s", "n"):
        truth = len({v for t in tasks for v in t[name]})
        got = out["features"][name]["distinct_approx"]
        assert abs(got - truth) <= 4 * sd * truth, (name, got, truth)
        assert "top" not in out["features"][name]  # nearly one value per row: ids


def test_a_task_that_counted_exactly_joins_one_that_estimated():
    rng = np.random.default_rng(2)
    wide = _columns(rng, 40_000, 30_000, 5)
    narrow = {"s": [f"w{i % 50}" for i in range(40_000)], "n": [7] * 40_000,
              "x": rng.normal(size=40_000).tolist()}
    out = _tasks([wide, narrow], top_k=100)
    s = out["features"]["s"]
    truth = len(set(wide["s"]) | set(narrow["s"]))
    assert abs(s["distinct_approx"] - truth) <= 4 * out["distinct_relative_sd"] * truth
    assert s["top_count_error"] > 0 and len(s["top"]) == 100
    # the 50 values of the task that never pruned are each 800 times there: all on top, exact
    assert {v: c for v, c in s["top"] if v.startswith("w")} == {f"w{i}": 800 for i in range(50)}
    assert out["features"]["n"]["distinct_approx"] == 6  # never past the cap: exact
    # many values counted exactly by one task (under its cap of 10,000) join the estimate
    many = {"s": [f"m{i % 9000}" for i in range(36_000)], "n": [1] * 36_000,
            "x": [0.0] * 36_000}
    out = _tasks([wide, many], top_k=5000)
    truth = len(set(wide["s"]) | set(many["s"]))
    assert abs(out["features"]["s"]["distinct_approx"] - truth) <= \
        4 * out["distinct_relative_sd"] * truth, truth


@pytest.mark.parametrize("distinct", [1, 7, 300, 5000])
def test_string_counts_are_exact_whichever_way_they_are_counted(distinct):
    """Few distinct strings are counted from the compiled hash pass's numbers, many by Arrow's
    value_counts (past one in 8 distinct): the same exact counts, nulls left out, values of 0
    to 40 bytes (past the hash's first word), sliced batches."""
    from collections import Counter

    rng = np.random.default_rng(distinct)
    pool = ["", "a", "abcdefgh", "abcdefghi", "abcdefghj"] + \
        [f"value-{k}-" + "x" * (k % 30) for k in range(distinct)]
    pool = pool[:max(distinct, 1)]
    n = 30_000
    picks = [None if i % 13 == 0 else pool[k] for i, k in enumerate(rng.integers(0, len(pool), n))]
    spec = FeatureSpec((Feature("s", ("s",), "fixed", "string", "bytes", "string",
                                nullable=True),))
    st = TaskStats(spec, top_k=10_000)  # cap 20,000: every value counted exactly
    whole = pa.record_batch({"s": pa.array(picks)})
    for lo in range(0, n, 7_000):
        st.add(None, whole.slice(lo, 7_000))
    out = merge([pickle.loads(pickle.dumps(st.result()))], spec, 10_000, None)
    s = out["features"]["s"]
    want = Counter(v for v in picks if v is not None)
    assert dict(s["top"]) == dict(want)
    assert s["distinct_approx"] == len(want)
    assert s["nulls"] == picks.count(None)


def test_deciles_within_the_recorded_rank_error_and_splits_apart():
    rng = np.random.default_rng(3)
    tasks = [_columns(rng, 200_000, 10, 10) for _ in range(4)]
    for t in tasks[2:]:  # the test split's values lie above every train value
        t["x"] = (np.asarray(t["x"]) + 100).tolist()
    out = _tasks(tasks, top_k=100, splits=["train", "train", "test", "test"])
    err = out["quantile_rank_error"]
    assert 0 < err < 0.01
    for group, values in ((out["features"], tasks), (out["splits"]["train"], tasks[:2]),
                          (out["splits"]["test"], tasks[2:])):
        xs = np.sort(np.concatenate([t["x"] for t in values]))
        x = group["x"]
        assert x["count"] == len(xs) and x["min"] == xs[0] and x["max"] == xs[-1]
        for p, v in zip(x["quantiles"]["probabilities"], x["quantiles"]["values"]):
            rank = np.searchsorted(xs, v, side="right") / len(xs)
            assert abs(rank - p) <= 2 * err, (p, v, rank)
    assert out["features"]["s"]["distinct_approx"] == 10  # exact: under the cap
    assert sum(c for _, c in out["features"]["s"]["top"]) == 800_000


@pytest.mark.parametrize("sizes", [
    [50_000, 30_000],  # every task packs its runs
    [3_000, 2_000, 700],  # no task fills a run: each value goes in as itself
    [60_000, 5_000, 1_000],  # both, weighed together
])
def test_packed_deciles_within_the_recorded_rank_error(sizes):
    """Deciles from tasks that pack their runs of values (every PACK-th of a sorted run),
    tasks whose values go in as themselves, and both in one feature: each within the recorded
    rank error of the true deciles. Values come in batches of 10,000 and of 700 (pooled into
    runs); the tasks' values are skewed apart so that weighing packed values wrongly shows."""
    from tfspark.store.stats.sketch import PACK_RUN, Deciles

    rng = np.random.default_rng(11)
    parts, every = [], []
    for t, n in enumerate(sizes):
        x = rng.exponential(size=n) * (t + 1) + 3 * t
        every.append(x)
        st = TaskStats(SPEC, 10)
        step = 700 if t % 2 else 10_000
        for lo in range(0, n, step):
            st.add(None, pa.record_batch({"s": pa.array(["a"] * len(x[lo:lo + step])),
                                          "n": pa.array([1] * len(x[lo:lo + step])),
                                          "x": pa.array(x[lo:lo + step])}))
        result = pickle.loads(pickle.dumps(st.result()))
        packed = result[rules.ALL]["x"].deciles.packed is not None
        assert packed == (n >= PACK_RUN), (n, packed)
        parts.append(result)
    out = merge(parts, SPEC, 10, None)
    err = out["quantile_rank_error"]
    assert err == round(Deciles.rank_error(800), 4)
    xs = np.sort(np.concatenate(every))
    for p, v in zip(out["features"]["x"]["quantiles"]["probabilities"],
                    out["features"]["x"]["quantiles"]["values"]):
        rank = np.searchsorted(xs, v, side="right") / len(xs)
        assert abs(rank - p) <= err, (p, v, rank)


@pytest.mark.parametrize("rows", [0, 1])
def test_a_task_with_no_rows_or_one_row(rows):
    out = _tasks([{"s": ["a"] * rows, "n": [3] * rows, "x": [0.5] * rows}], top_k=10)
    x = out["features"].get("x", {"count": 0})
    assert x["count"] == rows
    if rows:
        assert x["quantiles"]["values"] == [0.5] * 9
        assert out["features"]["s"]["distinct_approx"] == 1


def test_text_longer_than_a_token_is_not_counted_or_carried():
    """A string feature with a value past MAX_TOKEN_CHARS is text, not a vocabulary: its
    values are neither kept for top values nor carried in the commit message (a table of
    50 MiB strings once filled the driver's heap); its distinct count is estimated."""
    short = [f"t{i % 40}" for i in range(5000)]
    long = [("x" * 10_000) + str(i) for i in range(1000)]
    st = TaskStats(SPEC, 100)
    st.add(None, pa.record_batch({"s": short, "n": [1] * 5000, "x": [0.0] * 5000}))
    st.add(None, pa.record_batch({"s": long, "n": [1] * 1000, "x": [0.0] * 1000}))
    st.add(None, pa.record_batch({"s": short[:10], "n": [1] * 10, "x": [0.0] * 10}))
    message = pickle.dumps(st.result())
    assert len(message) < 100_000
    s = merge([pickle.loads(message)], SPEC, 100, None)["features"]["s"]
    assert "top" not in s and s["max_chars"] == 10_003 and s["rows"] == 6010
    assert abs(s["distinct_approx"] - 1040) <= 1040 * 0.05


def test_without_datasketches_one_line_says_what_to_install(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "datasketches", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "tfspark.store.stats.sketch")
    with pytest.raises(ImportError, match=r"pip install datasketches \(on a cluster, in every "
                                          r"executor's Python\), or write with stats=False"):
        importlib.import_module("tfspark.store.stats.sketch")


@pytest.mark.parametrize("kind", ["int", "string"])
def test_the_distinct_sketch_estimates_within_its_error_and_merges_as_one(kind):
    """Distinct counts past the cap: within 4 standard errors (1.04 / 64) from 300 to 300,000
    values, the same value hashed alike in every sketch (a task's duplicates do not count
    twice), and two sketches merged equal to one fed everything."""
    from tfspark.store.stats.sketch import Distinct

    def values(lo, hi):
        ids = np.arange(lo, hi) * 7919
        return pa.array(ids) if kind == "int" else pa.array([f"w{i}" for i in ids])

    for n in (300, 12_000, 300_000):
        whole, a, b = Distinct(), Distinct(), Distinct()
        whole.add(values(0, n))
        a.add(values(0, n * 2 // 3))
        b.add(values(n // 3, n))  # overlapping: each value once in the union
        a.merge(b)
        assert np.array_equal(a.registers, whole.registers)
        assert abs(whole.estimate() - n) <= 4 * 1.04 / 64 * n, (n, whole.estimate())
    empty = Distinct()
    empty.add(pa.array([None], pa.int64()))
    assert empty.estimate() == 0


def test_the_drivers_merge_hashes_nothing_and_estimates_as_if_it_did(tmp_path):
    """Every task that counted its values exactly sends their HLL registers too, so the
    driver's merge takes registers' maxima and loads no compiled kernel (about a second of a
    first write); the estimate is the one the driver gets by hashing those values itself."""
    import dataclasses
    import subprocess
    import sys

    rng = np.random.default_rng(5)
    # task 0 goes past the cap (its own HLL), tasks 1-2 stay under it: the sum goes past
    tasks = [_columns(rng, 30_000, 10**9, 10**9)] + \
        [_columns(rng, 30_000, 150, 150) for _ in range(2)]
    parts = []
    for cols in tasks:
        st = TaskStats(SPEC, 100)
        st.add(None, pa.record_batch({k: pa.array(v) for k, v in cols.items()}))
        parts.append(pickle.loads(pickle.dumps(st.result())))
    under = [p[rules.ALL]["s"] for p in parts[1:]]
    assert all(s.hll is not None and not s.pruned for s in under)  # registers sent anyway
    # the same tasks' messages without the registers of what they counted: hashed here
    bare = [{label: {name: dataclasses.replace(s, hll=s.hll if (s.pruned or s.too_many)
                                               else None)
                     for name, s in feats.items()} for label, feats in p.items()}
            for p in parts]
    want = merge(bare, SPEC, 100, None)
    (tmp_path / "parts.pkl").write_bytes(pickle.dumps((parts, SPEC)))
    code = ("import json, pickle, sys; from tfspark.store.stats.sketch import merge;"
            f"parts, spec = pickle.load(open({str(tmp_path / 'parts.pkl')!r}, 'rb'));"
            "out = merge(parts, spec, 100, None);"
            "assert 'numba' not in sys.modules, 'the merge loaded numba';"
            "print(json.dumps(out, sort_keys=True, default=str))")
    got = subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                         capture_output=True, text=True).stdout
    import json

    def counted(stats):  # (deciles aside: KLL's compaction is random; ties in the top values
        # come in any order, and at the last place any of the tied values may be kept)
        out = {f: {k: v for k, v in s.items() if k not in ("quantiles", "top")}
               for f, s in stats["features"].items()}
        for f, s in stats["features"].items():
            if "top" in s:
                last = min(n for _, n in s["top"])
                out[f]["top"] = (sorted(n for _, n in s["top"]),
                                 sorted((v, n) for v, n in s["top"] if n > last))
        return out

    got, want_ = counted(json.loads(got)), counted(json.loads(json.dumps(want, default=str)))
    assert got == want_, {(f, k): (got[f].get(k), v) for f in want_ for k, v in want_[f].items()
                          if got[f].get(k) != v}
    assert want["features"]["s"]["distinct_approx"] > 30_000  # past the cap: estimated


def test_small_batches_of_two_splits_pool_into_the_statistics_of_their_rows():
    """A task's batches are pooled per split before they are folded in (a pool's rows at
    once); what comes out is the statistics of each split's rows, as one batch of them gives."""
    rng = np.random.default_rng(7)
    cols = _columns(rng, 150_000, 40, 10**6)
    split = np.where(rng.random(150_000) < 0.3, "eval", "train")
    whole = pa.record_batch({k: pa.array(v) for k, v in cols.items()})
    pooled, once = TaskStats(SPEC, 100), TaskStats(SPEC, 100)
    for lo in range(0, 150_000, 1_000):  # interleaved, as a task's groups come
        part = whole.slice(lo, 1_000)
        mine = split[lo:lo + 1_000]
        for label in ("train", "eval"):
            pooled.add(label, part.filter(pa.array(mine == label)))
    for label in ("train", "eval"):
        once.add(label, whole.filter(pa.array(split == label)))
    got, want = pooled.result(), once.result()
    assert set(got) == set(want) == {"train", "eval"}
    for label in want:
        for name in ("s", "n", "x"):
            g, w = got[label][name], want[label][name]
            assert (g.rows, g.nulls, g.too_many, g.pruned) == (w.rows, w.nulls, w.too_many,
                                                              w.pruned)
            assert (g.counts is None) == (w.counts is None)
            if w.counts is not None:
                assert g.counts.sort_by("value").equals(w.counts.sort_by("value"))
            if w.numbers is not None:
                assert g.numbers.count == w.numbers.count
                assert g.numbers.moments.mean == pytest.approx(w.numbers.moments.mean)
            if w.hll is not None:
                assert (g.hll.registers == w.hll.registers).all()
