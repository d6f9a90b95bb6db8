"""Feature statistics gathered by a write's tasks (write_tfrecords and write_dataset by default;
the data source with option featureStats=true) and merged on the driver at commit. Each task
sees only its own Arrow batches, so every statistic here is one that merges.

    exact       rows, nulls, count, NaN and infinities, min, max, mean and variance (of the
                finite values, merged with Chan's formula), filled (rules.filled), lengths of
                arrays, the moments of array elements; top values and distinct counts while a
                task has seen at most CAP_FACTOR * top_k distinct values of a feature (an
                integer scalar with more is a number, not ids: its counting stops)
    estimated   deciles, from a KLL sketch per feature and split fed every PACK-th value of
                each sorted run (Deciles; rank error recorded);
                distinct counts past the cap, from an HLL sketch begun with the values counted
                so far (relative error recorded); top values of a feature past the cap (each
                count low by at most the recorded top_count_error)

One feature's statistics in one split of one task are a FeatureSketch: `add` folds a column in,
`frozen` makes it ready for the task's commit message (the sketches as their bytes), `merge`
joins those of the tasks, and `finish` gives the statistics as the manifest keeps them. The
deciles' sketch is Apache DataSketches' KLL (the `datasketches` package: mergeable and
serializable); the distinct count's is a HyperLogLog (Distinct). Work per value runs in
compiled loops (moments and NaN, hashes, string lengths) or in Arrow (value counts). The
result has the layout of the statistics Spark's jobs compute (stats["features"],
stats["splits"]), so keras_preprocessing, `tfspark stats` and `tfspark train` read either,
with the conventions of the rules. No pyspark here: this runs inside the writer, on Arrow.
Time and memory of the merge stay linear in the tasks: each feature's count tables are summed
CHUNK at a time and cut to the cap as a task cuts them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

try:
    from datasketches import kll_doubles_sketch
except ImportError as e:  # a dependency of tfspark, but an executor's Python may lack it
    raise ImportError("tfspark's feature statistics need the datasketches package, which this "
                      "Python lacks: pip install datasketches (on a cluster, in every "
                      "executor's Python), or write with stats=False", name="datasketches") from e

from tfspark.arrow.values import bytes_buffers, column_of, to_int64
from tfspark.spec import Feature, FeatureSpec
from tfspark.spec.kinds import json_float
from tfspark.store.stats import rules

KLL_K = 800  # deciles' sketch: rank error about 0.35%, up to ~19 KB per feature and split
KLL_K_WIDE = 200  # with more than WIDE numeric features: about 1.3%, ~5 KB (message size)
WIDE = 64
HLL_LG_K = 12  # distinct counts past the cap: relative standard error 1.04 / 2**6, 1.6%
CAP_FACTOR = 2  # distinct values counted exactly per task: CAP_FACTOR * top_k
POOL_ROWS = 65_536  # a task's rows folded into the sketches at once (TaskStats),
POOL_BYTES = 32 << 20  # or fewer where they hold more bytes than this (wide rows)
CHUNK = 32  # count tables summed at once: a task's unsummed ones, the driver's from the tasks
PACK = 8  # deciles: each run of PACK_RUN values or more goes in as every PACK-th of it, sorted
PACK_RUN = 16384  # (so a packed run adds a rank error under PACK / PACK_RUN: 0.05%)
GRID = 8192  # deciles of packed and unpacked values together: from this many points of each


_HLL_M = 1 << HLL_LG_K
_HLL_ALPHA = 0.7213 / (1 + 1.079 / _HLL_M)


@dataclass
class Distinct:
    """A HyperLogLog sketch of distinct values (Flajolet et al. 2007; linear counting while
    registers are still empty): 2**HLL_LG_K registers, each the longest run of leading zeros
    after a value's 64-bit hash picked it; merged by taking each register's maximum.
    Values are hashed as split keys are (splitmix64's finalizer of an integer; of a string's
    or bytes' FNV-1a), a whole array in one compiled loop: a sketch fed one value per Python
    call cost a task's statistics more than everything else together on a column of ids."""

    registers: np.ndarray = field(default_factory=lambda: np.zeros(_HLL_M, np.uint8))

    def add(self, values: pa.Array | pa.ChunkedArray) -> None:
        """Each present value in (integers, booleans, strings or bytes)."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        values = values.drop_null()
        if not len(values):
            return
        t = values.type
        if pa.types.is_integer(t) or pa.types.is_boolean(t):
            self.add_ints(values.cast(pa.int64()).to_numpy(zero_copy_only=False))
        else:
            from tfspark.arrow.hashing import fnv
            from tfspark.store.stats import loops

            loops.hll_add(self.registers, fnv(*bytes_buffers(values)), HLL_LG_K)

    def add_ints(self, values: np.ndarray) -> None:
        """Each of an int64 array's values."""
        from tfspark.store.stats import loops

        loops.hll_add(self.registers, np.ascontiguousarray(values, np.int64).view(np.uint64),
                       HLL_LG_K)

    def merge(self, other: Distinct) -> None:
        """Another sketch's values too."""
        np.maximum(self.registers, other.registers, out=self.registers)

    def estimate(self) -> float:
        """The distinct values' estimated number."""
        raw = _HLL_ALPHA * _HLL_M * _HLL_M / float(np.ldexp(1.0, -self.registers.astype(
            np.int64)).sum())
        empty = int((self.registers == 0).sum())
        if raw <= 2.5 * _HLL_M and empty:
            return _HLL_M * math.log(_HLL_M / empty)
        return raw


@dataclass
class Moments:
    """Count, mean, M2 (the sum of squared deviations from the mean), min and max of finite
    values, updated and merged with Chan et al.'s parallel formula."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    lo: float = np.inf
    hi: float = -np.inf

    def merge(self, other: Moments) -> None:
        """Another's values too."""
        if not other.n:
            return
        if not self.n:
            self.n, self.mean, self.m2 = other.n, other.mean, other.m2
            self.lo, self.hi = other.lo, other.hi
            return
        self._join(other.n, other.mean, other.m2, other.lo, other.hi)

    def _join(self, n_b: int, mean_b: float, m2_b: float, lo: float, hi: float) -> None:
        n_a = self.n
        n = n_a + n_b
        delta = mean_b - self.mean
        self.n, self.mean = n, self.mean + delta * n_b / n
        self.m2 = self.m2 + m2_b + delta * delta * n_a * n_b / n
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)


