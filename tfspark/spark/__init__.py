"""Everything that needs pyspark: the data source (source.py: register; write.py, commit.py,
part_files.py; read.py, infer.py, to_spark.py) and write_tfrecords (export.py and its stages:
backup.py, observe.py, sizing.py). Never imports TensorFlow; executors import only what a task
needs."""

from tfspark.errors import require

require("pyspark", "tfspark.spark (the tfrecord data source, write_tfrecords)", "spark",
        "; on Databricks or Dataproc use the runtime's pyspark: pip install tfspark")
