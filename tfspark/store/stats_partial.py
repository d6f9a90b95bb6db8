"""Feature statistics gathered by the write tasks (write_tfrecords by default; the data source
with option featureStats=true) and merged on the driver at commit (stats_merge.py): each task
sees only its own Arrow batches, so every statistic here is one that merges.

    exact       rows, nulls, count, NaN and infinities, min, max, mean and variance (of the
                finite values, merged with Chan's formula), filled (stats_rules.filled),
                lengths of arrays, the moments of array elements; top values and distinct
                counts while a task has seen at most CAP_FACTOR * top_k distinct values of a
                feature (an integer scalar with more is a number, not ids: its counting stops)
    estimated   deciles, from a KLL sketch per feature and split (rank error recorded);
                distinct counts past the cap, from an HLL sketch begun with the values counted
                so far (relative error recorded); top values of a feature past the cap (each
                count low by at most the recorded top_count_error)

The sketches are Apache DataSketches' (the `datasketches` package: mergeable, serialized into
the commit message). The result has the layout of stats.compute (stats["features"],
stats["splits"]), so keras_preprocessing, `tfspark stats` and `tfspark train` read either,
with the conventions of stats_rules.py. No pyspark here: this runs inside the writer, on Arrow.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

try:
    from datasketches import hll_sketch, hll_union, kll_doubles_sketch  # noqa: F401 (merge)
except ImportError as e:  # a dependency of tfspark, but an executor's Python may lack it
    raise ImportError("tfspark's feature statistics need the datasketches package, which this "
                      "Python lacks: pip install datasketches (on a cluster, in every "
                      "executor's Python), or write with stats=False", name="datasketches") from e

from tfspark.arrow.values import column_of, to_int64
from tfspark.spec import Feature, FeatureSpec
from tfspark.store import stats_rules as rules

KLL_K = 800  # deciles' sketch: rank error about 0.35%, up to ~19 KB per feature and split
KLL_K_WIDE = 200  # with more than WIDE numeric features: about 1.3%, ~5 KB (message size)
WIDE = 64
HLL_LG_K = 12  # distinct counts past the cap: relative standard error 1.04 / 2**6, 1.6%
CAP_FACTOR = 2  # distinct values counted exactly per task: CAP_FACTOR * top_k
_MORE = "_more"  # an accumulator's value counts not yet summed into its "counts" (_count)
CHUNK = 32  # count tables summed at once: a task's unsummed ones, the driver's from the tasks

class PartialStats:
    """One task's statistics, per split; `add` each group's batch, `result` for the message."""

    def __init__(self, spec: FeatureSpec, top_k: int):
        self.spec, self.top_k = spec, top_k
        self.cap = CAP_FACTOR * top_k
        self.k = kll_k(spec)
        self.groups: dict[str, dict[str, dict[str, Any]]] = {}

    def add(self, split: str | None, batch: pa.RecordBatch) -> None:
        """Fold a batch of one split's rows in."""
        group = self.groups.setdefault(split or rules.ALL, {})
        for f in self.spec.features:
            acc = group.setdefault(f.name, {"rows": 0, "nulls": 0})
            _add(acc, f, column_of(batch, f.path), self)

    def result(self) -> dict[str, Any]:
        """Data for the task's commit message (pickled: the sketches as their bytes)."""
        return {label: {name: _frozen(acc) for name, acc in feats.items()}
                for label, feats in self.groups.items()}


def kll_k(spec: FeatureSpec) -> int:
    """The deciles' sketch size: smaller for wide tables, whose messages carry one each."""
    return KLL_K if sum(rules.numeric(f) for f in spec.features) <= WIDE else KLL_K_WIDE


def report_bytes(spec: FeatureSpec, top_k: int, groups: int, rows: int) -> int:
    """About the most the statistics of a task of `rows` rows in `groups` splits can take in
    its report: count tables full (at the cap, or a value per row; 24 bytes a value), sketches
    full. Writes whose tasks would send more than the driver should hold leave the statistics
    to Spark's jobs (export.py)."""
    full = groups * CAP_FACTOR * top_k  # values counted at most (a row holds one of a scalar)
    values = sum(min(full, rows) for f in spec.features if rules.categorical(f)) + \
        sum(full for f in spec.features if rules.token_array(f))
    sketches = sum(24 * kll_k(spec) for f in spec.features if rules.numeric(f)) * groups
    return 24 * values + sketches + 4096 * groups * len(spec.features)


