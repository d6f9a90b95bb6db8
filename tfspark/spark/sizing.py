"""How write_tfrecords lays rows out: about as many tasks as files of the target size (from the
backup's parquet footers; the tasks roll their files at that size), batches sized for huge rows,
and the split column.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tfspark.spec import FeatureSpec
from tfspark.store.fs import Location, locate
from tfspark.store.uris import error_line

log = logging.getLogger("tfspark")
SPLIT_COLUMN = "__tfspark_split__"
_BATCH_BYTES = 64 * 2**20  # aim for parquet and Arrow batches of at most this size


def tfrecord_bytes(spec: FeatureSpec, rows: int, parquet_bytes: int,
                   compression: str | None) -> int:
    """About how many bytes the TFRecords of `rows` rows take, from the parquet copy's
    uncompressed size plus what an Example adds per row (framing, a key and a few tags per
    feature); gzip about a third of it. Only a guide to how many files (tasks) to write: the
    tasks roll files at the target size themselves."""
    per_row = 20 + sum(len(k.encode()) + 8 for f in spec.features for k in f.keys)
    total = parquet_bytes + rows * per_row
    return total // 3 if compression == "gzip" else total


class Footers(NamedTuple):
    """What the footers of a backup's parquet files say, read without a Spark job."""

    rows: int
    row_bytes: float | None  # the largest uncompressed bytes per row of any row group
    total_bytes: int  # uncompressed, all row groups
    nulls: dict[str, int | None]  # nulls per leaf column ("a.b"); None: a chunk did not say


def footers(files: Sequence[str | Location]) -> Footers | None:
    """The footers of parquet files (no data read); None when they cannot be read here."""
    import pyarrow.parquet as pq

    rows, worst, total = 0, 0.0, 0
    nulls: dict[str, int | None] = {}

    def footer(loc: Location) -> Any:
        with loc.open_input() as f:
            return pq.ParquetFile(f).metadata

    try:
        places = [locate(path) for path in files]
        metas = places[0].at_once(footer, places) if places else []  # (on a store at once)
        for meta in metas:
            rows += meta.num_rows
            for i in range(meta.num_row_groups):
                group = meta.row_group(i)
                total += group.total_byte_size
                if group.num_rows:
                    worst = max(worst, group.total_byte_size / group.num_rows)
                for j in range(group.num_columns):
                    chunk = group.column(j)
                    stats, key = chunk.statistics, chunk.path_in_schema
                    known = stats is not None and stats.has_null_count
                    before = nulls.get(key, 0)
                    nulls[key] = before + stats.null_count if known and before is not None \
                        else None
    except Exception as e:  # noqa: BLE001 - the caller counts with Spark instead
        log.info("tfspark: could not read the backup's footers (%s)", error_line(e))
        return None
    return Footers(rows, worst or None, total, nulls)


ARROW_ROWS = "spark.sql.execution.arrow.maxRecordsPerBatch"
ARROW_ROWS_DEFAULT = 10000  # Spark's
ONE_PASS_ROWS = 65536  # rows per Arrow batch the one-pass export's tasks take


@contextlib.contextmanager
def one_pass_batches(spark: Any) -> Iterator[None]:
    """Arrow batches of ONE_PASS_ROWS rows for the one-pass export's tasks while it runs, where
    the session has Spark's 10,000 (a value of the user's own is kept), restored afterwards.
    Each batch costs the tasks a few calls per column (encoding, null counts, the copy's
    writer) and the JVM its own; Spark 4 still ends a batch at maxBytesPerBatch (64 MiB by
    default), so rows of large values make smaller ones."""
    current = spark.conf.get(ARROW_ROWS, str(ARROW_ROWS_DEFAULT)) or str(ARROW_ROWS_DEFAULT)
    if int(current) != ARROW_ROWS_DEFAULT:
        yield
        return
    spark.conf.set(ARROW_ROWS, str(ONE_PASS_ROWS))
    try:
        yield
    finally:
        spark.conf.set(ARROW_ROWS, current)


@contextlib.contextmanager
def batch_rows(spark: Any, row_bytes: float | None) -> Iterator[None]:
    """Smaller batches for rows of huge values, restored afterwards. Spark reads parquet in
    columnar batches of 4,096 rows and sends the data source's writer Arrow batches of 10,000:
    with 50 MB strings either is gigabytes and executors die of OutOfMemoryError. Both are
    lowered so a batch holds about _BATCH_BYTES."""
    keys = {"spark.sql.parquet.columnarReaderBatchSize": 4096,
            ARROW_ROWS: ARROW_ROWS_DEFAULT}
    want = max(1, int(_BATCH_BYTES // row_bytes)) if row_bytes else None
    changed: dict[str, str] = {}
    for key, default in keys.items():
        current = spark.conf.get(key, str(default)) or str(default)
        if want is not None and 0 < want < int(current):
            changed[key] = current
            spark.conf.set(key, str(want))
    if changed:
        log.info("tfspark: batches of %d rows for rows of ~%.0f bytes", want, row_bytes)
    try:
        yield
    finally:
        for key, value in changed.items():
            spark.conf.set(key, value)


def arrange(df: DataFrame, splits: dict[str, float], split_key: str | None, seed: int,
            shuffle: bool, files: int | None) -> tuple[DataFrame, str | None]:
    """Add the split column and lay rows out in about `files` tasks (each rolls its files at
    the target size; None: as many as df has, or Spark's shuffle partitions for a shuffle).
    No shuffle unless asked: partitions are only coalesced."""
    if shuffle:
        df = (df.repartition(files, F.rand(seed)) if files else df.repartition(F.rand(seed))
              ).sortWithinPartitions(F.rand(seed + 1))
    elif files:  # no shuffle: a no-op when there are no more partitions than that already
        df = df.coalesce(files)
    split = split_of(splits, split_key, seed)
    if split is None:
        return df, None
    return df.withColumn(SPLIT_COLUMN, split), SPLIT_COLUMN


def split_names(splits: dict[str, float]) -> list[str]:
    """The splits that get rows, in order: a split of 0 gets none (and a manifest entry)."""
    return [n for n in splits if splits[n] > 0]


def split_of(splits: dict[str, float], split_key: str | None, seed: int) -> Column | None:
    """Each row's split name (None: no splits): by a hash of split_key (the same row, the same
    split, wherever it is read), else by a seeded draw per row."""
    if not splits:
        return None
    if split_key is not None:  # a hash of the key in [0, 1)
        u = F.pmod(F.xxhash64(F.col(f"`{split_key}`"), F.lit(seed)), F.lit(1 << 30)) / (1 << 30)
    else:
        u = F.rand(seed)
    names = split_names(splits)

    def pick(x: Column) -> Column:
        bound, expr = 0.0, None
        for name in names[:-1]:
            bound += splits[name]
            expr = F.when(x < bound, name) if expr is None else expr.when(x < bound, name)
        return F.lit(names[-1]) if expr is None else expr.otherwise(names[-1])

    # u is drawn once per row (a lambda's argument) and every bound compared with that value.
    # Written as CASE WHEN rand < 0.8 .. WHEN rand < 0.9 .., each rand is a generator of its
    # own that advances only on the rows its branch sees: 0.8/0.1/0.1 came out 0.8/0.18/0.02.
    return F.transform(F.array(u), pick)[0]


