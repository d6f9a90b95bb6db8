"""Everything that needs pyspark: the tfrecord data source (register), write_tfrecords and its
stages, reading into Spark, training on Spark's executors, and spark_filesystem (the pyarrow
filesystem that Spark's Hadoop settings make for a path, to read what was written with them).
The demo's sample table is sample_dataframe(spark, rows). Never imports TensorFlow;
executors import only what a task needs."""

from __future__ import annotations

from typing import Any

from tfspark.errors import require

require("pyspark", "tfspark.spark (the tfrecord data source, write_tfrecords)", "spark",
        "; on Databricks or Dataproc the runtime's pyspark is used: install without an extra")


def __getattr__(name: str) -> Any:
    if name == "spark_filesystem":
        from tfspark.spark.hadoop_stores import spark_filesystem

        return spark_filesystem
    if name in ("sample_dataframe", "COUNTRIES"):  # the demo's table, for examples and tests
        from tfspark.spark import sample

        return getattr(sample, name)
    raise AttributeError(f"module 'tfspark.spark' has no attribute {name!r}")
