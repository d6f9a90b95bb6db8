"""Feature statistics from Spark's jobs, exact where the write tasks' sketches estimate.

Two aggregation jobs over the rows write_tfrecords writes (its backup, with the split column),
run while its tasks write the TFRecords:
  1. per split and overall: count, nulls, min, max, mean, variance (population) and approximate
     deciles of every numeric fixed scalar; min/max/mean of the lengths of array features
     (for the scalars of a narrow table with a hash split or none, the same aggregates are
     gathered while the backup is written instead: Observed, below);
  2. the top-K values with their counts of string scalars (whose values are at most 256
     characters: longer ones are text, not a vocabulary) and of integer scalars with at most K
     distinct values; and approximate distinct counts.
Array features (1-D, 2-D and SequenceExample feature lists) get statistics of their elements
too, what pooling layers need: count, min, max, mean and variance of numbers (job 1, with
Spark's array functions, no explode), the top-K elements of string and integer arrays (job 2).
Job 1 takes every scalar feature at once in long form (a plan whatever the width); array
features go per group of 64 (their plan grows with every aggregate). No top values for ids
(rules.id_like: nearly a distinct value per row).
Conventions in the statistics' rules: counts of present values, moments and quantiles of the finite
ones, NaN and infinities counted apart, and `filled` for what the model sees. Stored in the
manifest as stats["features"] = {name: {...}} (all rows) and
stats["splits"] = {split: {name: {...}}}; what is approximate says its relative error.

Observed: the first job for the scalar features of a narrow table, gathered while the backup
is written (Spark's observe, as the write's row facts are) instead of by a job of its own: one
scan of the rows fewer, and on a session's first write about 1.5 s less (that job's start-up).
The same aggregates (percentile_approx, approx_count_distinct, ...) over the same rows, per
split and for all rows. Only where it can be done the same way: a split is known at the backup
only when it is a hash of split_key (a seeded draw depends on how the rows are partitioned,
which the backup changes), and the aggregates are as many as the features times the groups, so
wide tables keep the job's long form (_scalars), whose plan does not grow with the width.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tfspark.spark.observe import as_dict
from tfspark.spark.sizing import split_names, split_of
from tfspark.spec import FeatureSpec
from tfspark.spec.kinds import json_float
from tfspark.spec.model import Feature
from tfspark.store.options import WriteOptions
from tfspark.store.stats import rules

QUANTILE_ACCURACY = 1_000  # percentile_approx: relative error 1 / accuracy (deciles need no more)
DISTINCT_RSD = 0.05  # approx_count_distinct's relative standard deviation (52 buffer words)
FEATURES_PER_JOB = 64  # wider tables: one aggregation per group (a plan of 1000 HLLs is huge)


def sql_column(f: Feature) -> str:
    """SQL: the feature's column (struct fields by their path)."""
    return ".".join(f"`{p.replace('`', '``')}`" for p in f.path)


def _elements(f: Feature, c: str) -> str:
    """SQL: an array column's elements as one flat array without nulls (as the writer stores
    them: null elements are refused or dropped)."""
    flat = f"flatten({c})" if f.kind in ("ragged", "sequence") else c
    return f"filter({flat}, x -> x IS NOT NULL)"


def _value(f: Feature, c: str) -> str:
    """SQL: the column as the number the Example stores (dates as days, timestamps as
    micros)."""
    if f.encoding == "date":
        return f"CAST(datediff({c}, DATE'1970-01-01') AS DOUBLE)"
    if f.encoding == "timestamp":
        return f"CAST(unix_micros(CAST({c} AS TIMESTAMP)) AS DOUBLE)"
    return f"CAST({c} AS DOUBLE)"


_INF = "CAST('Infinity' AS DOUBLE)"


def _finite(f: Feature, v: str) -> str:
    """SQL: v where it is a finite number, null where NaN or infinite (floats only can be)."""
    if not rules.nonfinite(f):
        return v
    return f"CASE WHEN NOT isnan({v}) AND abs({v}) != {_INF} THEN {v} END"


