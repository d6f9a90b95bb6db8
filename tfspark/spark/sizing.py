"""How write_tfrecords lays rows out: files sized near a target from an estimate (a small sample
encoded on the driver, never a second pass), batches sized for huge rows, and the split column.
"""

from __future__ import annotations

import contextlib
import logging
import math
import zlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tfspark.arrow.encode import BatchEncoder
from tfspark.fs import locate
from tfspark.spec import FeatureSpec

log = logging.getLogger("tfspark")
SPLIT_COLUMN = "__tfspark_split__"
_SAMPLE_ROWS = 2000
_SAMPLE_BYTES = 64 * 2**20  # at most this much sample data pulled into the driver
_BATCH_BYTES = 64 * 2**20  # aim for parquet and Arrow batches of at most this size


def row_bytes(files: list[str], spec: FeatureSpec, compression: str | None,
              null_elements: str, wide: float | None = None) -> float | None:
    """Bytes per record on disk, from encoding a sample of the staged backup read with pyarrow
    on the driver (no Spark job, no second pass); None if unknown. wide: bytes per row when
    known (from the footers); it bounds the sample in bytes, so rows of huge values (tens of MB
    each) do not pull gigabytes into the driver.
    """
    import pyarrow.parquet as pq

    cols = list(dict.fromkeys(f.path[0] for f in spec.features))
    rows = _SAMPLE_ROWS if not wide else max(1, min(_SAMPLE_ROWS, int(_SAMPLE_BYTES // wide)))
    try:
        parts, got = [], 0
        for path in files:
            loc = locate(path)
            with loc.fs.open_input_file(loc.base) as f:
                for batch in pq.ParquetFile(f).iter_batches(batch_size=rows - got, columns=cols):
                    parts.append(batch)
                    got += batch.num_rows
                    break
            if got >= rows:
                break
        if not got:
            return None
        sample = pa.Table.from_batches(parts).select(cols)
        buf, _ = BatchEncoder(spec, null_elements=null_elements).encode(sample, framed=True)
    except Exception as e:  # noqa: BLE001 - sizing is a guess; the real write reports errors
        log.warning("tfspark: could not size files from a sample (%s); one file per task",
                    str(e).splitlines()[0])
        return None
    size = len(buf) if compression != "gzip" else len(zlib.compress(buf.tobytes(), 6))
    return size / got


def footers(files: list[str]) -> tuple[int, float | None] | None:
    """(rows, largest uncompressed bytes per row of any row group) of parquet files, from their
    footers (no data read); None when they cannot be read from here."""
    import pyarrow.parquet as pq

    rows, worst = 0, 0.0
    try:
        for path in files:
            loc = locate(path)
            with loc.fs.open_input_file(loc.base) as f:
                meta = pq.ParquetFile(f).metadata
            rows += meta.num_rows
            for i in range(meta.num_row_groups):
                group = meta.row_group(i)
                if group.num_rows:
                    worst = max(worst, group.total_byte_size / group.num_rows)
    except Exception as e:  # noqa: BLE001 - the caller counts with Spark instead
        log.info("tfspark: could not read the backup's footers (%s)", e)
        return None
    return rows, worst or None


@contextlib.contextmanager
def batch_rows(spark: Any, row_bytes: float | None) -> Iterator[None]:
    """Smaller batches for rows of huge values, restored afterwards. Spark reads parquet in
    columnar batches of 4,096 rows and sends the data source's writer Arrow batches of 10,000:
    with 50 MB strings either is gigabytes and executors die of OutOfMemoryError. Both are
    lowered so a batch holds about _BATCH_BYTES."""
    keys = {"spark.sql.parquet.columnarReaderBatchSize": 4096,
            "spark.sql.execution.arrow.maxRecordsPerBatch": 10000}
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
            shuffle: bool, rows: int, row_bytes: float | None, target: int,
            max_records: int | None) -> tuple[DataFrame, str | None, int | None]:
    """Add the split column and lay rows out so files come out near `target` bytes.

    No shuffle unless asked: tasks roll files at target / row_bytes records, and partitions
    much smaller than the target are coalesced first.
    """
    per_file = max(1, int(target / row_bytes)) if row_bytes else None
    if max_records:
        per_file = min(per_file, max_records) if per_file else max_records
    n_files = max(1, math.ceil(rows / per_file)) if per_file and rows else 1
    if shuffle:
        df = df.repartition(n_files, F.rand(seed)).sortWithinPartitions(F.rand(seed + 1))
    else:  # no shuffle: a no-op when there are no more partitions than that already
        df = df.coalesce(n_files)
    if not splits:
        return df, None, per_file
    if split_key is not None:  # a hash of the key in [0, 1): the same row, the same split
        u = F.pmod(F.xxhash64(F.col(f"`{split_key}`"), F.lit(seed)), F.lit(1 << 30)) / (1 << 30)
    else:
        u = F.rand(seed)
    bound = 0.0
    expr = None
    names = list(splits)
    for name in names[:-1]:
        bound += splits[name]
        expr = (F.when(u < bound, name) if expr is None else expr.when(u < bound, name))
    expr = F.lit(names[-1]) if expr is None else expr.otherwise(names[-1])
    return df.withColumn(SPLIT_COLUMN, expr), SPLIT_COLUMN, per_file


