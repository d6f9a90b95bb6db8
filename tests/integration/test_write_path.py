"""The Spark write path end to end: data source modes, partitions, splits, backup, retries,
bad input. TensorFlow reads every file back and each value is compared to the source rows."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os

import numpy as np
import pytest
from tfcheck import check_rich_row, read_with_tf, rich_fields, rows_by

import tfspark
from tfspark.cli.inspect import describe
from tfspark.errors import OptionError, SchemaError

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def F(spark):
    tfspark.register(spark)
    from pyspark.sql import functions

    return functions


def manifest(path):
    with open(os.path.join(path, "_tfspark.json")) as f:
        return json.load(f)


def part_files(path):
    return sorted(os.path.relpath(os.path.join(d, n), path) for d, _, names in os.walk(path)
                  for n in names if n.startswith("part-") and ".tfrecord" in n)


def test_register_is_idempotent(spark):
    assert tfspark.register(spark) == ["tfspark", "tfrecord"]
    assert tfspark.register(spark) == ["tfspark", "tfrecord"]


@pytest.mark.tf
def test_append_twice_then_overwrite(spark, F, tf, tmp_path):
    out = str(tmp_path / "ds")
    spark.range(0, 500).write.format("tfrecord").mode("append").save(out)
    spark.range(500, 800).write.format("tfrecord").mode("append").option("codec", "none") \
        .save(out)
    m = manifest(out)
    assert m["records"] == 800 and len(m["writes"]) == 2
    _, cols = read_with_tf(tf, out)
    assert sorted(cols["id"]) == list(range(800))  # both batches, no duplicates
    old_files = part_files(out)
    spark.range(5, 10).write.format("tfrecord").mode("overwrite").save(out)
    _, cols = read_with_tf(tf, out)
    assert sorted(cols["id"]) == list(range(5, 10))
    assert not set(old_files) & set(part_files(out)), "overwrite left the old files behind"
    assert os.path.exists(os.path.join(out, "_SUCCESS"))


def test_spark_refuses_errorifexists_and_ignore_natively(spark, tmp_path):
    # Engine fact: Spark rejects these modes for Python sources before our code runs.
    for mode in ("errorifexists", "ignore"):
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            spark.range(3).write.format("tfrecord").mode(mode).save(str(tmp_path / mode))


def test_mode_option_gives_errorifexists_and_ignore(spark, tmp_path):
    out = str(tmp_path / "m")
    w = spark.range(10).write.format("tfrecord").mode("append")
    w.option("mode", "errorifexists").save(out)  # empty path: writes
    assert manifest(out)["records"] == 10
    with pytest.raises(Exception, match="already exists and is not empty"):
        spark.range(3).write.format("tfrecord").mode("append").option("mode", "errorifexists") \
            .save(out)
    spark.range(3).write.format("tfrecord").mode("append").option("mode", "ignore").save(out)
    assert manifest(out)["records"] == 10 and len(part_files(out)) == len(manifest(out)["files"])


@pytest.mark.tf
def test_a_partitions_directory_reads_as_its_rows_in_every_reader(spark, tf, tmp_path):
    """README: partition columns are not in the records, so filter by reading a partition's
    directory. Each reader (and spark.read) takes one, nested and null partitions and a split's
    included, as the rows of that partition (every reader failed: no manifest there, or
    "part files of a write that did not commit")."""
    df = spark.range(300).selectExpr("id", "CAST(id % 3 AS STRING) AS c",
                                     "IF(id % 5 = 0, NULL, CAST(id % 2 AS INT)) AS d",
                                     "CAST(id % 2 AS INT) AS y")
    out, cut = str(tmp_path / "p"), str(tmp_path / "s")
    tfspark.write_tfrecords(df, out, label_cols=["y"], partition_by=["c", "d"], rows_per_record=4)
    tfspark.write_tfrecords(df, cut, label_cols=["y"], partition_by=["c"], split_key="id",
                            split={"train": 0.7, "test": 0.3})

    def ids(reader):
        return sorted(int(i) for x, _ in reader for i in np.asarray(x["id"]))

    one = [i for i in range(300) if i % 3 == 1]
    assert ids(tfspark.read_batches(f"{out}/c=1", 16)) == one
    assert ids(tfspark.make_dataset(f"{out}/c=1/d=0", 16)) == \
        [i for i in one if i % 5 and i % 2 == 0]
    assert ids(tfspark.read_batches(f"{out}/c=1/d=__HIVE_DEFAULT_PARTITION__", 16)) == \
        [i for i in one if i % 5 == 0]
    train = set(ids(tfspark.read_batches(cut, 16, split="train")))
    assert ids(tfspark.read_batches(f"{cut}/train/c=2", 16)) == \
        sorted(i for i in train if i % 3 == 2)
    assert ids(tfspark.read_batches(f"{cut}/c=2", 16, split="train")) == \
        sorted(i for i in train if i % 3 == 2)
    back = spark.read.format("tfrecord").load(f"{out}/c=1")
    assert sorted(r.id for r in back.collect()) == one and back.schema == df.schema
    for missing in (f"{out}/c=7", f"{out}/d=1"):  # no such partition; not the first level
        with pytest.raises(tfspark.ManifestError, match="does not exist: check the path"):
            tfspark.read_batches(missing, 16)
    with pytest.raises(OptionError, match="holds the splits"):
        tfspark.read_batches(f"{cut}/c=2", 16)
    # what reads a data set as a whole (verify, inspect) names the data set around it
    with pytest.raises(tfspark.ManifestError) as named:
        tfspark.verify(f"{out}/c=1")
    assert str(named.value) == (
        f"'{out}/c=1' is a partition's directory of the data set '{out}', whose manifest is "
        f"there: give that directory (make_dataset, read_batches and spark.read also take a "
        f"partition's directory)")
    # inspect's table: each split's totals (they read 0 files, 0 records), then its partitions
    table = describe(cut).splitlines()[2:10]
    rows = {line.split()[0]: [int(x.replace(",", "")) for x in line.split()[1:3]]
            for line in table}
    assert list(rows) == ["test", "test/c=0", "test/c=1", "test/c=2", "train", "train/c=0",
                          "train/c=1", "train/c=2"], table
    assert rows["train"] == [sum(rows[f"train/c={c}"][i] for c in range(3)) for i in (0, 1)]
    assert rows["train"][1] == len(train) and rows["test"][1] == 300 - len(train)


@pytest.mark.tf
def test_partitions_are_escaped_and_stay_inside(spark, F, tf, tmp_path):
    out = tmp_path / "parts"
    values = ["a/b", "..", "x=y", None, "plain", "../../escape"]
    rows = [(i, values[i % len(values)]) for i in range(60)]
    df = spark.createDataFrame(rows, "id long, p string")
    df.write.format("tfrecord").mode("overwrite").option("partitionBy", "p").save(str(out))
    m = manifest(out)
    assert m["partition_by"] == ["p"] and m["records"] == 60
    seen = {}
    for entry in m["files"]:
        full = os.path.realpath(out / entry["path"])
        assert full.startswith(os.path.realpath(out) + os.sep), entry["path"]
        assert os.path.dirname(entry["path"]).startswith("p=")
        comp = "GZIP" if m["compression"] else ""
        ds = tf.data.TFRecordDataset(str(out / entry["path"]), compression_type=comp)
        spec = tfspark.FeatureSpec.from_dict(m["spec"])
        assert spec.names == ["id"], "the partition column must not be stored in the records"
        for rec in ds.batch(100):
            ids = tf.io.parse_example(rec, tfspark.tf.parsing_spec(spec))["id"].numpy().tolist()
            for i in ids:
                seen[i] = entry["partition"]["p"]
    assert seen == {i: p for i, p in rows}
    assert not os.path.exists(tmp_path / "escape")


@pytest.mark.tf
def test_max_records_per_file_and_bytearray(spark, F, tf, tmp_path):
    out = str(tmp_path / "max")
    spark.range(1000).repartition(1).write.format("tfrecord").mode("overwrite") \
        .option("maxRecordsPerFile", 300).save(out)
    counts = sorted(e["records"] for e in manifest(out)["files"])
    assert counts == [100, 300, 300, 300]
    raw = str(tmp_path / "raw")
    payloads = [bytes([i % 256]) * (i % 7) + b"\x00end" for i in range(50)]
    spark.createDataFrame([(p,) for p in payloads], "b binary").write.format("tfrecord") \
        .mode("overwrite").option("recordType", "ByteArray").option("compression", "gzip") \
        .option("gzipLevel", 1) \
        .save(raw)
    m = manifest(raw)
    assert m["record_type"] == "ByteArray" and m["spec"] is None
    files = [os.path.join(raw, e["path"]) for e in m["files"]]
    got = [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    assert sorted(got) == sorted(payloads)


def _rich_df(spark):
    from pyspark.ml.linalg import Vectors
    from pyspark.sql import types as T

    schema = T.StructType(rich_fields() + [T.StructField("y", T.IntegerType(), False)])
    rows = []
    for k in range(40):
        null = k % 5 == 4
        rows.append((
            k, None if null else k * 1000 - 7, None if null else -32768 + k,
            None if null else (k % 256) - 128, None if null else k % 2 == 0,
            None if null else k / 3, None if null else (-1.0) ** k * 1e10 / (k + 1),
            None if null else decimal.Decimal(f"{k}.125"), None if null else f"té{k}\u4e2d",
            None if null else bytes([0, k, 255]), None if null else dt.date(1960 + k, 2, 28),
            None if null else dt.datetime(1950 + k, 1, 1, 12, 0, 0, 123456,
                                          tzinfo=dt.timezone.utc),
            None if null else [float(j) for j in range(k % 4)],
            [float(k), 0.5, -0.0],
            None if null else [[j] * j for j in range(k % 3)],
            None if null else (k, f"s{k}"),
            None if null else (Vectors.dense([k, 1.0]) if k % 2 else
                               Vectors.sparse(2, [1], [float(k)])),
            k % 2,
        ))
    return spark.createDataFrame(rows, schema), rows


@pytest.mark.tf
def test_workflow_every_type_matches_source(spark, F, tf, tmp_path):
    df, rows = _rich_df(spark)
    out = str(tmp_path / "rich")
    result = tfspark.write_tfrecords(df, out, label_cols=["y"], compression="gzip",
                                     target_file_bytes=2000)
    assert result.rows == result.source_rows == result.backup_rows == 40
    assert result.files == len(manifest(out)["files"]) > 1
    spec, cols = read_with_tf(tf, out)
    assert spec["emb"].kind == "fixed" and spec["emb"].shape == (3,)  # observed fixed length
    assert spec["vec"].kind == "fixed" and spec["vec"].shape == (2,)
    assert spec["arr"].kind == "varlen" and spec["y"].label
    got = rows_by(cols, "id")
    assert sorted(got) == list(range(40))
    for r in rows:
        g = got[r[0]]
        check_rich_row(g, r)
        assert g["y"] == r[17]
    stats = manifest(out)["stats"]
    assert stats["null_counts"]["i"] == 8 and stats["rows"] == {"source": 40, "backup": 40}


def _null_counts(F, df, spec):
    """Spark's own count of each feature's null rows."""
    return {k: int(v or 0) for k, v in df.select([
        F.sum(F.col(".".join(f"`{p}`" for p in f.path)).isNull().cast("int")).alias(f.name)
        for f in spec.features]).first().asDict().items()}


def test_scalar_facts_from_the_backups_footers_equal_spark_counts(spark, F, tmp_path):
    """Scalars only: the rows and nulls per feature come from the backup's parquet footers
    (observe.py), struct fields, timestamps (INT96) and decimals among them; they equal a count
    by Spark."""
    from tfspark.spark import observe, sizing
    from tfspark.spec import infer_spec

    df, _ = _rich_df(spark)
    df = df.drop("arr", "emb", "rag", "vec").withColumn(
        "st", F.when(F.col("id") % 3 == 0, None).otherwise(F.col("st")))
    spec = infer_spec(df.schema, label_cols=["y"])
    assert observe.footers_suffice(spec)
    out = str(tmp_path / "scalars")
    tfspark.write_tfrecords(df, out, label_cols=["y"])
    got = manifest(out)["stats"]
    assert got["null_counts"] == _null_counts(F, df, spec)
    assert got["null_counts"]["st.a"] == 19 and got["rows"] == {"source": 40, "backup": 40}
    backup = [os.path.join(d, n) for d, _, ns in os.walk(os.path.join(out, "_backup"))
              for n in ns if n.endswith(".parquet")]
    facts, unknown = observe.footer_facts(spec, sizing.footers(backup))
    assert facts.null_counts == got["null_counts"] and unknown == []


def test_nulls_the_footers_do_not_say_are_counted_by_the_tasks(spark, F, tmp_path):
    """The tasks count every feature's nulls in one pass. In two passes (here: a backup table)
    the facts come from the staged copy's footers, but Spark's parquet writer keeps no
    statistics of a chunk holding a value over 4 KB: the TFRecord tasks count that feature's
    nulls. An append with nulls in such a column that the data set stores as not nullable is
    refused by the encoder, naming the row, and leaves the data set as it was."""
    from tfspark.spark import observe, sizing
    from tfspark.spec import infer_spec

    i = F.col("id")
    long_text = F.repeat(F.lit("t"), F.lit(5000) + i)
    df = spark.range(0, 30, numPartitions=2).select(
        "id", F.when(i % 4 == 0, None).otherwise(long_text).alias("text"),
        F.when(i % 5 == 0, None).otherwise(i * 2).alias("n"))
    out = str(tmp_path / "long")
    tfspark.write_tfrecords(df, out)
    got = manifest(out)["stats"]["null_counts"]
    spec = infer_spec(df.schema)
    assert got == _null_counts(F, df, spec) == {"id": 0, "text": 8, "n": 6}
    from tfspark.spark.backup import table_location
    from tfspark.store.uris import uri_to_path

    table = str(tmp_path / "long_table")
    r = tfspark.write_tfrecords(df, table, backup_table="footers_long", mode="overwrite")
    assert r.passes == 2
    assert manifest(table)["stats"]["null_counts"] == got
    where = uri_to_path(table_location(spark, "footers_long"))
    backup = [os.path.join(d, n) for d, _, ns in os.walk(where)
              for n in ns if n.endswith(".parquet")]
    assert observe.footer_facts(spec, sizing.footers(backup))[1] == ["text"]  # not said

    strict = str(tmp_path / "strict")
    kept = df.na.fill({"text": "x" * 5000})
    kept = spark.createDataFrame(kept.rdd, kept.schema.fromJson({**kept.schema.jsonValue(),
        "fields": [{**f, "nullable": f["name"] != "text"} for f in kept.schema.jsonValue()[
            "fields"]]}))
    tfspark.write_tfrecords(kept, strict)
    before = manifest(strict)
    with pytest.raises(Exception, match=r"column 'text' is not nullable in the spec but row \d+ "
                                        r"is null"):
        tfspark.write_tfrecords(df, strict, mode="append")
    assert manifest(strict) == before
    assert len(part_files(strict)) == len(before["files"])


def test_facts_the_footers_do_not_say(tmp_path):
    """Parquet written without statistics says no null count: the feature is left to the
    write's tasks to count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tfspark.spark import observe, sizing
    from tfspark.spec import Feature, FeatureSpec
    from tfspark.store.write import RowFacts

    path = str(tmp_path / "plain.parquet")
    pq.write_table(pa.table({"x": [1, None, 3]}), path, write_statistics=False)
    read = sizing.footers([path])
    assert read is not None and read.rows == 3 and read.nulls == {"x": None}
    spec = FeatureSpec((Feature("x", ("x",), "fixed", "int64", "int", "bigint"),))
    assert observe.footer_facts(spec, read) == (RowFacts(3, {}, {}), ["x"])
    pq.write_table(pa.table({"x": [1, None, 3]}), path)
    assert observe.footer_facts(spec, sizing.footers([path])) == (RowFacts(3, {"x": 1}, {}), [])
    assert observe.footer_facts(spec, None) == (RowFacts(None, {}, {}), ["x"])