@dataclass
class Deciles:
    """The sketch behind a feature's deciles: Apache DataSketches' KLL over the finite values,
    packed first. KLL costs about 20 ns a value, most of a numeric feature's statistics; so
    values come in runs of at least PACK_RUN (a batch, or batches pooled), each run is sorted
    and only every PACK-th value from a random start goes in, standing for the PACK values
    around it: a rank error under PACK per run, PACK / PACK_RUN of the values at most, added to
    the recorded rank error. Values of a task that never fill a run go in one by one (`exact`),
    so small data sets are sketched as before; the deciles of a feature with both weigh each
    packed value as PACK (`values`). Merged on the driver sketch by sketch."""

    k: int
    exact: Any = None  # KLL of values that stand for themselves (live, or its bytes)
    packed: Any = None  # KLL of values that stand for PACK each
    pending: list[np.ndarray] = field(default_factory=list)  # not yet a whole run
    rng: np.random.Generator | None = None

    def add(self, finite: np.ndarray) -> None:
        """Finite values, in an array of their own (sorted here, in place)."""
        if not len(finite):
            return
        if self.pending or len(finite) < PACK_RUN:
            self.pending.append(finite)
            if sum(len(p) for p in self.pending) < PACK_RUN:
                return
            finite, self.pending = np.concatenate(self.pending), []
        finite.sort()  # (each kept value then stands for the PACK around it)
        self.rng = self.rng or np.random.default_rng()
        if self.packed is None:
            self.packed = kll_doubles_sketch(self.k)
        self.packed.update(np.ascontiguousarray(finite[int(self.rng.integers(PACK))::PACK]))

    def frozen(self) -> Deciles:
        """A copy for the task's message: the values short of a run in `exact`, as bytes."""
        if self.pending:
            rest = np.sort(np.concatenate(self.pending))  # KLL takes a sorted run fastest
            self.pending = []
            if self.exact is None:
                self.exact = kll_doubles_sketch(self.k)
            self.exact.update(rest)
        return Deciles(self.k, exact=self.exact.serialize() if self.exact is not None else None,
                       packed=self.packed.serialize() if self.packed is not None else None)

    @classmethod
    def merge(cls, parts: list[Deciles]) -> Deciles:
        """Frozen copies (the tasks') as one, live."""
        out = cls(parts[0].k)
        for part in parts:
            for name in ("exact", "packed"):
                theirs = getattr(part, name)
                if theirs is not None:
                    sketch = kll_doubles_sketch.deserialize(theirs)
                    ours = getattr(out, name)
                    if ours is None:
                        setattr(out, name, sketch)
                    else:
                        ours.merge(sketch)
        return out

    def values(self, probabilities: list[float]) -> list[float]:
        """The quantiles at these probabilities (of a merged copy with values)."""
        both = [(s, w) for s, w in ((self.exact, 1), (self.packed, PACK)) if s is not None]
        if len(both) == 1:
            return list(both[0][0].get_quantiles(probabilities))
        # each quantile: the least value (of GRID + 1 from each sketch) whose rank, each
        # sketch's weighed by its values, reaches it (adding under 1 / GRID to the error)
        grid = np.linspace(0.0, 1.0, GRID + 1)
        points = np.unique(np.concatenate([np.asarray(s.get_quantiles(grid)) for s, _ in both]))
        weights = [w * s.n for s, w in both]
        ranks = sum(wt * np.asarray(s.get_cdf(points))[:-1] for (s, _), wt in zip(both, weights))
        ranks = ranks / sum(weights)
        at = np.searchsorted(ranks, np.asarray(probabilities), side="left")
        return [float(points[min(i, len(points) - 1)]) for i in at]

    @staticmethod
    def rank_error(k: int) -> float:
        """The normalized rank error recorded: KLL's (99% confidence), packing's bound and the
        grid's (where packed and unpacked values are weighed together)."""
        return kll_doubles_sketch.get_normalized_rank_error(k, False) + PACK / PACK_RUN + \
            1 / GRID


