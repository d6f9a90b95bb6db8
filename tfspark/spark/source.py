"""The Spark Python Data Source "tfrecord" (also registered as "tfspark"): the thin adapter.

Options in, writer or reader out: the data source's writer plans and commits writes, its
reader reads. Spark itself accepts only append and overwrite for Python sources;
`.option("mode", ...)` adds errorifexists and ignore.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql.types import StructType

from tfspark.errors import OptionError, scrubbed
from tfspark.spark.meanwhile import Meanwhile, make_active
from tfspark.spark.versions import DataSource, needs_data_source
from tfspark.spark.write import TfrecordWriter, plan_write
from tfspark.store.options import SparkReadOptions, WriteOptions

log = logging.getLogger("tfspark")


class TfrecordDataSource(DataSource):
    """The Spark Python data source "tfrecord": df.write / spark.read of TFRecord files.

    Register it with tfspark.register(spark); options are listed in tfspark.store.options
    (WRITE_OPTIONS, SPARK_READ_OPTIONS).
    """

    @classmethod
    def name(cls) -> str:
        """The format name Spark looks the source up by."""
        return "tfrecord"

    @scrubbed
    def writer(self, schema: StructType, overwrite: bool) -> TfrecordWriter:
        """The writer, planned on the driver: options, mode and spec checked before tasks run."""
        return plan_write(WriteOptions.from_source_options(self.options), schema, overwrite)

    @scrubbed
    def schema(self) -> StructType | str:
        """The schema to read: the manifest's written schema, else inferred from sampled records."""
        from tfspark.spark.read import read_schema

        return read_schema(SparkReadOptions.from_source_options(dict(self.options)))

    @scrubbed
    def reader(self, schema: StructType) -> Any:
        """A TfrecordReader of `schema`'s columns (one input partition per file)."""
        from tfspark.spark.read import TfrecordReader

        return TfrecordReader(SparkReadOptions.from_source_options(dict(self.options)), schema)


class TfsparkDataSource(TfrecordDataSource):
    """The same source under a name no JVM connector takes."""

    @classmethod
    def name(cls) -> str:
        """The format name: "tfspark", free even when a JVM connector holds "tfrecord"."""
        return "tfspark"


_REGISTERING = threading.Lock()
_REGISTERED: dict[int, tuple[Any, tuple[str, ...]]] = {}


def register_meanwhile(spark: Any) -> Callable[[], list[str]]:
    """register(spark) in a thread, for a caller with other work to do: the first registration
    of a session waits about 1 s on the JVM, which then overlaps that work. The calling thread
    becomes the session's active one at once (as register() makes it); the returned function
    waits for the registration and raises its error."""
    make_active(spark)
    return Meanwhile(spark, lambda: register(spark), "tfspark-register").result


def register(spark: Any) -> list[str]:
    """Register the data source as "tfspark", and as "tfrecord" when no other has that name.

    Idempotent. Spark looks Python sources up in the calling JVM thread's active session,
    which a new Python thread lacks (DATA_SOURCE_NOT_FOUND), so this also makes `spark` the
    active session of the calling thread: call it in each thread that writes. (Spark Connect
    sessions have no JVM here and need nothing.)

    Args:
        spark: the SparkSession (Spark 4).

    Returns:
        The names registered.

    Raises:
        OptionError: not a SparkSession, or a Spark without Python data sources.

    Examples:
        >>> tfspark.register(spark)
        ['tfspark', 'tfrecord']
        >>> import os
        >>> path = os.path.abspath("ids")  # (a relative one: from where Spark started)
        >>> spark.range(3).write.format("tfrecord").mode("overwrite").save(path)
        >>> spark.read.format("tfrecord").load(path).count()
        3
    """
    if not hasattr(spark, "sparkContext") and not hasattr(spark, "dataSource"):
        raise OptionError(f"tfspark.register needs a SparkSession (pyspark.sql.SparkSession), "
                          f"got {type(spark).__name__}")
    if needs_data_source("the tfrecord data source"):
        raise OptionError(needs_data_source("the tfrecord data source (tfspark.register, "
                                            "spark.read/df.write.format('tfrecord'))"))
    make_active(spark)
    # Spark's registry checks and adds a name in two steps: two threads registering at once
    # get DATA_SOURCE_ALREADY_EXISTS for our own source.
    with _REGISTERING:
        if id(spark) in _REGISTERED:  # once per session: Spark warns on each replacement
            return list(_REGISTERED[id(spark)][1])
        if not _found_installed(spark, TfsparkDataSource.name()):  # (replacing it, Spark warns)
            spark.dataSource.register(TfsparkDataSource)
        names = ["tfspark"]
        try:
            spark.dataSource.register(TfrecordDataSource)
            names.append("tfrecord")
        except Exception as e:  # DATA_SOURCE_ALREADY_EXISTS: a JVM connector on the classpath
            if "ALREADY_EXISTS" not in str(e):
                raise
            if not getattr(register, "_warned", False):
                log.warning("tfspark: another data source is already named 'tfrecord' (a JVM "
                            "connector on the classpath?); use format('tfspark') for tfspark")
                register._warned = True  # type: ignore[attr-defined]
        _REGISTERED[id(spark)] = (spark, tuple(names))  # the session kept: ids stay unique
    return names


def _found_installed(spark: Any, name: str) -> bool:
    """Whether Spark 4 already has the source `name` from an installed pyspark_* module (the
    wheel's pyspark_tfspark); False where that cannot be asked (Spark Connect: no JVM here)."""
    jvm_session = getattr(spark, "_jsparkSession", None)
    if jvm_session is None:
        return False
    try:
        return bool(jvm_session.sessionState().dataSourceManager().dataSourceExists(name))
    except Exception:  # noqa: BLE001 - an older or changed JVM API: register as before
        return False