def _nonfinite_counts(v: str, i: int, prefix: str) -> list[str]:
    """SQL: counts of NaN, +inf and -inf in v (for elements: v is their arrays, counted by
    size)."""
    tests = (("nan", "isnan({})"), ("pinf", "{} = " + _INF), ("ninf", "{} = -" + _INF))
    if prefix:
        return [f"sum(size(filter({v}, x -> {test.format('x')}))) AS {prefix}{name}{i}"
                for name, test in tests]
    return [f"sum(CASE WHEN {test.format(v)} THEN 1 ELSE 0 END) AS {name}{i}"
            for name, test in tests]


def compute(df: DataFrame, spec: FeatureSpec, split_col: str | None,
            top_k: int = 10_000, observed: dict[str, dict[str, Any]] | None = None
            ) -> dict[str, Any]:
    """{"features": {name: stats}, "splits": {split: {name: stats}}, "top_k": K, ...} of df.
    observed: the scalar features' job-1 statistics gathered while the backup was written
    (Observed), {split or ALL: {name: stats}}; their job is then not run."""
    group = f"`{split_col.replace('`', '``')}`" if split_col else f"'{rules.ALL}'"
    keyed = df.selectExpr(f"{group} AS _split", *[f"{sql_column(f)} AS x{i}"
                                                 for i, f in enumerate(spec.features)])
    per: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (observed or {}).items()}
    indexed = list(enumerate(spec.features))
    scalars = [(i, f) for i, f in indexed if not rules.array(f)]
    if scalars and observed is None:
        _scalars(keyed, scalars, split_col, per)
    arrays = [(i, f) for i, f in indexed if rules.array(f)]
    for lo in range(0, len(arrays), FEATURES_PER_JOB):
        _aggregate(keyed, arrays[lo:lo + FEATURES_PER_JOB], split_col, per)
    # Top values: string features of short values; an integer feature only when it has at
    # most top_k distinct values (more is a number or an id space, not a vocabulary).
    overall = per.get(rules.ALL, {})
    def short(f: Feature) -> bool:
        return (overall.get(f.name, {}).get("max_chars") or 0) <= rules.MAX_TOKEN_CHARS

    def few(f: Feature) -> bool:
        return overall.get(f.name, {}).get("distinct_approx", 0) <= top_k

    def ids(f: Feature) -> bool:
        s = overall.get(f.name, {})
        return rules.id_like(s.get("distinct_approx", 0), s.get("rows", 0) - s.get("nulls", 0))

    wanted = {f.name for f in spec.features if rules.token_array(f) or (
        rules.categorical(f) and not ids(f) and (short(f) if f.dtype == "string" else few(f)))}
    _top_values(keyed, spec, split_col, top_k, per, wanted)
    out: dict[str, Any] = {"features": per.get(rules.ALL, {}), "top_k": top_k,
                           "quantile_relative_error": 1 / QUANTILE_ACCURACY,
                           "distinct_relative_sd": DISTINCT_RSD}
    if split_col:
        out["splits"] = {k: v for k, v in sorted(per.items()) if k != rules.ALL}
    return out


_QUANTILES = "array(" + ", ".join(f"{q!r}D" for q in rules.QUANTILES) + ")"