def _frozen(acc: dict[str, Any]) -> dict[str, Any]:
    _settle(acc)
    out = dict(acc)
    if "kll" in out:
        out["kll"] = out["kll"].serialize()
    if "hll" in out:
        out["hll"] = out["hll"].serialize_compact()
    return out


def _add(acc: dict[str, Any], f: Feature, arr: pa.Array, st: PartialStats) -> None:
    n = len(arr)
    valid = np.ones(n, bool) if arr.null_count == 0 else \
        arr.is_valid().to_numpy(zero_copy_only=False)
    acc["rows"] += n
    acc["nulls"] += int(n - valid.sum())
    if rules.numeric(f):
        values = _numbers(f, arr, valid)
        acc["count"] = acc.get("count", 0) + len(values)
        finite = _count_nonfinite(acc, f, values)
        _moments(acc, finite)
        if len(finite):
            acc.setdefault("kll", kll_doubles_sketch(st.k)).update(finite)
        if rules.categorical(f):  # integers and booleans
            ints = pa.array(values.astype(np.int64))
            if acc.get("too_many"):
                feed(acc["hll"], pc.unique(ints))
            else:
                _count(acc, ints, st.cap)
                if acc.get("pruned"):  # more distinct ints than the cap: a number, not ids,
                    acc["too_many"] = True  # so counting stops (as for text, _strings)
                    del acc["counts"]
    elif rules.categorical(f):  # strings
        _strings(acc, arr.cast(pa.large_string()), st.cap)  # decimals as text: their text
    elif rules.array(f):
        _array(acc, f, arr, valid, st)


def _numbers(f: Feature, arr: pa.Array, valid: np.ndarray) -> np.ndarray:
    """The present values of a scalar column as the float64 numbers the Example stores."""
    if f.encoding in ("float", "decimal"):
        out = pc.fill_null(arr, 0).cast(pa.float64()).to_numpy(zero_copy_only=False)
    else:
        out = to_int64(f, arr).astype(np.float64)
    return out[valid]


def _count_nonfinite(acc: dict[str, Any], f: Feature, x: np.ndarray) -> np.ndarray:
    """Count x's NaN and infinities into acc (floats only); returns its finite values."""
    if not rules.nonfinite(f):
        return x
    for key, hit in (("nan", np.isnan(x)), ("pos_inf", x == np.inf), ("neg_inf", x == -np.inf)):
        acc[key] = acc.get(key, 0) + int(hit.sum())
    return x[np.isfinite(x)]


def _moments(acc: dict[str, Any], x: np.ndarray) -> None:
    """count, mean, M2 (Chan's parallel update), min, max of more values."""
    if not len(x):
        return
    n_b, mean_b = len(x), float(x.mean())
    m2_b = float(((x - mean_b) ** 2).sum())
    n_a, mean_a, m2_a = acc.get("n", 0), acc.get("mean", 0.0), acc.get("m2", 0.0)
    n = n_a + n_b
    delta = mean_b - mean_a
    acc["n"], acc["mean"] = n, mean_a + delta * n_b / n
    acc["m2"] = m2_a + m2_b + delta * delta * n_a * n_b / n
    acc["min"] = min(acc.get("min", np.inf), float(x.min()))
    acc["max"] = max(acc.get("max", -np.inf), float(x.max()))


def _count(acc: dict[str, Any], values: pa.Array, cap: int) -> None:
    """Exact counts of values (an Arrow table of value, n: merged in Arrow, not Python); past
    `cap` distinct ones, the smaller counts are dropped and the largest dropped count is added
    to the error bound."""
    values = values.drop_null()
    if len(values):
        vc = pc.value_counts(values)
        if "hll" in acc:  # past the cap: every distinct value goes into the estimate too
            feed(acc["hll"], vc.field("values"))
        acc.setdefault(_MORE, []).append(pa.table({"value": vc.field("values"),
                                                   "n": vc.field("counts")}))
        # Summed later while the tables together hold at most `cap` values: then their sum
        # holds no more, and nothing would have been cut (an Arrow group-by a batch cost
        # about 1 ms each, most of the statistics of a low-cardinality feature); at most
        # CHUNK of them wait, so a feature of a few values in a long task keeps few.
        have = acc["counts"].num_rows if "counts" in acc else 0
        if len(acc[_MORE]) < CHUNK and have + sum(t.num_rows for t in acc[_MORE]) <= cap:
            return
    _settle(acc)
    _prune(acc, cap)


