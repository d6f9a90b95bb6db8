"""Spark 4 finds Python data sources by themselves: at a session's first data source call it
imports every installed top-level module named `pyspark_*` and registers its `DefaultSource`.
This one makes `format("tfspark")` work in every session and thread with no
`tfspark.register(spark)`; the name "tfrecord" is left to register(), which checks that no
JVM connector holds it (a source found here would shadow one)."""

try:
    from tfspark.spark.source import TfsparkDataSource as DefaultSource  # noqa: F401
except Exception:  # noqa: BLE001, S110 - an error here would fail every Python source's lookup
    pass