def _scalars(keyed: DataFrame, indexed: list[tuple[int, Feature]], split_col: str | None,
             per: dict[str, dict[str, Any]]) -> None:
    """Job 1 for every scalar feature at once, in long form: one row (feature, number, integer,
    string, is null) per row and feature, grouped by feature and split. Its plan has one
    set of aggregates whatever the number of features (wide, a plan grows with every
    aggregate: 1,000 features took minutes to plan), and each aggregate sees the values the
    wide form gave it, in the same order."""
    parts = []
    for i, f in indexed:
        c = f"x{i}"
        number = _value(f, c) if rules.numeric(f) else "CAST(NULL AS DOUBLE)"
        whole = f"CAST({c} AS BIGINT)" if rules.categorical(f) and f.dtype != "string" \
            else "CAST(NULL AS BIGINT)"
        text = f"CAST({c} AS STRING)" if rules.categorical(f) and f.dtype == "string" \
            else "CAST(NULL AS STRING)"
        parts.append(f"{i}, {number}, {whole}, {text}, {c} IS NULL")
    long = keyed.selectExpr(
        "_split", f"stack({len(parts)}, {', '.join(parts)}) AS (fi, v, k, s, isnull)")
    fin = f"CASE WHEN NOT isnan(v) AND abs(v) != {_INF} THEN v END"
    aggs = ["count(1) AS rows", "sum(CASE WHEN isnull THEN 1 ELSE 0 END) AS n",
            "count(v) AS c", f"count({fin}) AS fc", f"min({fin}) AS lo", f"max({fin}) AS hi",
            f"avg({fin}) AS m", f"var_pop({fin}) AS va",
            f"percentile_approx({fin}, {_QUANTILES}, {QUANTILE_ACCURACY}) AS q",
            *_nonfinite_counts("v", 0, ""),
            f"approx_count_distinct(k, {DISTINCT_RSD}) AS dk",
            f"approx_count_distinct(s, {DISTINCT_RSD}) AS ds", "max(length(s)) AS mc"]
    # Without splits one group is all rows: a rollup would aggregate everything twice.
    # With them, per split and per feature; a rollup would add a group over every feature
    # at once, as costly as the others and of no use (grouping sets: PySpark 4).
    if not split_col:
        grouped = long.groupBy("fi", "_split")
    elif hasattr(long, "groupingSets"):
        grouped = long.groupingSets([["fi", "_split"], ["fi"]], "fi", "_split")
    else:
        grouped = long.rollup("fi", "_split")
    features = dict(indexed)
    for r in grouped.agg(*[F.expr(a) for a in aggs]).collect():
        if r["fi"] is None:  # the rollup's total over every feature
            continue
        i, f = r["fi"], features[r["fi"]]
        wide = {"rows": r["rows"], f"n{i}": r["n"]}  # as _aggregate names them
        if rules.numeric(f):
            wide.update({f"c{i}": r["c"], f"fc{i}": r["fc"], f"lo{i}": r["lo"],
                         f"hi{i}": r["hi"], f"m{i}": r["m"], f"v{i}": r["va"],
                         f"q{i}": r["q"]})
            if rules.nonfinite(f):
                wide.update({f"nan{i}": r["nan0"], f"pinf{i}": r["pinf0"],
                             f"ninf{i}": r["ninf0"]})
        if rules.categorical(f):
            wide[f"d{i}"] = r["ds"] if f.dtype == "string" else r["dk"]
            if f.dtype == "string":
                wide[f"mc{i}"] = r["mc"]
        label = rules.ALL if r["_split"] is None else r["_split"]
        per.setdefault(label, {}).update(features_of(wide, [(i, f)]))


def _aggregate(keyed: DataFrame, indexed: list[tuple[int, Feature]], split_col: str | None,
               per: dict[str, dict[str, Any]]) -> None:
    """Job 1 for some array features: per split and for all rows (rollup adds the all-rows
    group; without splits `keyed` holds the all-rows label already)."""
    aggs = aggregates(indexed)
    # Without splits one group is all rows: a rollup would aggregate everything twice.
    grouped = keyed.rollup("_split") if split_col else keyed.groupBy("_split")
    for r in grouped.agg(*[F.expr(a) for a in aggs]).collect():
        label = rules.ALL if r["_split"] is None else r["_split"]
        per.setdefault(label, {}).update(features_of(r.asDict(), indexed))