@dataclass
class Finite:
    """Numbers as the statistics count them: the values seen, NaN and infinities apart (of
    float features), and the moments of the finite ones."""

    count: int = 0
    nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0
    moments: Moments = field(default_factory=Moments)

    def add(self, f: Feature, x: np.ndarray) -> np.ndarray:
        """Count x (int64 or float64 values); returns its finite values as float64 (moments
        taken), in a new array of their own."""
        from tfspark.store.stats import loops

        if x.dtype != np.int64:
            x = x.astype(np.float64, copy=False)
        out = np.empty(len(x), np.float64)
        nan, pos_inf, neg_inf, n, mean, m2, lo, hi = loops.fold_numbers(
            np.ascontiguousarray(x), rules.nonfinite(f), out)
        self.count += len(x)
        self.nan += nan
        self.pos_inf += pos_inf
        self.neg_inf += neg_inf
        self.moments.merge(Moments(n, mean, m2, lo, hi))
        return out[:n]

    def merge(self, other: Finite) -> None:
        """Another's numbers too."""
        self.count += other.count
        self.nan += other.nan
        self.pos_inf += other.pos_inf
        self.neg_inf += other.neg_inf
        self.moments.merge(other.moments)

    def nonfinite(self) -> dict[str, int]:
        """NaN and infinities as the statistics name them."""
        return {"nan": self.nan, "pos_inf": self.pos_inf, "neg_inf": self.neg_inf}