@pytest.mark.tf
def test_splits_are_reproducible_by_key(spark, F, tf, tmp_path):
    df = spark.range(3000).select("id", (F.col("id") % 7).alias("y"))
    split = {"train": 0.8, "validation": 0.1, "test": 0.1}
    a = tfspark.write_tfrecords(df, str(tmp_path / "a"), label_cols="y", split=split,
                                split_key="id", seed=3)
    b = tfspark.write_tfrecords(df.repartition(5), str(tmp_path / "b"), label_cols="y",
                                split=split, split_key="id", seed=3)
    assert set(a.splits) == set(split) and a.rows == 3000
    assert sum(s.rows for s in a.splits.values()) == 3000
    assert 2200 < a.splits["train"].rows < 2600
    members = {}
    for name in split:
        _, cols_a = read_with_tf(tf, str(tmp_path / "a"), split=name)
        _, cols_b = read_with_tf(tf, str(tmp_path / "b"), split=name)
        assert sorted(cols_a["id"]) == sorted(cols_b["id"])  # same key -> same split
        assert len(cols_a["id"]) == a.splits[name].rows == b.splits[name].rows
        members.update({i: name for i in cols_a["id"]})
    assert sorted(members) == list(range(3000))
    assert manifest(str(tmp_path / "a"))["splits"] == sorted(split)


