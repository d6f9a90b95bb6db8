# %% [markdown]
# # tfspark walkthrough: a Spark table -> parquet backup + TFRecords -> SQL -> Keras
#
# One pass through what tfspark is for, on a laptop (local Spark, no cluster):
#
# 1. build a small table and save it in the catalog;
# 2. `tfspark.write_tfrecords`: a parquet backup table plus TFRecord files, in train/test splits;
# 3. an analyst queries the backup with Spark SQL, and with DuckDB straight from its parquet files;
# 4. `tfspark.make_dataset` + `tfspark.keras_inputs` feed a small Keras model, one epoch.
#
# Run it as a script (`python examples/walkthrough.py`) or open `walkthrough.ipynb` (generated
# from this file by `python examples/make_notebook.py`). Settings come from the environment:
# `TFSPARK_WALKTHROUGH_OUT` (default `out/walkthrough`) and `TFSPARK_WALKTHROUGH_ROWS`
# (default 20000). It needs Spark and TensorFlow: `pip install 'pyspark-tfrecord[all]'`; DuckDB is
# optional (pandas is used without it). The notebook's outputs are from a real run
# (`python examples/make_notebook.py --execute`).

# %%
import os
import shutil
import sys
from pathlib import Path

import keras
from pyspark.sql import SparkSession

import tfspark
from tfspark.spark import COUNTRIES, sample_dataframe

OUT = Path(os.environ.get("TFSPARK_WALKTHROUGH_OUT", "out/walkthrough")).resolve()
ROWS = int(os.environ.get("TFSPARK_WALKTHROUGH_ROWS", "20000"))
DATA = OUT / "customers_tfrecords"
# Each run starts from scratch: the catalog below lives in memory, and a leftover table
# directory would block re-creating the table.
for leftover in (OUT / "warehouse", DATA):
    shutil.rmtree(leftover, ignore_errors=True)
print(f"writing under {OUT}, {ROWS:,} rows")

# %% [markdown]
# ## 1. A table in the catalog
#
# On Databricks or Dataproc `spark` already exists; here it is a local session. Spark's Python
# workers must run an interpreter that has tfspark installed: this one.

# %%
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
         .appName("tfspark-walkthrough")
         .config("spark.sql.warehouse.dir", str(OUT / "warehouse"))
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.ui.showConsoleProgress", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")

spark.sql("CREATE DATABASE IF NOT EXISTS walkthrough")
sample_dataframe(spark, rows=ROWS, seed=7).write.mode("overwrite").saveAsTable(
    "walkthrough.customers")
customers = spark.table("walkthrough.customers")
customers.printSchema()

# %% [markdown]
# ## 2. Parquet backup + TFRecords, split 80/20 by a hash of `id`
#
# The backup is written first and the TFRecords are made from its files, so both hold the same
# rows; the counts are checked. The feature spec travels in `_tfspark.json` next to the data.

# %%
result = tfspark.write_tfrecords(
    customers, str(DATA), label_cols=["label"], compression="gzip", mode="overwrite",
    backup_table="walkthrough.customers_backup",
    split={"train": 0.8, "test": 0.2}, split_key="id")
print(result.summary())

# %% [markdown]
# ## 3. The analyst's side: the parquet copy
#
# With Spark SQL on the backup table, then with DuckDB on the same parquet files, no Spark
# needed.

# %%
QUERY = """
SELECT country, COUNT(*) AS customers, ROUND(AVG(label), 3) AS positive_rate,
       ROUND(AVG(income)) AS avg_income
FROM {table} GROUP BY country ORDER BY customers DESC, country
"""
by_spark = spark.sql(QUERY.format(table="walkthrough.customers_backup")).toPandas()
print("Spark SQL on walkthrough.customers_backup:")
print(by_spark.to_string(index=False))

files = [f.removeprefix("file://").removeprefix("file:")
         for f in spark.table("walkthrough.customers_backup").inputFiles()]
try:
    import duckdb

    by_files = duckdb.sql(QUERY.format(table=f"read_parquet({files!r})")).df()
    engine = "DuckDB"
except ImportError:  # the same numbers with pandas
    import pandas as pd

    frame = pd.concat(pd.read_parquet(f, columns=["country", "label", "income"]) for f in files)
    by_files = (frame.groupby("country")
                .agg(customers=("label", "size"), positive_rate=("label", "mean"),
                     avg_income=("income", "mean"))
                .round({"positive_rate": 3, "avg_income": 0}).reset_index()
                .sort_values(["customers", "country"], ascending=[False, True]))
    engine = "pandas"
print(f"\n{engine} on the {len(files)} parquet files of the backup:")
print(by_files.to_string(index=False))
assert by_files["customers"].sum() == by_spark["customers"].sum() == result.rows
print(f"\n{engine} and Spark SQL agree: {result.rows:,} rows")

# %% [markdown]
# ## 4. Train: make_dataset + keras_inputs
#
# Spark is no longer needed (this part runs as well on a GPU box that only has the files).
# A sub-spec picks the features the model uses; `keras_inputs` gives one `keras.Input` per
# feature with the dtype and shape `make_dataset` yields.

# %%
spark.stop()

spec = tfspark.read_manifest(str(DATA)).spec
used = ["age", "income", "score", "is_active", "embedding", "country"]
sub = tfspark.FeatureSpec(tuple(spec[n] for n in used) + (spec["label"],))
train_ds = tfspark.make_dataset(str(DATA), batch_size=256, split="train", spec=sub, seed=0)
test_ds = tfspark.make_dataset(str(DATA), batch_size=1024, split="test", spec=sub,
                               shuffle_buffer=0)

inputs = tfspark.keras_inputs(sub)
print({name: (tuple(i.shape), i.dtype) for name, i in inputs.items()})


def as_float(name: str):
    """A feature as float32 [batch, n]."""
    x = keras.ops.cast(inputs[name], "float32")
    return x if len(x.shape) == 2 else keras.ops.expand_dims(x, -1)


numeric = keras.layers.Concatenate()([
    as_float("age") / 100.0,
    keras.ops.log(as_float("income")) - 10.5,
    as_float("score"),
    as_float("is_active"),
    as_float("embedding"),
])
country = keras.layers.StringLookup(vocabulary=list(COUNTRIES), output_mode="one_hot")(
    inputs["country"])
hidden = keras.layers.Dense(16, activation="relu")(
    keras.layers.Concatenate()([numeric, country]))
model = keras.Model(inputs=inputs, outputs=keras.layers.Dense(1, activation="sigmoid")(hidden))
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy",
              metrics=["accuracy", keras.metrics.AUC(name="auc")])
print(f"model: {len(inputs)} inputs, {model.count_params()} parameters")

# %%
history = model.fit(train_ds, epochs=1, verbose=2, shuffle=False)  # make_dataset shuffles
metrics = model.evaluate(test_ds, return_dict=True, verbose=0)
names = ("loss", "accuracy", "auc")
print("train metrics: " + ", ".join(f"{k}={history.history[k][-1]:.4f}" for k in names))
print("test metrics: " + ", ".join(f"{k}={metrics[k]:.4f}" for k in names))
