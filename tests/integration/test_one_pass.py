"""write_tfrecords in one pass: the TFRecords, their parquet copy and the statistics from the same
Arrow batches of each task. The promise is that the copy and the TFRecords hold exactly the same
rows, for a DataFrame that is not deterministic too, across a task that dies and is tried again,
and on an object store; the writes that cannot take one pass say why and take two."""

from __future__ import annotations

import os

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import tfspark

pytestmark = [pytest.mark.spark]


def _copy_rows(path: str, filesystem=None) -> dict[int, tuple]:
    """The parquet copy's rows by id: (x, s)."""
    m = tfspark.read_manifest(path, filesystem=filesystem)
    t = ds.dataset(m.backup.location if filesystem is None else
                   m.backup.location.split("://", 1)[-1].split("?")[0],
                   filesystem=filesystem, format="parquet").to_table()
    return {i: (x, s) for i, x, s in zip(t["id"].to_pylist(), t["x"].to_pylist(),
                                          t["s"].to_pylist())}


def _record_rows(path: str, filesystem=None) -> dict[int, tuple]:
    """The TFRecords' rows by id, read by the NumPy reader: (x, s)."""
    got: dict[int, tuple] = {}
    splits = tfspark.read_manifest(path, filesystem=filesystem).splits or (None,)
    for split in splits:
        for batch in tfspark.read_batches(path, batch_size=4096, filesystem=filesystem,
                                          split=split):
            feats = batch[0] if isinstance(batch, tuple) else batch
            for i, x, s in zip(feats["id"].tolist(), feats["x"].tolist(), feats["s"].tolist()):
                assert i not in got, f"row {i} twice in the TFRecords"
                got[i] = (x, s.decode() if isinstance(s, bytes) else s)
    return got


def _feature(path: str, name: str):
    return next(f for f in tfspark.read_manifest(path).spec.features if f.name == name)


def _random_rows(spark):
    """Rows drawn anew each time the plan runs: rand() without a seed, filtered on it; the
    values too are drawn (so a second pass would see other rows with other values)."""
    from pyspark.sql import functions as F

    return spark.range(0, 20_000, numPartitions=3).select(
        "id", F.rand().alias("x"), F.concat(F.lit("s"), (F.rand() * 1000).cast("int")
                                            .cast("string")).alias("s")).where("x < 0.5")


def _same_rows(path: str, filesystem=None) -> int:
    copy, records = _copy_rows(path, filesystem), _record_rows(path, filesystem)
    assert records, "nothing was written"
    assert set(copy) == set(records)
    assert all(abs(copy[i][0] - records[i][0]) < 1e-6 * max(1, abs(copy[i][0])) and
               copy[i][1] == records[i][1] for i in copy)
    return len(copy)


@pytest.mark.parametrize("layout", [1, 256])
def test_a_dataframe_drawn_anew_each_pass_gives_the_copy_the_records_rows(spark, tmp_path,
                                                                          layout):
    out = str(tmp_path / "drawn")
    r = tfspark.write_tfrecords(_random_rows(spark), out, rows_per_record=layout,
                                split={"train": 0.7, "test": 0.3})
    assert r.passes == 1 and not r.two_passes_why
    n = _same_rows(out)
    assert n == r.rows == r.backup_rows == r.source_rows
    stats = tfspark.read_manifest(out).stats
    assert stats["rows"] == {"source": n, "backup": n}
    assert stats["null_counts"] == {"id": 0, "x": 0, "s": 0}
    assert "two passes" not in r.summary()


def _batch_sizes(spark):
    """200,000 rows in one partition, each carrying the size of the Arrow batch it came in
    (a mapInArrow of the user's own before the write: it takes the batches the session says)."""
    import pyarrow as pa

    def sized(batches):
        for b in batches:
            yield b.append_column("batch", pa.array([b.num_rows] * b.num_rows, pa.int64()))

    return spark.range(0, 200_000, numPartitions=1).mapInArrow(sized, "id long, batch long")


def test_the_tasks_take_large_arrow_batches_and_a_setting_of_the_users_stays(spark, tmp_path):
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    assert spark.conf.get(key) == "10000"  # Spark's default
    r = tfspark.write_tfrecords(_batch_sizes(spark), str(tmp_path / "large"))
    assert r.passes == 1
    sizes = pq.read_table(tfspark.read_manifest(str(tmp_path / "large")).backup.location)
    assert max(sizes["batch"].to_pylist()) == 65536  # not 10,000 rows a batch
    assert spark.conf.get(key) == "10000"  # restored
    spark.conf.set(key, "3000")  # the user's own: kept, during the write and after
    try:
        tfspark.write_tfrecords(_batch_sizes(spark), str(tmp_path / "own"))
        sizes = pq.read_table(tfspark.read_manifest(str(tmp_path / "own")).backup.location)
        assert max(sizes["batch"].to_pylist()) == 3000
        assert spark.conf.get(key) == "3000"
    finally:
        spark.conf.unset(key)