@pytest.mark.parametrize("by_key", [False, True])
def test_splits_get_their_fractions(spark, tmp_path, by_key):
    """Each split gets its fraction of the rows (within 6 standard deviations), by a random
    draw or by a key: a draw made once per row, not once per CASE branch."""
    n = 20_000
    split = {"train": 0.55, "validation": 0.15, "test": 0.2, "holdout": 0.1}
    result = tfspark.write_tfrecords(spark.range(n, numPartitions=3), str(tmp_path / "s"),
                                     split=split, split_key="id" if by_key else None, seed=5,
                                     stats=False)
    for name, fraction in split.items():
        rows = result.splits[name].rows
        assert abs(rows - n * fraction) < 6 * (n * fraction * (1 - fraction)) ** 0.5, \
            (name, rows, result.splits)


def test_backup_table_counts_agree(spark, F, tmp_path):
    df = spark.range(1234).select("id", F.rand(7).alias("x"), (F.col("id") % 2).alias("y"))
    out = str(tmp_path / "bk")
    r = tfspark.write_tfrecords(df, out, label_cols=["y"], backup_table="tfs_counts",
                                mode="overwrite")
    assert spark.table("tfs_counts").count() == r.backup_rows == r.rows == 1234
    assert manifest(out)["records"] == 1234
    r2 = tfspark.write_tfrecords(df.limit(100), out, label_cols=["y"], backup_table="tfs_counts",
                                 mode="append")
    assert r2.rows == r2.backup_rows == 100
    assert spark.table("tfs_counts").count() == manifest(out)["records"] == 1334
    assert "rows" in r2.summary() and "tfs_counts" in r2.summary()


