"""Facts about a DataFrame gathered while it is written (Spark's observe), never a second pass:
row count, nulls per feature, and array/vector lengths that decide FixedLen versus VarLen.

When every feature is a scalar, the backup's parquet footers hold them (rows, and nulls per
column), and write_tfrecords reads them there instead, the write's tasks counting the nulls the
footers do not say: Spark's observed aggregate cost a first write in a fresh session about
0.45 s (docs/benchmarks.md)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from tfspark.spark.sizing import Footers
from tfspark.spec import FeatureSpec
from tfspark.store.write import RowFacts, check_append_rows, label_nulls

__all__ = ["check_append_rows", "facts", "footer_facts", "footers_suffice", "label_nulls",
           "metrics"]

NAME = "facts"  # the one observed metric: a struct of every fact


def _col(path: tuple[str, ...]) -> str:
    return ".".join(f"`{p.replace('`', '``')}`" for p in path)


def metrics(spec: FeatureSpec) -> list[Column]:
    """The aggregates observed while the backup is written: a struct of the row count, nulls
    per feature, and min/max lengths of variable-length features (read back with `facts`).
    One SQL expression: built from Column calls, each a PySpark 4 py4j round trip or more,
    1,000 features took 9 s to describe and the plan of 1,000 metrics 2.7x as long to run.
    ml Vectors' lengths come apart, as columns (vector_to_array is no SQL function)."""
    parts = ["count(1) AS rows"]
    vectors: list[Column] = []
    for i, f in enumerate(spec.features):
        c = _col(f.path)
        parts.append(f"sum(CASE WHEN {c} IS NULL THEN 1 ELSE 0 END) AS n{i}")
        if f.kind == "varlen" and f.encoding == "vector":
            from pyspark.ml.functions import vector_to_array

            column = F.col(c)
            length = F.when(column.isNotNull(), F.size(vector_to_array(column)))
            vectors += [F.min(length).alias(f"lo{i}"), F.max(length).alias(f"hi{i}")]
        elif f.kind == "varlen":
            size = f"CASE WHEN {c} IS NOT NULL THEN size({c}) END"
            parts += [f"min({size}) AS lo{i}", f"max({size}) AS hi{i}"]
    return [F.expr(f"struct({', '.join(parts)}) AS {NAME}"), *vectors]


def facts(observed: dict[str, Any], spec: FeatureSpec,
          detect_fixed_lengths: bool = True) -> RowFacts:
    """The rows' facts from what `metrics` observed; a varlen feature whose lengths are all
    the same n > 0 gets shape [n] when detect_fixed_lengths.
    """
    found = observed.get(NAME)
    observed = {**observed, **(as_dict(found) if found is not None else {})}
    shapes: dict[str, list[int]] = {}
    nulls: dict[str, int] = {}
    for i, f in enumerate(spec.features):
        nulls[f.name] = int(observed.get(f"n{i}") or 0)
        lo, hi = observed.get(f"lo{i}"), observed.get(f"hi{i}")
        if detect_fixed_lengths and lo is not None and lo == hi and lo > 0:
            shapes[f.name] = [int(lo)]
    return RowFacts(int(observed.get("rows") or 0), nulls, shapes)


def as_dict(row: Any) -> dict[str, Any]:
    """The observed struct as a dict: a Row (Spark 4), or the JVM's Row that Spark 3.5 hands
    back through py4j (its fields are numbers, null, or arrays of numbers: as lists)."""
    if hasattr(row, "asDict") and not hasattr(row, "schema"):
        return row.asDict()
    fields = row.schema().fields()
    return {f.name(): (list(row.getList(i)) if f.dataType().typeName() == "array"
                       and not row.isNullAt(i) else row.get(i))
            for i, f in enumerate(fields)}


def footers_suffice(spec: FeatureSpec) -> bool:
    """Whether the backup's parquet footers give every fact: scalar features only (an array's
    footer counts null elements, not null rows, and holds no lengths), at paths that name one
    parquet column each (no dot inside a name)."""
    return all(f.kind == "fixed" and not f.shape and f.encoding != "vector"
               and not any("." in p for p in f.path) for f in spec.features)


def footer_facts(spec: FeatureSpec, read: Footers | None) -> tuple[RowFacts, list[str]]:
    """The facts of `facts` from the footers (footers_suffice(spec)), and the features whose
    nulls they do not say (parquet keeps no statistics of a chunk with a value over 4 KB, say):
    the write's tasks count those. rows is None when the footers could not be read."""
    nulls: dict[str, int] = {}
    unknown = []
    for f in spec.features:
        n = read.nulls.get(".".join(f.path)) if read is not None else None
        if n is None:
            unknown.append(f.name)
        else:
            nulls[f.name] = n
    return RowFacts(read.rows if read is not None else None, nulls), unknown