def aggregates(indexed: list[tuple[int, Feature]], cols: dict[int, str] | None = None,
               where: str | None = None) -> list[str]:
    """SQL: job 1's aggregates of these features (read back by features_of), over every row
    or over the rows where `where` holds; cols: each feature's column (default x{i}, as
    `keyed` names them)."""
    # Aggregates as SQL text: built with Column calls they cost PySpark 4 several py4j round
    # trips each (call-site capture), seconds per job on wide tables.
    quantiles = _QUANTILES
    aggs: list[str] = ["count(1) AS rows" if where is None else
                       f"sum(CASE WHEN {where} THEN 1 ELSE 0 END) AS rows"]
    for i, f in indexed:
        col = cols[i] if cols else f"x{i}"
        c = col if where is None else f"(CASE WHEN {where} THEN {col} END)"
        aggs.append(f"sum(CASE WHEN {c} IS NULL{'' if where is None else f' AND {where}'} "
                    f"THEN 1 ELSE 0 END) AS n{i}")
        if rules.numeric(f):
            v = _value(f, c)
            fin = _finite(f, v)
            aggs += [f"count({v}) AS c{i}", f"count({fin}) AS fc{i}", f"min({fin}) AS lo{i}",
                     f"max({fin}) AS hi{i}", f"avg({fin}) AS m{i}", f"var_pop({fin}) AS v{i}",
                     f"percentile_approx({fin}, {quantiles}, {QUANTILE_ACCURACY}) AS q{i}"]
            if rules.nonfinite(f):
                aggs += _nonfinite_counts(v, i, "")
        elif rules.array(f):
            size = f"CASE WHEN {c} IS NOT NULL THEN size({c}) END"
            aggs += [f"min({size}) AS llo{i}", f"max({size}) AS lhi{i}", f"avg({size}) AS lm{i}"]
            if rules.number_array(f):
                e = f"transform({_elements(f, c)}, x -> CAST(x AS DOUBLE))"
                fe = f"filter({e}, x -> {_finite(f, 'x')} IS NOT NULL)"
                aggs += [f"sum(size({e})) AS ec{i}", f"sum(size({fe})) AS efc{i}",
                         f"sum(aggregate({fe}, 0D, (a, x) -> a + x)) AS es{i}",
                         f"sum(aggregate({fe}, 0D, (a, x) -> a + x * x)) AS eq{i}",
                         f"min(array_min({fe})) AS elo{i}", f"max(array_max({fe})) AS ehi{i}"]
                if rules.nonfinite(f):
                    aggs += _nonfinite_counts(e, i, "e")
            elif f.dtype == "string" and rules.token_array(f):
                aggs.append(f"max(array_max(transform({_elements(f, c)}, x -> length(x)))) "
                            f"AS mc{i}")
        if rules.categorical(f):
            # as the long form counts them (_scalars): an HLL hashes an int and a bigint apart
            whole = c if f.dtype == "string" else f"CAST({c} AS BIGINT)"
            aggs.append(f"approx_count_distinct({whole}, {DISTINCT_RSD}) AS d{i}")
            if f.dtype == "string":
                aggs.append(f"max(length({c})) AS mc{i}")
    return aggs


