"""The data set in storage, between the format (spec, wire, arrow) and the engines (spark, tf,
numpy): where files live, the manifest, write and read settings, the write of a data set
(tasks, commit protocol, part files), its parquet copy, what a reader reads, verify, where a
data set may be written, partitions and the feature statistics. Needs neither pyspark nor
TensorFlow; the import contracts in pyproject.toml say which module may use which."""
