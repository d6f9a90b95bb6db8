"""Feature statistics of a data set: which statistics each feature gets and their conventions
(rules), the mergeable sketches a write's tasks gather them with and the driver merges
(sketch: FeatureSketch, TaskStats, merge), and the files beside the manifest that keep them
(files). The exact statistics Spark's jobs compute for the same features live with Spark
(tfspark.spark.stats). Nothing is imported here: the sketches need the datasketches package,
the rules and files do not."""