@pytest.mark.tf
def test_task_failing_once_leaves_exactly_the_source_rows(spark, F, tf, tmp_path):
    from pyspark import TaskContext

    def flaky(i):
        ctx = TaskContext.get()
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i == 900:
            raise RuntimeError("injected failure on the first attempt")
        return i

    flaky_udf = F.udf(flaky, "long")
    df = spark.range(0, 2000, numPartitions=2).select(flaky_udf("id").alias("id"))
    out = str(tmp_path / "retry")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df.write.format("tfrecord").mode("overwrite").save(out)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    _, cols = read_with_tf(tf, out)
    assert sorted(cols["id"]) == list(range(2000))
    assert part_files(out) == sorted(e["path"] for e in manifest(out)["files"])


# ---- bad input: a clear error, and nothing written


def test_errorifexists_refuses_existing_path(spark, tmp_path):
    out = tmp_path / "exists"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    with pytest.raises(OptionError, match="already exists"):
        tfspark.write_tfrecords(spark.range(3), str(out))
    assert os.listdir(out) == ["keep.txt"]
    r = tfspark.write_tfrecords(spark.range(3), str(out), mode="ignore")
    assert r.skipped and os.listdir(out) == ["keep.txt"]


@pytest.mark.parametrize("option,value,message", [
    ("bogus", "1", r"unknown tfrecord option\(s\) \['bogus'\]"),
    ("compression", "zip", "compression"),
    ("recordType", "Sequence", "recordType"),
    ("maxRecordsPerFile", "-4", "maxRecordsPerFile"),
    ("nullElements", "ignore", "nullElements"),
    ("gzipLevel", "0", "gzipLevel"),
    ("partitionBy", "nope", "partition/split column 'nope'"),
])
def test_bad_options_are_refused_before_writing(spark, tmp_path, option, value, message):
    out = tmp_path / "bad"
    with pytest.raises(Exception, match=message):
        spark.range(3).write.format("tfrecord").mode("overwrite").option(option, value) \
            .save(str(out))
    assert not out.exists() or not part_files(str(out))


