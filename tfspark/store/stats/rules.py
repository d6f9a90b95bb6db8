"""Which statistics each feature gets: the rules shared by Spark's aggregation jobs and the
write tasks' sketches, so both give the same features the same statistics. No pyspark here.

Conventions (Spark describe(), SQL, TFDV): `count` is the number of non-null values; min, max,
mean, variance and quantiles are over the present, finite values; NaN and infinities of float
features are counted apart (`nan`, `pos_inf`, `neg_inf`); top values and distinct counts are of
present values. What the model sees, nulls read as the spec's default, is `filled` (mean and
variance over the finite values with each null as the default), given where nulls were filled.
"""

from __future__ import annotations

import math

from tfspark.spec.model import Feature

QUANTILES = [i / 10 for i in range(1, 10)]  # deciles: Discretization's default bucketing
MAX_TOKEN_CHARS = 256  # longer strings are text or blobs, not vocabulary: no top values
ID_SHARE = 0.5  # a scalar with more distinct values than this share of its present values ...
ID_MIN_DISTINCT = 1_000  # ... and more than this many is an id, not a vocabulary: no top values
ALL = "(all)"  # the overall group's label: no split can be named so (splits are [A-Za-z0-9_-]+)


def numeric(f: Feature) -> bool:
    """A scalar number (dates as days, timestamps as micros): moments and deciles."""
    return f.kind == "fixed" and not f.shape and f.dtype in ("int64", "float32") and \
        f.encoding in ("int", "bool", "float", "decimal", "date", "timestamp")


def nonfinite(f: Feature) -> bool:
    """Values may be NaN or infinite (floats and doubles): counted apart from the moments."""
    return f.encoding == "float"


def filled(f: Feature, count: int, mean: float | None, variance: float | None,
           nulls: int) -> dict[str, float] | None:
    """{"mean", "variance"} of the finite values with every null as the spec's default (what
    a reader gives the model), from the moments of the `count` finite present values; None
    when no null is filled in."""
    if not nulls or f.default is None or not math.isfinite(float(f.default)):
        return None  # (a NaN default marks nulls as missing: no finite value fills them)
    d = float(f.default)
    if not count or mean is None or variance is None:
        return {"mean": d, "variance": 0.0}
    n = count + nulls
    m = (count * mean + nulls * d) / n
    m2 = count * variance + (d - mean) ** 2 * count * nulls / n
    return {"mean": m, "variance": max(m2 / n, 0.0)}


def categorical(f: Feature) -> bool:
    """A scalar string (not binary), integer or boolean: top values and distinct counts."""
    return f.kind == "fixed" and not f.shape and (
        (f.dtype == "string" and not binary(f)) or f.encoding in ("int", "bool"))


def array(f: Feature) -> bool:
    """An array feature (fixed [n], variable, 2-D, a feature list; not an ml Vector): lengths."""
    return (f.kind != "fixed" or bool(f.shape)) and f.encoding != "vector"


def number_array(f: Feature) -> bool:
    """An array of numbers: moments of its elements."""
    return array(f) and f.encoding in ("int", "bool", "float", "decimal")


def token_array(f: Feature) -> bool:
    """String (not binary) and integer arrays: their elements get top values."""
    return array(f) and ((f.dtype == "string" and not binary(f)) or f.encoding == "int")


def binary(f: Feature) -> bool:
    """Raw bytes (a binary column, or arrays of them at any depth): not text."""
    return f.source_type.rstrip(">").endswith("binary")


def id_like(distinct: int, present: int) -> bool:
    """A scalar whose values nearly all differ (ids, keys, timestamps as numbers): its top
    values would be a list of ones, not a vocabulary."""
    return distinct > ID_MIN_DISTINCT and distinct > ID_SHARE * present