def features_of(r: dict[str, Any], indexed: list[tuple[int, Feature]]) -> dict[str, Any]:
    """{name: stats} of these features from one group's row of `aggregates`."""
    out: dict[str, Any] = {}
    for i, f in indexed:
        s: dict[str, Any] = {"rows": int(r["rows"]), "nulls": int(r[f"n{i}"] or 0)}
        if f"c{i}" in r:
            s["count"] = int(r[f"c{i}"] or 0)
            if f"nan{i}" in r:
                s.update(nan=int(r[f"nan{i}"] or 0), pos_inf=int(r[f"pinf{i}"] or 0),
                         neg_inf=int(r[f"ninf{i}"] or 0))
            finite = int(r[f"fc{i}"] or 0)
            if finite:
                s.update(min=_num(r[f"lo{i}"]), max=_num(r[f"hi{i}"]), mean=_num(r[f"m{i}"]),
                         variance=_num(r[f"v{i}"]),
                         quantiles={"probabilities": rules.QUANTILES,
                                    "values": [_num(q) for q in r[f"q{i}"] or []]})
            model = rules.filled(f, finite, r[f"m{i}"], r[f"v{i}"], s["nulls"])
            if model is not None:
                s["filled"] = {k: _num(v) for k, v in model.items()}
        if f"llo{i}" in r:
            s["length"] = {"min": r[f"llo{i}"], "max": r[f"lhi{i}"],
                           "mean": _num(r[f"lm{i}"])}
        if r.get(f"ec{i}"):
            e: dict[str, Any] = {"count": int(r[f"ec{i}"])}
            if f"enan{i}" in r:
                e.update(nan=int(r[f"enan{i}"] or 0), pos_inf=int(r[f"epinf{i}"] or 0),
                         neg_inf=int(r[f"eninf{i}"] or 0))
            n = int(r[f"efc{i}"] or 0)
            if n:
                mean = float(r[f"es{i}"]) / n
                # E[x^2] - mean^2 in float64, clamped: rounding may leave a tiny negative.
                variance = max(float(r[f"eq{i}"]) / n - mean * mean, 0.0)
                e.update(min=_num(r[f"elo{i}"]), max=_num(r[f"ehi{i}"]), mean=_num(mean),
                         variance=_num(variance))
            s["elements"] = e
        if f"d{i}" in r:
            s["distinct_approx"] = int(r[f"d{i}"] or 0)
        if f"mc{i}" in r:
            s["max_chars"] = int(r[f"mc{i}"] or 0)
        out[f.name] = s
    return out


def _text(f: Feature, c: str) -> str:
    """SQL: a scalar as the text its top values are counted by (booleans as 0 and 1)."""
    return f"CAST(CAST({c} AS INT) AS STRING)" if f.encoding == "bool" else \
        f"CAST({c} AS STRING)"


def _element_type(f: Feature) -> str:
    """The Spark type of an array feature's elements (its source type, arrays unwrapped)."""
    t = f.source_type
    while t.startswith("array<"):
        t = t[len("array<"):-1]
    return t


def _num(x: Any) -> Any:
    """A number for JSON (NaN and infinities as their words, as the spec stores them)."""
    return None if x is None else json_float(float(x))


def _top_values(keyed: DataFrame, spec: FeatureSpec, split_col: str | None, top_k: int,
                per: dict[str, dict[str, Any]], wanted: set[str]) -> None:
    """The top_k values (most frequent first, ties by value) of the `wanted` features, per
    split and overall, in one job: counts per split, summed for all rows, ranked."""
    cats = [(i, f) for i, f in enumerate(spec.features) if f.name in wanted]
    if not cats:
        return
    # SQL text, features by number (no Column calls: each costs PySpark 4 py4j round trips).
    scalars = [f"named_struct('f', {i}, 'value', {_text(f, f'x{i}')})"
               for i, f in cats if not rules.array(f)]
    parts = ([f"array({', '.join(scalars)})"] if scalars else []) + [
        f"transform(coalesce({_elements(f, f'x{i}')}, CAST(array() AS "
        f"array<{_element_type(f)}>)), x -> named_struct('f', {i}, 'value', CAST(x AS STRING)))"
        for i, f in cats if rules.array(f)]
    pairs = parts[0] if len(parts) == 1 else f"flatten(array({', '.join(parts)}))"
    exploded = keyed.selectExpr("_split", f"explode({pairs}) AS p").selectExpr(
        "_split", "p.f AS feature", "p.value AS value").where("value IS NOT NULL")
    counts = exploded.groupBy("feature", "value", "_split").agg(F.count(F.lit(1)).alias("n"))
    if split_col is None:
        counts = counts.withColumn("_split", F.lit(None).cast("string"))
    else:  # and for all rows: the per-split counts summed (small next to the rows)
        counts = counts.unionByName(counts.groupBy("feature", "value").agg(
            F.sum("n").alias("n")).withColumn("_split", F.lit(None).cast("string")))
    from pyspark.sql.window import Window

    w = Window.partitionBy("feature", "_split").orderBy(F.desc("n"), F.asc("value"))
    top = counts.withColumn("r", F.row_number().over(w)).where(F.col("r") <= top_k) \
        .select("feature", "value", "_split", "n", "r").collect()
    kinds = dict(cats)
    lists: dict[tuple[str, str], list[tuple[int, Any, int]]] = {}
    for row in top:
        label = rules.ALL if row["_split"] is None else row["_split"]
        f = kinds[row["feature"]]
        value = row["value"] if f.dtype == "string" else int(row["value"])
        lists.setdefault((label, f.name), []).append((int(row["r"]), value, int(row["n"])))
    for (label, name), items in lists.items():
        if label in per and name in per[label]:  # ties by value: numerically for integers
            per[label][name]["top"] = [[v, n] for _, v, n in sorted(
                items, key=lambda t: (-t[2], t[1]))]