def test_bad_workflow_arguments_write_nothing(spark, F, tmp_path):
    df = spark.range(10).select("id", F.create_map(F.lit("k"), F.col("id")).alias("m"))
    cases = [
        (lambda p: tfspark.write_tfrecords(df, p), SchemaError, r"column 'm' has type map"),
        (lambda p: tfspark.write_tfrecords(spark.range(3), p, label_cols=["label"]),
         SchemaError, r"label column\(s\) \['label'\] not found"),
        (lambda p: tfspark.write_tfrecords(spark.range(3), p, split={"a": 0.5, "b": 0.4}),
         OptionError, "must sum to 1"),
        (lambda p: tfspark.write_tfrecords(spark.range(3), p, split={"../x": 1.0}),
         OptionError, "split name"),
        (lambda p: tfspark.write_tfrecords(spark.range(3), p, mode="upsert"),
         OptionError, "mode 'upsert' is not valid"),
        (lambda p: tfspark.write_tfrecords(spark.range(3), p, compression="lz4"),
         OptionError, "compression"),
        (lambda p: tfspark.write_tfrecords(spark.range(3), p, partition_by=["zz"]),
         OptionError, "partition_by column 'zz'"),
    ]
    for i, (call, err, message) in enumerate(cases):
        out = tmp_path / f"case{i}"
        with pytest.raises(err, match=message):
            call(str(out))
        assert not out.exists(), f"case {i} left {out}"


