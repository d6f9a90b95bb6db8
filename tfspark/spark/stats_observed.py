"""The statistics' first job for the scalar features of a narrow table, gathered while the
backup is written (Spark's observe, as observe.py gathers its facts) instead of by a job of its
own: one scan of the rows fewer, and on a session's first write about 1.5 s less (that job's
start-up, docs/benchmarks.md). The same aggregates (stats.aggregates: percentile_approx,
approx_count_distinct, ...) over the same rows, per split and for all rows.

Only where it can be done the same way: a split is known at the backup only when it is a hash
of split_key (a seeded draw depends on how the rows are partitioned, which the backup changes),
and the aggregates are as many as the features times the groups, so wide tables keep the job's
long form (stats._scalars), whose plan does not grow with the width.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tfspark.spark.observe import as_dict
from tfspark.spark.sizing import split_names, split_of
from tfspark.spark.stats import aggregates, features_of, sql_column
from tfspark.spec import FeatureSpec
from tfspark.spec.model import Feature
from tfspark.store import stats_rules as rules
from tfspark.store.options import WriteOptions

GROUP_COLUMN = "__tfspark_stats_split__"
MAX_AGGREGATED = 64  # scalar features x groups observed at once; more: the job's long form


def _text(value: str) -> str:
    """A SQL string literal of value."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _same(f: Feature) -> tuple[Any, ...]:
    """What the statistics of a feature depend on (stats_rules)."""
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
            where = None if label == rules.ALL else f"`{GROUP_COLUMN}` = {_text(label)}"
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