# ---------------------------------------------------------------- observed with the backup

GROUP_COLUMN = "__tfspark_stats_split__"
MAX_AGGREGATED = 64  # scalar features x groups observed at once; more: the job's long form


def _literal(value: str) -> str:
    """A SQL string literal of value."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _same(f: Feature) -> tuple[Any, ...]:
    """What the statistics of a feature depend on (the rules)."""
    return (f.kind, f.dtype, f.encoding, f.shape)


@dataclasses.dataclass
class Observed:
    """The scalar features' statistics of one write, observed on its backup's rows."""

    indexed: list[tuple[int, Feature]]
    groups: list[str]  # rules.ALL, then each split's name
    split: Column | None

    @classmethod
    def plan(cls, spec: FeatureSpec, opts: WriteOptions) -> Observed | None:
        """None when this write's statistics are left to the job (see the module)."""
        splits = dict(opts.split or {})
        if not (opts.stats and opts.stats_exact) or (splits and opts.split_key is None):
            return None
        indexed = [(i, f) for i, f in enumerate(spec.features) if not rules.array(f)]
        groups = [rules.ALL] + split_names(splits)
        if not indexed or len(indexed) * len(groups) > MAX_AGGREGATED:
            return None
        return cls(indexed, groups, split_of(splits, opts.split_key, opts.seed))

    def keyed(self, df: DataFrame) -> DataFrame:
        """df with each row's split (dropped again before the backup is written)."""
        return df if self.split is None else df.withColumn(GROUP_COLUMN, self.split)

    def metrics(self) -> list[Column]:
        """The observed aggregates: a struct per group."""
        cols = {i: sql_column(f) for i, f in self.indexed}
        out = []
        for k, label in enumerate(self.groups):
            where = None if label == rules.ALL else f"`{GROUP_COLUMN}` = {_literal(label)}"
            out.append(F.expr(f"struct({', '.join(aggregates(self.indexed, cols, where))}) "
                              f"AS tfspark_stats{k}"))
        return out

    def read(self, observed: dict[str, Any], spec: FeatureSpec
             ) -> dict[str, dict[str, Any]] | None:
        """{split or ALL: {name: stats}} as stats.compute takes them; None (the job then runs)
        when the spec the write settled on treats a scalar otherwise than the one observed, or
        nothing was observed."""
        final = {f.name: f for f in spec.features}
        if any(f.name not in final or _same(final[f.name]) != _same(f)
               for _, f in self.indexed) or \
                any(f"tfspark_stats{k}" not in observed for k in range(len(self.groups))):
            return None
        per: dict[str, dict[str, Any]] = {}
        for k, label in enumerate(self.groups):
            row = as_dict(observed[f"tfspark_stats{k}"])
            if label == rules.ALL or row["rows"]:  # a split without rows has no statistics
                per[label] = features_of(row, self.indexed)
        return per
