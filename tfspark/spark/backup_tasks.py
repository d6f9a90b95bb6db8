"""The parquet backup written and read back by tfspark's own tasks through pyarrow, for a store
Spark's parquet writer cannot reach: a `filesystem=` object, or a URI with pyarrow's query
options (Spark's Hadoop connectors know neither, and tfspark ships no jars).

Each task writes its rows to one parquet file named by its partition, the write and its
attempt (attempt ids start again at 0 in every Spark application, so the write's id keeps an
append's files apart from those already published); the driver
keeps the files of the attempts Spark counted (what `collect` returns), so a retried or killed
attempt's file is never published. The rows are read back by tasks too (one file per task), so
the TFRecords are written from exactly the staged rows, as with Spark's writer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from tfspark.errors import scrubbed
from tfspark.store.fs import Location

_WRITTEN = "file string, rows long"


def write_parquet(df: Any, staging: Location, write_id: str) -> list[tuple[str, int]]:
    """Write df's rows as parquet files under `staging`, named by the write `write_id` and
    each task attempt; returns (file, rows) of each."""

    @scrubbed
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task = f"{ctx.partitionId():05d}-{write_id}-{ctx.taskAttemptId()}" if ctx else \
            f"00000-{write_id}-0"
        name = f"part-{task}.parquet"
        rows, out, writer = 0, None, None
        try:
            for batch in batches:
                if writer is None:
                    out = staging.open_output(name)
                    writer = pq.ParquetWriter(out, batch.schema, compression="snappy")
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            if writer is not None:
                writer.close()
            if out is not None:
                out.close()
        if writer is not None:
            yield pa.RecordBatch.from_pydict({"file": [name], "rows": [rows]},
                                             schema=pa.schema([("file", pa.string()),
                                                               ("rows", pa.int64())]))

    return [(r["file"], int(r["rows"])) for r in df.mapInArrow(write, _WRITTEN).collect()]


def read_parquet(spark: Any, schema: Any, staging: Location, files: list[str]) -> Any:
    """A DataFrame of `schema` holding the rows of the parquet `files` under `staging`."""
    if not files:
        return spark.createDataFrame([], schema)

    @scrubbed
    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        for batch in batches:
            for name in batch.column("file").to_pylist():
                with staging.open_input(name) as f:
                    yield from pq.ParquetFile(f).iter_batches(batch_size=10_000)

    names = spark.createDataFrame([(f,) for f in files], "file string")
    return names.repartition(len(files)).mapInArrow(read, schema)
