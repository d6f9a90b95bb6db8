"""An embedded sample table for the demo and the tests, built with Spark SQL functions only.

Every random value comes from xxhash64(id, seed, k) rather than rand(): rand() depends on how
rows are partitioned, a hash of the row id does not, so a seed gives the same table on any
cluster and any number of cores. Nothing is generated on the driver and no Python UDF runs.
"""

from __future__ import annotations

import math

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

COUNTRIES = ("US", "IN", "BR", "DE", "FR", "JP", "NG", "MX")
# Per-country shift of the label's log-odds, so country carries signal too.
_COUNTRY_EFFECT = (0.3, -0.4, -0.2, 0.5, 0.2, 0.6, -0.6, -0.1)
_WORDS = ("great", "slow", "app", "price", "love", "support", "bug", "fast", "ok", "refund",
          "crash", "easy", "update", "thanks", "login", "screen")
_TWO53 = float(2**53)


def sample_dataframe(spark: SparkSession, rows: int = 100_000, seed: int = 0) -> DataFrame:
    """A customer-like table covering every kind of feature tfspark writes.

    Columns: id, age (~5% null), income, score (float), country (8 values), signup_date,
    last_seen, clicks (array<int>, 0-6 long), embedding (array<float>, length 8), history
    (array<array<bigint>>, ragged), comment (string, ~30% null), is_active, label (0/1; depends
    on income, age and country). Deterministic for a given seed.
    """
    r = _Rand(seed)
    base = spark.range(rows).select(F.col("id"))
    age = F.floor(r.u(1) * 62 + 18).cast("int")
    income = F.exp(F.lit(10.5) + F.lit(0.6) * r.normal(2))
    country_idx = F.floor(r.u(3) ** 1.5 * len(COUNTRIES)).cast("int")  # skewed towards US
    signup_days = F.floor(r.u(4) * 3650).cast("int")
    df = base.select(
        "id",
        F.when(r.u(5) < 0.05, F.lit(None)).otherwise(age).cast("int").alias("age"),
        income.alias("income"),
        r.normal(6).cast("float").alias("score"),
        F.element_at(F.array(*map(F.lit, COUNTRIES)), country_idx + 1).alias("country"),
        F.date_add(F.lit("2015-01-01").cast("date"), signup_days).alias("signup_date"),
        # Seen some time in the two years after signing up, in seconds.
        F.timestamp_seconds((F.lit(16436) + signup_days) * 86400
                            + F.floor(r.u(7) * 2 * 365 * 86400)).alias("last_seen"),
        _prefix([F.floor(r.u(100 + i) * 50).cast("int") for i in range(6)],
                F.floor(r.u(8) * 7)).alias("clicks"),
        F.array(*[r.normal(200 + i).cast("float") for i in range(8)]).alias("embedding"),
        _history(r),
        F.when(r.u(9) < 0.3, F.lit(None).cast("string")).otherwise(_comment(r)).alias("comment"),
        (r.u(10) < 0.7).alias("is_active"),
        country_idx.alias("_country"),
    )
    # Log-odds of the label: richer, younger and some countries are more likely positive.
    effect = F.element_at(F.array(*map(F.lit, _COUNTRY_EFFECT)), F.col("_country") + 1)
    logit = ((F.log("income") - 10.5) / 0.6 * 1.5
             - (F.coalesce(F.col("age"), F.lit(45)) - 45) * 0.04 + effect)
    noise = F.log(r.u(11) / (1 - r.u(11)))  # logistic noise: P(label) = sigmoid(logit)
    return df.withColumn("label", F.when(logit + noise > 0, 1).otherwise(0).cast("int")) \
        .drop("_country")


class _Rand:
    """Uniform and normal columns from a hash of the row id; stream k is independent of j."""

    def __init__(self, seed: int):
        self.seed = F.lit(seed).cast("long")

    def u(self, k: int | Column, *more: Column | int) -> Column:
        parts = [F.lit(x) if isinstance(x, int) else x for x in (k, *more)]
        h = F.xxhash64(F.col("id"), self.seed, *parts)
        # 53 random bits -> [0, 1); shifted half a step so log(u) and log(1-u) stay finite.
        return (F.pmod(h, F.lit(2**53)).cast("double") + 0.5) / _TWO53

    def normal(self, k: int) -> Column:
        # Box-Muller on two independent uniforms.
        return F.sqrt(-2.0 * F.log(self.u(k, 0))) * F.cos(2 * math.pi * self.u(k, 1))


def _prefix(items: list[Column], n: Column) -> Column:
    """The first n of items: a variable-length array, empty when n is 0."""
    return F.slice(F.array(*items), F.lit(1), n.cast("int"))


def _history(r: _Rand) -> Column:
    # 0-3 sessions, each with 0-4 item ids: array<array<bigint>> with ragged rows.
    def session(j: Column) -> Column:
        items = [F.pmod(F.xxhash64(F.col("id"), r.seed, F.lit(300), j, F.lit(i)), F.lit(10_000))
                 for i in range(4)]
        return _prefix(items, F.floor(r.u(301, j) * 5))

    outer = _prefix([F.lit(j) for j in range(3)], F.floor(r.u(12) * 4))
    return F.transform(outer, session).alias("history")


def _comment(r: _Rand) -> Column:
    vocab = F.array(*map(F.lit, _WORDS))
    words = [F.element_at(vocab, F.floor(r.u(400 + i) * len(_WORDS)).cast("int") + 1)
             for i in range(8)]
    return F.concat_ws(" ", _prefix(words, F.floor(r.u(13) * 8) + 1))