@dataclass
class FeatureSketch:
    """One feature's statistics over some rows (a task's, of one split; or merged)."""

    rows: int = 0
    nulls: int = 0
    numbers: Finite | None = None  # scalar numbers: count, NaN and infinities, moments
    deciles: Deciles | None = None  # the deciles' sketch of the finite numbers
    # value counts (strings, integers, booleans, token arrays): a table of value, n
    counts: pa.Table | None = None
    more: list[pa.Table] = field(default_factory=list)  # counts not yet summed into `counts`
    hll: Distinct | None = None  # distinct values past the cap
    pruned: bool = False  # `counts` was cut to the cap: the kept counts may be low by `error`
    error: int = 0
    too_many: bool = False  # counting stopped (text, or an integer with too many values)
    max_chars: int | None = None  # the longest string
    lists: int = 0  # arrays: rows with a list, their values, shortest and longest
    lengths: int = 0
    shortest: int | None = None
    longest: int | None = None
    elements: Finite | None = None  # number arrays: their elements

    # ---------------------------------------------------------------- in a task

    def add(self, f: Feature, arr: pa.Array, cap: int, k: int) -> None:
        """Fold in a column of f's values. cap: values counted exactly; k: the KLL size."""
        n, nulls = len(arr), arr.null_count
        valid = arr.is_valid().to_numpy(zero_copy_only=False) if nulls else None  # None: all
        self.rows += n
        self.nulls += nulls
        if rules.numeric(f):
            values = _numbers(f, arr, valid)
            self.numbers = self.numbers or Finite()
            finite = self.numbers.add(f, values)
            if len(finite):
                self.deciles = self.deciles or Deciles(k)
                self.deciles.add(finite)
            if rules.categorical(f):  # integers and booleans (int64 here)
                if self.too_many:  # (hashed whole: cheaper than finding the unique ones)
                    assert self.hll is not None
                    self.hll.add_ints(values)
                else:
                    self._count(pa.array(values), cap)
                    if self.pruned:  # more distinct ints than the cap: a number, not ids,
                        self.too_many = True  # so counting stops (as for text, _strings)
                        self.counts = None
        elif rules.categorical(f):  # strings
            self._strings(arr.cast(pa.large_string()), cap)  # decimals as text: their text
        elif rules.array(f):
            self._array(f, arr, valid if valid is not None else np.ones(n, bool), cap)

    def frozen(self) -> FeatureSketch:
        """A copy for the task's commit message (pickled): counts summed, sketches as bytes,
        and the distinct count's sketch of the values counted (begun here if the task stayed
        under the cap: the driver merges registers and hashes nothing, so it loads no
        compiled kernel)."""
        self._settle()
        hll = self.hll
        if hll is None and self.counts is not None and self.counts.num_rows:
            hll = Distinct()
            hll.add(self.counts.column("value"))
        return dataclasses.replace(
            self, more=[], hll=hll,
            deciles=self.deciles.frozen() if self.deciles is not None else None)

    def _count(self, values: pa.Array, cap: int,
               buffers: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Exact counts of values (an Arrow table of value, n: merged in Arrow, not Python);
        past `cap` distinct ones, the smaller counts are dropped and the largest dropped count
        is added to the error bound. buffers: the bytes and offsets of values without nulls,
        strings (counted by hashing, compiled, where they repeat few values)."""
        values = values.drop_null()
        if len(values):
            distinct, counts = _value_counts(values, buffers)
            if self.hll is not None:  # past the cap: every distinct value goes in the estimate
                self.hll.add(distinct)
            self.more.append(pa.table({"value": distinct, "n": counts}))
            # Summed later while the tables together hold at most `cap` values: then their sum
            # holds no more, and nothing would have been cut (an Arrow group-by a batch cost
            # about 1 ms each, most of the statistics of a low-cardinality feature); at most
            # CHUNK of them wait, so a feature of a few values in a long task keeps few.
            have = self.counts.num_rows if self.counts is not None else 0
            if len(self.more) < CHUNK and have + sum(t.num_rows for t in self.more) <= cap:
                return
        self._settle()
        if self.counts is not None and self.counts.num_rows > cap:
            self._estimate()
            self._cut(cap)

    def _settle(self) -> None:
        """The value counts not yet summed summed into `counts`."""
        more, self.more = self.more, []
        if more:
            self.counts = sum_counts(([self.counts] if self.counts is not None else []) + more)

    def _estimate(self) -> None:
        """Begin the distinct count's HLL sketch (once) with every value counted so far."""
        self._settle()
        if self.hll is None:
            self.hll = Distinct()
            if self.counts is not None:
                self.hll.add(self.counts.column("value"))

    def _cut(self, cap: int) -> None:
        """Keep the cap // 2 largest counts; the largest dropped one bounds what each kept
        count may lack (added to the error)."""
        assert self.counts is not None
        ranked = self.counts.sort_by([("n", "descending")])
        self.error += ranked.column("n")[cap // 2].as_py()
        self.counts = ranked.slice(0, cap // 2)
        self.pruned = True

    def _strings(self, text: pa.Array, cap: int) -> None:
        """Count string values, until one is longer than MAX_TOKEN_CHARS: the feature is text
        then, not a vocabulary (no top values), so its counting stops (no value of it kept in
        memory or in the message) and its distinct count goes on in the HLL sketch."""
        present = text.drop_null() if text.null_count else text
        buffers = None
        if len(present):  # (null slots may hold bytes: counted without them)
            from tfspark.store.stats import loops

            buffers = bytes_buffers(present)
            self.max_chars = int(loops.max_chars(*buffers, self.max_chars or 0))
        if (self.max_chars or 0) <= rules.MAX_TOKEN_CHARS:
            self._count(present, cap, buffers)
            return
        self._estimate()
        self.counts = None
        self.too_many = True
        assert self.hll is not None  # (_estimate began it)
        self.hll.add(pc.unique(text.drop_null()))

    def _array(self, f: Feature, arr: pa.Array, valid: np.ndarray, cap: int) -> None:
        if not isinstance(arr.type, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
            return
        lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)[valid]
        if len(lengths):
            self.lengths += int(lengths.sum())
            self.lists += len(lengths)
            self.shortest = min(self.shortest if self.shortest is not None else 1 << 62,
                                int(lengths.min()))
            self.longest = max(self.longest or 0, int(lengths.max()))
        elements = pc.list_flatten(arr.filter(pa.array(valid)))
        if f.kind in ("ragged", "sequence"):
            elements = pc.list_flatten(elements)
        elements = elements.drop_null()
        if rules.number_array(f):
            self.elements = self.elements or Finite()
            self.elements.add(f, elements.cast(pa.float64()).to_numpy(zero_copy_only=False))
        if rules.token_array(f) and f.dtype == "string":
            self._strings(elements.cast(pa.large_string()), cap)
        elif rules.token_array(f):
            self._count(elements.cast(pa.int64()), cap)

    # ---------------------------------------------------------------- on the driver

    @classmethod
    def merge(cls, parts: list[FeatureSketch], cap: int) -> FeatureSketch:
        """The tasks' (frozen) sketches of one feature and group as one (sketches live, new
        objects: two groups never share one)."""
        out = cls()
        for b in parts:
            out._fold(b)
        deciles = [b.deciles for b in parts if b.deciles is not None]
        if deciles:
            out.deciles = Deciles.merge(deciles)
        out._merge_counts(parts, cap)
        return out

    def _fold(self, b: FeatureSketch) -> None:
        """b's counters, bounds and moments into this one."""
        self.rows += b.rows
        self.nulls += b.nulls
        self.lengths += b.lengths
        self.lists += b.lists
        self.error += b.error
        for name, pick in (("shortest", min), ("longest", max), ("max_chars", max)):
            theirs = getattr(b, name)
            if theirs is not None:
                ours = getattr(self, name)
                setattr(self, name, pick(ours, theirs) if ours is not None else theirs)
        for name in ("numbers", "elements"):
            theirs = getattr(b, name)
            if theirs is not None:
                if getattr(self, name) is None:
                    setattr(self, name, Finite())
                getattr(self, name).merge(theirs)

    def _merge_counts(self, parts: list[FeatureSketch], cap: int) -> None:
        """The tasks' value counts summed CHUNK tables at a time and cut to the cap as a task
        cuts them; their distinct values as one HLL sketch once any task or the sum went past
        the cap. A frozen sketch carries the HLL of every value it counted, so the union is
        their registers' maximum; a part without one has its counted values hashed here."""
        union = Distinct()
        for b in parts:
            if b.hll is not None:
                union.merge(b.hll)
            elif b.counts is not None:
                union.add(b.counts.column("value"))
        tables = [b.counts for b in parts if b.counts is not None]
        past = any(b.pruned or b.too_many for b in parts)
        if any(b.too_many for b in parts):  # counting stopped in a task: nowhere counted
            self.too_many = True
        else:
            self.pruned = any(b.pruned for b in parts)
            for i in range(0, len(tables), CHUNK):
                self.counts = sum_counts(([self.counts] if self.counts is not None else [])
                                         + tables[i:i + CHUNK])
                if self.counts.num_rows > cap:
                    past = True
                    self._cut(cap)
        if past:
            self.hll = union

    def distinct(self) -> int | None:
        """Distinct present values: counted while under the cap, else estimated."""
        known = self.counts.num_rows if self.counts is not None else None
        if self.hll is not None:  # past the cap somewhere
            return max(known or 0, round(self.hll.estimate()))
        return known

    def finish(self, f: Feature, top_k: int, ids: bool) -> dict[str, Any]:
        """The statistics as the manifest keeps them (of a merged sketch). ids: the feature's
        values are ids (no top values), as the whole column says."""
        s: dict[str, Any] = {"rows": self.rows, "nulls": self.nulls}
        if rules.numeric(f):
            numbers = self.numbers or Finite()
            s["count"] = numbers.count
            if rules.nonfinite(f):
                s.update(numbers.nonfinite())
            m = numbers.moments
            mean = variance = None
            if m.n:
                assert self.deciles is not None  # (fed every finite value)
                mean, variance = m.mean, m.m2 / m.n
                s.update(min=_num(m.lo), max=_num(m.hi), mean=_num(mean),
                         variance=_num(variance))
                s["quantiles"] = {"probabilities": rules.QUANTILES, "values": [
                    _num(v) for v in self.deciles.values(rules.QUANTILES)]}
            model = rules.filled(f, m.n, mean, variance, self.nulls)
            if model is not None:
                s["filled"] = {k: _num(v) for k, v in model.items()}
        if self.lists:
            s["length"] = {"min": self.shortest, "max": self.longest,
                           "mean": self.lengths / self.lists}
        e = self.elements
        if e is not None and e.count:
            s["elements"] = {"count": e.count}
            if rules.nonfinite(f):
                s["elements"].update(e.nonfinite())
            if e.moments.n:
                m = e.moments
                s["elements"].update(min=_num(m.lo), max=_num(m.hi), mean=_num(m.mean),
                                     variance=_num(m.m2 / m.n))
        distinct = self.distinct()
        if distinct is not None:  # an estimate never above the values there are
            s["distinct_approx"] = distinct if rules.array(f) else \
                min(distinct, self.rows - self.nulls)
        if self.max_chars is not None:
            s["max_chars"] = self.max_chars
        if self.counts is not None:
            counts = dict(zip(self.counts.column("value").to_pylist(),
                              self.counts.column("n").to_pylist()))
            text_ok = (self.max_chars or 0) <= rules.MAX_TOKEN_CHARS
            ints_ok = f.dtype == "string" or rules.array(f) or (
                not self.pruned and len(counts) <= top_k)
            if text_ok and ints_ok and not ids:
                top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
                s["top"] = [[v, c] for v, c in top]
                if self.error:
                    s["top_count_error"] = self.error
        return s


# A task's statistics: {split label (rules.ALL without splits): {feature name: sketch}}
Partial = dict[str, dict[str, FeatureSketch]]


class TaskStats:
    """One task's statistics, per split; `add` each group's batch, `result` for the message.
    A group's batches are pooled into POOL_ROWS rows (POOL_BYTES at most) before they are
    folded in: the sketches' work per call (a few Arrow and NumPy calls per feature) is then
    paid per pool, not per Arrow batch (Spark hands a task 10,000 rows at a time)."""

    def __init__(self, spec: FeatureSpec, top_k: int):
        self.spec, self.top_k = spec, top_k
        self.cap = CAP_FACTOR * top_k
        self.k = kll_k(spec)
        self.groups: Partial = {}
        self._pools: dict[str, list[pa.RecordBatch]] = {}  # batches not folded in yet

    def add(self, split: str | None, batch: pa.RecordBatch) -> None:
        """Fold a batch of one split's rows in (once its group's pool is full)."""
        label = split or rules.ALL
        pool = self._pools.setdefault(label, [])
        if pool and not batch.schema.equals(pool[0].schema):
            self._fold(label)
            pool = self._pools.setdefault(label, [])
        pool.append(batch)
        if sum(b.num_rows for b in pool) >= POOL_ROWS or \
                sum(b.nbytes for b in pool) >= POOL_BYTES:
            self._fold(label)

    def _fold(self, label: str) -> None:
        """A group's pooled batches into its sketches, as one batch."""
        pool = self._pools.pop(label, [])
        if not pool:
            return
        batch = pool[0]
        if len(pool) > 1:
            batch = (pa.Table.from_batches(pool).combine_chunks().to_batches() or pool)[0]
        group = self.groups.setdefault(label, {})
        for f in self.spec.features:
            sketch = group.get(f.name)
            if sketch is None:
                sketch = group[f.name] = FeatureSketch()
            sketch.add(f, column_of(batch, f.path), self.cap, self.k)

    def result(self) -> Partial:
        """Data for the task's commit message (pickled: the sketches as their bytes)."""
        for label in list(self._pools):
            self._fold(label)
        return {label: {name: sketch.frozen() for name, sketch in feats.items()}
                for label, feats in self.groups.items()}


def merge(parts: list[Partial], spec: FeatureSpec, top_k: int,
          split_column: str | None) -> dict[str, Any]:
    """The tasks' results as stats["features"] (all rows) and stats["splits"], with what is
    estimated and how well recorded."""
    accs: dict[str, dict[str, list[FeatureSketch]]] = {}
    for part in parts:
        for label, feats in part.items():
            for group in ([label, rules.ALL] if label != rules.ALL else [rules.ALL]):
                into = accs.setdefault(group, {})
                for name, sketch in feats.items():
                    into.setdefault(name, []).append(sketch)
    cap = CAP_FACTOR * top_k
    merged = {label: {name: FeatureSketch.merge(each, cap) for name, each in feats.items()}
              for label, feats in accs.items()}
    kinds = {f.name: f for f in spec.features}
    # ids (no top values) as the whole column says, in every split alike, as Spark's jobs do
    ids = {name for name, sketch in merged.get(rules.ALL, {}).items()
           if not rules.array(kinds[name]) and
           rules.id_like(sketch.distinct() or 0, sketch.rows - sketch.nulls)}
    per = {label: {name: sketch.finish(kinds[name], top_k, name in ids)
                   for name, sketch in feats.items()}
           for label, feats in merged.items()}
    out: dict[str, Any] = {"features": per.get(rules.ALL, {}), "top_k": top_k,
                           "computed_by": "write tasks (sketches)",
                           "quantile_rank_error": round(Deciles.rank_error(kll_k(spec)), 4),
                           "distinct_relative_sd": round(1.04 / 2 ** (HLL_LG_K / 2), 4)}
    if split_column:
        out["splits"] = {k: v for k, v in sorted(per.items()) if k != rules.ALL}
    return out


def kll_k(spec: FeatureSpec) -> int:
    """The deciles' sketch size: smaller for wide tables, whose messages carry one each."""
    return KLL_K if sum(rules.numeric(f) for f in spec.features) <= WIDE else KLL_K_WIDE


def report_bytes(spec: FeatureSpec, top_k: int, groups: int, rows: int) -> int:
    """About the most the statistics of a task of `rows` rows in `groups` splits can take in
    its report: count tables full (at the cap, or a value per row; 24 bytes a value), sketches
    full. Writes whose tasks would send more than the driver should hold leave the statistics
    to Spark's jobs."""
    full = groups * CAP_FACTOR * top_k  # values counted at most (a row holds one of a scalar)
    values = sum(min(full, rows) for f in spec.features if rules.categorical(f)) + \
        sum(full for f in spec.features if rules.token_array(f))
    sketches = sum(2 * 24 * kll_k(spec) for f in spec.features  # (exact and packed)
                   if rules.numeric(f)) * groups
    return 24 * values + sketches + 4096 * groups * len(spec.features)


def _value_counts(values: pa.Array, buffers: tuple[np.ndarray, np.ndarray] | None
                  ) -> tuple[pa.Array, pa.Array]:
    """(each distinct value, its count) of values without nulls. Strings given with their
    buffers that repeat few values (at most one in 8 distinct, found by a compiled hash pass)
    are counted from the pass's numbers (a NumPy bincount): Arrow's value_counts cost twice as
    much on a category column. Otherwise Arrow's value_counts."""
    if buffers is not None and len(values) >= DISTINCT_MIN:
        from tfspark.arrow.hashing import distinct_strings

        codes, firsts, m = distinct_strings(*buffers, len(values) // 8)
        if m >= 0:
            return (values.take(pa.array(firsts[:m])),
                    pa.array(np.bincount(codes, minlength=m).astype(np.int64)))
    vc = pc.value_counts(values)
    return vc.field("values"), vc.field("counts")


DISTINCT_MIN = 256  # strings below which Arrow's value_counts costs as little


def sum_counts(tables: list[pa.Table]) -> pa.Table:
    """Value counts added up: one table of value, n."""
    tables = [t for t in tables if t.num_rows] or tables[:1]
    if len(tables) == 1:
        return tables[0]
    both = pa.concat_tables([t.cast(tables[0].schema) for t in tables])
    return both.group_by("value").aggregate([("n", "sum")]).rename_columns(["value", "n"])


def _numbers(f: Feature, arr: pa.Array, valid: np.ndarray | None) -> np.ndarray:
    """The present values of a scalar column as the numbers the Example stores: float64 (of
    floats and decimals) or int64. valid: which rows are present (None: all of them)."""
    if f.encoding in ("float", "decimal"):
        if valid is None and pa.types.is_float64(arr.type):
            return arr.to_numpy(zero_copy_only=False)  # (no copy)
        out = pc.fill_null(arr, 0).cast(pa.float64()).to_numpy(zero_copy_only=False)
    else:
        out = to_int64(f, arr)
    return out if valid is None else out[valid]


def _num(x: float) -> Any:
    return json_float(float(x))