def test_unwritable_path_is_a_clear_error(spark, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OptionError, match="cannot write to"):
        tfspark.write_tfrecords(spark.range(3), str(blocker / "out"))
    with pytest.raises(Exception, match="cannot write to"):
        spark.range(3).write.format("tfrecord").mode("overwrite").save(str(blocker / "o2"))


def test_append_with_other_schema_is_refused(spark, F, tmp_path):
    out = str(tmp_path / "app")
    spark.range(5).write.format("tfrecord").mode("append").save(out)
    before = manifest(out)
    with pytest.raises(Exception, match=r"feature spec differs.*new: \['x'\]"):
        spark.range(5).withColumn("x", F.lit(1.0)).write.format("tfrecord").mode("append") \
            .save(out)
    with pytest.raises(Exception, match=r"changed: id \(dtype, encoding, source_type"):
        spark.range(5).selectExpr("cast(id as double) as id").write.format("tfrecord") \
            .mode("append").save(out)
    with pytest.raises(Exception, match="compression"):
        spark.range(5).write.format("tfrecord").mode("append").option("compression", "gzip") \
            .save(out)
    assert manifest(out) == before


@pytest.mark.tf
def test_failed_job_leaves_old_data_and_no_new_files(spark, F, tf, tmp_path):
    from pyspark import TaskContext

    out = str(tmp_path / "keep")
    spark.range(100).write.format("tfrecord").mode("overwrite").save(out)
    before = manifest(out)
    old_files = part_files(out)

    def broken(i):
        if TaskContext.get().partitionId() == 1 and i % 50 == 49:
            raise ValueError("this partition always fails")
        return i

    bad = spark.range(0, 1000, numPartitions=2).select(F.udf(broken, "long")("id").alias("id"))
    with pytest.raises(Exception, match="always fails"):
        bad.write.format("tfrecord").mode("overwrite").save(out)
    assert manifest(out) == before and part_files(out) == old_files  # abort cleaned up
    _, cols = read_with_tf(tf, out)
    assert sorted(cols["id"]) == list(range(100))
    fresh = str(tmp_path / "fresh")
    with pytest.raises(Exception, match="always fails"):
        bad.write.format("tfrecord").mode("overwrite").save(fresh)
    assert not os.path.exists(os.path.join(fresh, "_tfspark.json")) and not part_files(fresh)


