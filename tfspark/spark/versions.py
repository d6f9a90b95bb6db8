"""What each Spark version offers tfspark, decided once.

Spark 4.0 brought Python data sources (pyspark.sql.datasource): `spark.read.format("tfrecord")`
and `df.write.format("tfrecord")` need it. write_tfrecords, `tfspark export`, the export job and
make_converter run their tasks through mapInArrow (Spark 3.3) and work on Spark 3.5 too: there
the data source's base classes below are plain stand-ins, so the writer that the tasks share
with the data source imports, and register() says in one line what needs Spark 4.
"""

from __future__ import annotations

from typing import Any

import pyspark

VERSION = pyspark.__version__
MAJOR_MINOR = tuple(int(p) for p in VERSION.split(".")[:2])
OLDEST = (3, 5)  # write_tfrecords and tfspark export: tested on 3.5 and 4.x
DATA_SOURCE = (4, 0)  # spark.read / df.write .format("tfrecord")

try:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )

    HAS_DATA_SOURCE = True
except ImportError:  # Spark 3.5: no Python data sources
    HAS_DATA_SOURCE = False

    class DataSource:  # type: ignore[no-redef]
        """Stand-in: Spark 3.5 has no Python data sources."""

        def __init__(self, options: dict[str, str]):
            self.options = options

    class DataSourceArrowWriter:  # type: ignore[no-redef]
        """Stand-in: Spark 3.5 has no Python data sources."""

    class DataSourceReader:  # type: ignore[no-redef]
        """Stand-in: Spark 3.5 has no Python data sources."""

    class InputPartition:  # type: ignore[no-redef]
        """Stand-in: Spark 3.5 has no Python data sources."""

        def __init__(self, value: Any):
            self.value = value

    class WriterCommitMessage:  # type: ignore[no-redef]
        """Stand-in: Spark 3.5 has no Python data sources."""


def needs_data_source(what: str) -> str:
    """The one line that says `what` needs Spark 4's Python data sources ("" when here)."""
    if HAS_DATA_SOURCE:
        return ""
    return (f"{what} needs Spark 4.0 or newer (Python data sources); this is PySpark "
            f"{VERSION}. On Spark 3.5 use tfspark.write_tfrecords (or tfspark export) to "
            f"write and tfspark.read_batches / make_dataset to read")


def check_supported() -> None:
    """Refuse a PySpark older than 3.5 in one line."""
    from tfspark.errors import OptionError

    if MAJOR_MINOR < OLDEST:
        raise OptionError(f"tfspark needs PySpark 3.5 or newer (4.x for the tfrecord data "
                          f"source); this is PySpark {VERSION}: pip install 'pyspark>=3.5'")