def _settle(acc: dict[str, Any]) -> None:
    """The value counts not yet summed (_count) summed into acc["counts"]."""
    more = acc.pop(_MORE, None)
    if more:
        acc["counts"] = sum_counts(([acc["counts"]] if "counts" in acc else []) + more)


def sum_counts(tables: list[pa.Table]) -> pa.Table:
    """Value counts added up: one table of value, n."""
    tables = [t for t in tables if t.num_rows] or tables[:1]
    if len(tables) == 1:
        return tables[0]
    both = pa.concat_tables([t.cast(tables[0].schema) for t in tables])
    return both.group_by("value").aggregate([("n", "sum")]).rename_columns(["value", "n"])


def _prune(acc: dict[str, Any], cap: int) -> None:
    counts = acc.get("counts")
    if counts is None or counts.num_rows <= cap:
        return
    _estimate(acc)
    cut(acc, cap)


def _estimate(acc: dict[str, Any]) -> None:
    """Begin the distinct count's HLL sketch (once) with every value counted so far."""
    _settle(acc)
    if "hll" not in acc:
        acc["hll"] = hll_sketch(HLL_LG_K)
        if acc.get("counts") is not None:
            feed(acc["hll"], acc["counts"].column("value"))


def cut(acc: dict[str, Any], cap: int) -> None:
    """Keep the cap // 2 largest counts; the largest dropped one bounds what each kept count
    may lack (added to the error)."""
    ranked = acc["counts"].sort_by([("n", "descending")])
    acc["error"] = acc.get("error", 0) + ranked.column("n")[cap // 2].as_py()
    acc["counts"] = ranked.slice(0, cap // 2)
    acc["pruned"] = True


def _strings(acc: dict[str, Any], text: pa.Array, cap: int) -> None:
    """Count string values, until one is longer than MAX_TOKEN_CHARS: the feature is text then,
    not a vocabulary (no top values), so its counting stops (no value of it kept in memory or
    in the message) and its distinct count goes on in the HLL sketch."""
    if len(text):
        chars = pc.max(pc.utf8_length(text)).as_py() or 0
        acc["max_chars"] = max(acc.get("max_chars", 0), chars)
    if acc.get("max_chars", 0) <= rules.MAX_TOKEN_CHARS:
        _count(acc, text, cap)
        return
    _estimate(acc)
    acc.pop("counts", None)
    acc["too_many"] = True
    feed(acc["hll"], pc.unique(text.drop_null()))


def feed(sketch: Any, values: pa.Array | pa.ChunkedArray) -> None:
    """Each value into an HLL sketch or union (strings as str, integers as int: one feature's
    values always go in as the same type, so equal values hash alike in every task)."""
    for v in values.to_pylist():
        sketch.update(v)


def _array(acc: dict[str, Any], f: Feature, arr: pa.Array, valid: np.ndarray,
           st: PartialStats) -> None:
    if not isinstance(arr.type, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
        return
    lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)[valid]
    if len(lengths):
        acc["lengths"] = acc.get("lengths", 0) + int(lengths.sum())
        acc["lists"] = acc.get("lists", 0) + len(lengths)
        acc["lmin"] = min(acc.get("lmin", 1 << 62), int(lengths.min()))
        acc["lmax"] = max(acc.get("lmax", 0), int(lengths.max()))
    elements = pc.list_flatten(arr.filter(pa.array(valid)))
    if f.kind in ("ragged", "sequence"):
        elements = pc.list_flatten(elements)
    elements = elements.drop_null()
    if rules.number_array(f):
        e = acc.setdefault("elements", {})
        x = elements.cast(pa.float64()).to_numpy(zero_copy_only=False)
        e["count"] = e.get("count", 0) + len(x)
        _moments(e, _count_nonfinite(e, f, x))
    if rules.token_array(f) and f.dtype == "string":
        _strings(acc, elements.cast(pa.large_string()), st.cap)
    elif rules.token_array(f):
        _count(acc, elements.cast(pa.int64()), st.cap)