def test_a_null_label_is_named_when_the_write_ends(spark, tmp_path, caplog):
    import logging

    df = spark.createDataFrame([(1, 1.0, 1), (2, None, None), (3, 2.0, 0), (4, 3.0, None)],
                               "id long, x double, label long")
    with caplog.at_level(logging.WARNING, logger="tfspark"):
        tfspark.write_tfrecords(df, str(tmp_path / "nulls"), label_cols=["label"])
    lines = [r.getMessage() for r in caplog.records if "label column" in r.getMessage()]
    assert lines == ["tfspark: label column 'label' is null in 2 of 4 rows; readers fill them "
                     "with 0, its type's default: drop those rows first (df.dropna(subset="
                     "['label'])), or give defaults={'label': ...} with a value that marks "
                     "them"], caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tfspark"):  # a marker given: no warning
        tfspark.write_tfrecords(df, str(tmp_path / "marked"), label_cols=["label"],
                                defaults={"label": -1})
        tfspark.write_tfrecords(df.dropna(subset=["label"]), str(tmp_path / "dropped"),
                                label_cols=["label"])
        tfspark.write_tfrecords(df, str(tmp_path / "x-nulls"))  # x's nulls: not a label
    assert "label column" not in caplog.text


def test_a_backup_table_in_a_database_that_does_not_exist_yet(spark, tmp_path):
    """backup_table="db.name" with no database db: made, as `tfspark export` always did
    (the library raised Spark's SCHEMA_NOT_FOUND)."""
    import uuid

    db = f"fresh_{uuid.uuid4().hex[:8]}"
    result = tfspark.write_tfrecords(spark.range(50), str(tmp_path / "ds"),
                                     backup_table=f"{db}.copy")
    assert result.backup_rows == 50 and spark.table(f"{db}.copy").count() == 50
    assert tfspark.verify(str(tmp_path / "ds")).ok



@pytest.mark.spark
@pytest.mark.tf
def test_encode_errors_name_the_row_of_the_task_not_of_the_arrow_batch(spark_tf, tmp_path):
    from pyspark.sql import functions as F

    # One partition, Arrow batches of 500 rows: the bad row (id 777) is in the second batch.
    df = spark_tf.range(0, 1000, numPartitions=1).select(
        "id", F.when(F.col("id") == 777, F.lit(1e39)).otherwise(F.lit(1.0)).alias("x"))
    with pytest.raises(Exception, match=r"value 1e\+39 at row 777 is out of float32 range.*"
                                        r"Spark partition 0"):
        spark_tf.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        try:
            df.write.format("tfrecord").mode("overwrite").save(str(tmp_path / "rows"))
        finally:
            spark_tf.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


@pytest.mark.spark
def test_a_split_without_rows_is_a_split(spark, tmp_path, tf):
    out = str(tmp_path / "ds")
    r = tfspark.write_tfrecords(spark.range(50), out, split={"train": 1.0, "test": 0.0},
                                split_key="id")
    assert (r.splits["test"].rows, r.splits["test"].files, r.splits["test"].bytes) == (0, 0, 0)
    assert r.splits["train"].rows == 50
    assert tfspark.read_manifest(out).splits == ("test", "train")
    reader = tfspark.read_batches(out, 8, split="test")
    assert len(reader) == 0 and list(reader) == []
    assert list(tfspark.make_dataset(out, 8, split="test", label_cols=[])) == []
    assert spark.read.format("tfrecord").option("split", "test").load(out).count() == 0
    report = tfspark.verify(out)
    assert report.ok, report.render()


@pytest.mark.spark
def test_a_label_cannot_be_a_partition_column(spark, tmp_path):
    df = spark.range(10).selectExpr("id", "id % 2 as y")
    with pytest.raises(OptionError, match=r"\['y'\] are both labels and partition columns"):
        tfspark.write_tfrecords(df, str(tmp_path / "a"), label_cols=["y"], partition_by=["y"])
    tfspark.register(spark)
    with pytest.raises(Exception, match=r"\['y'\] are both labels and partition columns"):
        df.write.format("tfrecord").mode("overwrite").option("labelCols", "y") \
            .option("partitionBy", "y").save(str(tmp_path / "b"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.spark
def test_a_description_is_kept_and_shown(spark, tmp_path):
    """The setting added as one table entry: kept by both engines, kept by an
    append that gives none, shown by tfspark inspect."""
    from tfspark.cli.inspect import describe

    out = str(tmp_path / "d")
    df = spark.range(10)
    tfspark.write_tfrecords(df, out, description="ids, first cut", stats=False)
    df.write.format("tfrecord").mode("append").save(out)
    assert tfspark.read_manifest(out).description == "ids, first cut"
    assert "description: ids, first cut" in describe(out)
    other = str(tmp_path / "e")
    df.write.format("tfrecord").option("description", "via the source").mode("append") \
        .save(other)
    assert tfspark.read_manifest(other).description == "via the source"