def test_the_copys_files_write_longs_as_deltas_and_spark_reads_them_back(spark, tmp_path):
    """The copy's longs are DELTA_BINARY_PACKED, its strings dictionaries, its doubles plain,
    all snappy; Spark's reader gives back every id and value the TFRecords hold."""
    path = str(tmp_path / "deltas")
    r = tfspark.write_tfrecords(_random_rows(spark), path)
    assert r.passes == 1
    location = tfspark.read_manifest(path).backup.location
    files = [os.path.join(location, f) for f in os.listdir(location) if f.endswith(".parquet")]
    assert files
    for f in files:
        group = pq.ParquetFile(f).metadata.row_group(0)
        encodings = {group.column(c).path_in_schema: set(group.column(c).encodings)
                     for c in range(group.num_columns)}
        assert "DELTA_BINARY_PACKED" in encodings["id"]
        assert "RLE_DICTIONARY" in encodings["s"]
        assert encodings["x"] <= {"PLAIN", "RLE"}
        assert {group.column(c).compression for c in range(group.num_columns)} == {"SNAPPY"}
    by_spark = {row.id: (row.x, row.s) for row in spark.read.parquet(location).collect()}
    records = _record_rows(path)
    assert set(by_spark) == set(records)
    assert all(abs(by_spark[i][0] - records[i][0]) < 1e-6 and by_spark[i][1] == records[i][1]
               for i in records)


def test_one_pass_on_an_object_store(spark, s3, tmp_path):
    """On S3 (moto on loopback), with the filesystem given: the tasks write the copy there."""
    fs = s3.filesystem()
    path = f"{s3.bucket()}/drawn"
    r = tfspark.write_tfrecords(_random_rows(spark), path, filesystem=fs)
    assert r.passes == 1
    assert _same_rows(path, fs) == r.rows


def test_a_task_whose_worker_dies_is_tried_again_and_only_its_second_attempt_counts(
        spark, tmp_path):
    """The Python worker of one task exits mid-write on its first attempt (after it has written
    part of its TFRecords and its parquet file); Spark runs the task again. The data set holds
    each source row once, in the TFRecords and in the copy, and no file of the dead attempt is
    named by the manifest or left in the copy."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    def dying(i):
        ctx = TaskContext.get()
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0 and i == 15_000:
            os._exit(1)  # the worker process dies, as a killed one would
        return i

    df = spark.range(0, 20_000, numPartitions=2).select(
        F.udf(dying, "long")("id").alias("id"), (F.col("id") * 0.5).alias("x"),
        F.col("id").cast("string").alias("s"))
    out = str(tmp_path / "retried")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        r = tfspark.write_tfrecords(df, out)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert r.passes == 1
    assert sorted(_same_rows(out) for _ in [0]) == [20_000]
    backup = os.path.join(out, "_backup")
    parquet = sorted(n for n in os.listdir(backup) if n.endswith(".parquet"))
    assert len(parquet) == 2 and sum(pq.ParquetFile(os.path.join(backup, n)).metadata.num_rows
                                     for n in parquet) == 20_000
    assert not [n for n in os.listdir(backup) if n.startswith("_tfspark_staging")]
    assert tfspark.verify(out).ok


@pytest.mark.parametrize("settings,why", [
    ({"backup_table": "one_pass_table"}, "catalog table"),
    ({"stats_exact": True}, "stats_exact"),
])
def test_writes_that_need_two_passes_say_why(spark, tmp_path, settings, why):
    from pyspark.sql import functions as F

    df = spark.range(0, 1000, numPartitions=2).select("id", (F.col("id") * 0.5).alias("x"))
    r = tfspark.write_tfrecords(df, str(tmp_path / "two"), mode="overwrite", **settings)
    assert r.passes == 2 and why in r.two_passes_why
    assert f"two passes over the rows: {r.two_passes_why}" in r.summary()
    assert r.rows == r.backup_rows == 1000


def test_an_array_column_takes_two_passes_unless_its_shape_is_given(spark, tmp_path):
    """Whether an array column is stored fixed-length is decided from its rows before any
    record is written: two passes; with shapes= (or detect_fixed_lengths=False), one."""
    from pyspark.sql import functions as F

    df = spark.range(0, 500, numPartitions=2).select(
        "id", F.array(F.col("id") * 1.0, F.col("id") * 2.0).alias("v"))
    two = tfspark.write_tfrecords(df, str(tmp_path / "detect"))
    assert two.passes == 2 and "'v'" in two.two_passes_why
    assert _feature(str(tmp_path / "detect"), "v").shape == (2,)
    one = tfspark.write_tfrecords(df, str(tmp_path / "given"), shapes={"v": [2]})
    assert one.passes == 1
    assert _feature(str(tmp_path / "given"), "v").shape == (2,)
    got = {int(i): list(v) for b in tfspark.read_batches(str(tmp_path / "given"),
                                                          batch_size=500)
           for i, v in zip((b[0] if isinstance(b, tuple) else b)["id"],
                           (b[0] if isinstance(b, tuple) else b)["v"])}
    assert got == {i: [i * 1.0, i * 2.0] for i in range(500)}
