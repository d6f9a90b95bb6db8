"""The data set in storage, between the format (spec, wire, arrow) and the engines (spark, tf,
numpy): where files live (fs.py), the manifest (manifest.py), write and read settings
(options.py), the commit protocol and task files (commit.py, part_files.py), what a reader
reads (read_plan.py), verify (integrity.py), where a data set may be written (placement.py),
partition directories (partitions.py) and the statistics rules, the write tasks' statistics
and their merge (stats_rules.py, stats_partial.py, stats_merge.py). Needs neither pyspark nor
TensorFlow."""
