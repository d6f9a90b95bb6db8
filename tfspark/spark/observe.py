"""Facts about a DataFrame gathered while it is written (Spark's observe), never a second pass:
row count, nulls per feature, and array/vector lengths that decide FixedLen versus VarLen."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from tfspark.spec import FeatureSpec


def _col(path: tuple[str, ...]) -> Column:
    return F.col(".".join(f"`{p.replace('`', '``')}`" for p in path))


def _length(feature: Any) -> Column:
    c = _col(feature.path)
    if feature.encoding == "vector":
        from pyspark.ml.functions import vector_to_array

        c = vector_to_array(c)
    return F.size(c)


def metrics(spec: FeatureSpec) -> list[Column]:
    """Aggregate columns observed while the backup is written: the row count, nulls per feature,
    and min/max lengths of variable-length features (read back with `facts`).
    """
    out = [F.count(F.lit(1)).alias("rows")]
    for i, f in enumerate(spec.features):
        c = _col(f.path)
        out.append(F.sum(F.when(c.isNull(), 1).otherwise(0)).alias(f"n{i}"))
        if f.kind == "varlen":
            size = F.when(c.isNotNull(), _length(f))
            out += [F.min(size).alias(f"lo{i}"), F.max(size).alias(f"hi{i}")]
    return out


def facts(observed: dict[str, Any], spec: FeatureSpec,
          detect_fixed_lengths: bool = True) -> dict[str, Any]:
    """{rows, null_counts, shapes} from the observed `metrics`; a varlen feature whose lengths
    are all the same n > 0 gets shape [n] when detect_fixed_lengths.
    """
    shapes: dict[str, list[int]] = {}
    nulls: dict[str, int] = {}
    for i, f in enumerate(spec.features):
        nulls[f.name] = int(observed.get(f"n{i}") or 0)
        lo, hi = observed.get(f"lo{i}"), observed.get(f"hi{i}")
        if detect_fixed_lengths and lo is not None and lo == hi and lo > 0:
            shapes[f.name] = [int(lo)]
    return {"rows": int(observed.get("rows") or 0), "null_counts": nulls, "shapes": shapes}
