"""Feature statistics gathered during write_tfrecords (sketched by its tasks; with stats_exact,
Spark's aggregation jobs), and the Keras preprocessing layers built from them: the same as the
layers after adapt() on all the (parsed) rows of the split."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import tfspark
from tfspark.errors import OptionError
from tfspark.store.manifest import read_manifest

pytestmark = [pytest.mark.spark, pytest.mark.tf]
N = 3000


def _table(spark):
    from pyspark.sql import types as T

    rng = np.random.default_rng(7)
    cats = [f"c{int(z)}" for z in rng.zipf(1.3, N) % 400]  # skewed, high-cardinality
    rows = [(i, None if i % 11 == 0 else float(rng.lognormal(3, 1)),  # nulls and skew
             int(rng.integers(0, 50)), None if i % 13 == 0 else cats[i],
             bool(i % 3), dt.date(2020, 1, 1) + dt.timedelta(days=int(i % 365)),
             [float(x) for x in range(i % 4)], i % 2)
            for i in range(N)]
    schema = T.StructType([
        T.StructField("id", T.LongType(), False), T.StructField("x", T.DoubleType()),
        T.StructField("cnt", T.IntegerType(), False), T.StructField("cat", T.StringType()),
        T.StructField("flag", T.BooleanType(), False), T.StructField("day", T.DateType()),
        T.StructField("arr", T.ArrayType(T.DoubleType())),
        T.StructField("y", T.IntegerType(), False)])
    return spark.createDataFrame(rows, schema)


def _write(spark, out, **more):
    tfspark.write_tfrecords(_table(spark), out, label_cols=["y"],
                            split={"train": 0.8, "test": 0.2}, split_key="id",
                            defaults={"x": -1.0}, **more)
    return out


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """The default: statistics sketched by the write's tasks."""
    return _write(spark, str(tmp_path_factory.mktemp("stats") / "ds"))


@pytest.fixture(scope="module")
def written_exact(spark, tmp_path_factory):
    """stats_exact=True: Spark's aggregation jobs (the scalars observed with the backup)."""
    return _write(spark, str(tmp_path_factory.mktemp("stats") / "exact"), stats_exact=True)


def manifest(path):
    """The manifest as stored, with its statistics files read back into "stats" as tfspark
    kept them before they moved beside it."""
    with open(os.path.join(path, "_tfspark.json")) as f:
        doc = json.load(f)
    side = doc["stats"].pop("side", None)
    if side:
        m = read_manifest(path)
        if side["features"]:
            doc["stats"]["features"] = m.feature_stats()
        if side["splits"]:
            doc["stats"]["splits"] = {s: m.feature_stats(s) for s in side["splits"]}
    return doc


def test_statistics_live_beside_the_manifest(written, tmp_path):
    """Every manifest stays small (the statistics are files of their own, each split's once);
    readers plan without them, what needs them says what is missing, and a manifest with the
    statistics inside (tfspark before) reads as before."""
    root = Path(written)
    sizes = {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("_tfspark.json")}
    assert sorted(sizes) == ["_tfspark.json", "test/_tfspark.json", "train/_tfspark.json"]
    assert max(sizes.values()) < 20_000, sizes
    side = json.loads((root / "_tfspark.json").read_text())["stats"]["side"]
    files = sorted(p.name for p in (root / side["dir"]).iterdir())
    assert files == ["features.json", "split-test.json", "split-train.json"]
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    inline = json.loads((copy / "_tfspark.json").read_text())
    inline["stats"] = manifest(written)["stats"]
    shutil.rmtree(copy / side["dir"])
    assert sum(len(y) for _, y in tfspark.read_batches(str(copy), 500, split="train")) > 0
    with pytest.raises(tfspark.ManifestError, match="statistics the manifest names are missing"):
        tfspark.keras_preprocessing(str(copy), split="train")
    (copy / "_tfspark.json").write_text(json.dumps(inline))  # the old format
    old = read_manifest(str(copy))
    assert old.feature_stats("train") == read_manifest(written).feature_stats("train")
    assert old.stats_splits() == ["test", "train"]


def train_columns(path):
    cols = defaultdict(list)
    for x, _ in tfspark.make_dataset(path, 512, split="train", shuffle_buffer=0):
        for k in ("x", "cnt", "cat", "day"):
            cols[k].extend(x[k].numpy().tolist())
    return {k: np.array(v) for k, v in cols.items()}


def test_statistics_in_the_manifest(written):
    stats = manifest(written)["stats"]
    assert set(stats["splits"]) == {"train", "test"} and stats["top_k"] == 10_000
    allx = stats["features"]["x"]
    assert allx["rows"] == N and allx["nulls"] == len(range(0, N, 11))
    nulls = len(range(0, N, 11))
    assert allx["count"] == N - nulls  # present values, as describe() and SQL count them
    assert len(allx["quantiles"]["values"]) == 9 and allx["min"] > 0  # of present values
    assert allx["filled"]["mean"] < allx["mean"]  # what the model sees: nulls as -1.0
    assert stats["features"]["arr"]["length"] == {"min": 0, "max": 3, "mean": 1.5}
    tr, te = stats["splits"]["train"]["cat"], stats["splits"]["test"]["cat"]
    assert tr["rows"] + te["rows"] == N
    assert tr["top"][0][1] >= tr["top"][-1][1] and 300 < stats["features"]["cat"][
        "distinct_approx"] < 420
    assert stats["computed_by"] == "write tasks (sketches)"


def _job_over_the_backup(spark, path):
    """Spark's aggregation job (stats.compute) over a data set's backup, split as it was."""
    from tfspark.spark import sizing
    from tfspark.spark import stats as spark_stats

    backup = spark.read.parquet(os.path.join(path, "_backup"))
    keyed, split_col = sizing.arrange(backup, {"train": 0.8, "test": 0.2}, "id", 0, False, 1)
    return spark_stats.compute(keyed, read_manifest(path).spec, split_col), backup


def test_sketched_statistics_equal_the_job_where_exact_and_near_it_where_estimated(
        spark, written):
    """The default statistics (the tasks' sketches) against the job over the
    backup's rows: the same counts, bounds and top values (this table stays under the exact
    count's cap), moments to rounding, distinct counts exact where the job's are estimates
    (within the job's error), deciles within the recorded rank error of the true ones."""
    job, backup = _job_over_the_backup(spark, written)
    stored = manifest(written)["stats"]
    err = stored["quantile_rank_error"]
    assert 0 < err < 0.01 and stored["distinct_relative_sd"] < 0.05
    rows = backup.toPandas()
    for ours, theirs in [(stored["features"], job["features"])] + [
            (stored["splits"][s], job["splits"][s]) for s in ("train", "test")]:
        for name in ("id", "x", "cnt", "cat", "flag", "day", "y", "arr"):
            a, b = ours[name], theirs[name]
            for key in ("rows", "nulls", "count", "min", "max", "max_chars", "top", "length"):
                assert a.get(key) == b.get(key), (name, key, a.get(key), b.get(key))
            for key in ("mean", "variance"):
                if key in b:
                    assert a[key] == pytest.approx(b[key], rel=1e-9), (name, key)
            if "distinct_approx" in b:
                assert a["distinct_approx"] == pytest.approx(b["distinct_approx"], rel=0.15)
    truth = rows["cat"].dropna().nunique()
    assert stored["features"]["cat"]["distinct_approx"] == truth  # under the cap: exact
    for name in ("x", "cnt", "day"):
        xs = np.sort(np.array([v.toordinal() - 719163 if hasattr(v, "toordinal") else v
                               for v in rows[name] if v == v and v is not None], dtype=float))
        q = stored["features"][name]["quantiles"]
        for p, v in zip(q["probabilities"], q["values"]):
            lo, hi = max(p - 2 * err, 0), min(p + 2 * err, 1)
            assert np.quantile(xs, lo, method="inverted_cdf") <= v <= \
                np.quantile(xs, hi, method="inverted_cdf"), (name, p, v)


def test_statistics_observed_with_the_backup_equal_the_job_over_it(spark, written_exact):
    """The scalars' statistics gathered while the backup was written (Observed: a
    hash split, a narrow table) are those of the aggregation job over the backup's rows: the
    same counts, bounds and distinct estimates, moments to rounding, deciles within the
    recorded rank error."""
    from tfspark.spark.stats import Observed
    from tfspark.store.options import WriteOptions

    written = written_exact
    m = read_manifest(written)
    opts = WriteOptions.from_arguments(written, split={"train": 0.8, "test": 0.2},
                                       split_key="id", stats_exact=True)
    assert Observed.plan(m.spec, opts) is not None  # this write's scalars were observed
    job, backup = _job_over_the_backup(spark, written)
    stored = manifest(written)["stats"]
    assert stored["stats_seconds"] > 0 and "computed_by" not in stored
    groups = [(stored["features"], job["features"])] + [
        (stored["splits"][s], job["splits"][s]) for s in ("train", "test")]
    xs = {f: np.sort(np.array([v for v in backup.toPandas()[f] if v == v and v is not None],
                              dtype=float)) for f in ("x", "cnt")}
    for ours, theirs in groups:
        assert set(ours) == set(theirs)
        for name in ("id", "x", "cnt", "cat", "flag", "day", "y"):
            a, b = ours[name], theirs[name]
            for key in ("rows", "nulls", "count", "min", "max", "distinct_approx",
                        "max_chars", "top"):
                assert a.get(key) == b.get(key), (name, key, a.get(key), b.get(key))
            for key in ("mean", "variance"):
                if key in b:
                    assert a[key] == pytest.approx(b[key], rel=1e-9), (name, key)
            if "quantiles" in b and name in xs and ours is stored["features"]:
                for p, v in zip(a["quantiles"]["probabilities"], a["quantiles"]["values"]):
                    lo, hi = max(p - 0.002, 0), min(p + 0.002, 1)
                    assert np.quantile(xs[name], lo) <= v <= np.quantile(xs[name], hi), \
                        (name, p, v)


def test_layers_equal_adapt_on_the_split(written):
    keras = pytest.importorskip("keras")
    layers = tfspark.keras_preprocessing(written, split="train", categorical=["cnt"],
                                         bucketize=["day"], skip=["id"])
    assert set(layers) == {"x", "cnt", "cat", "day", "flag", "arr"}  # no label
    with pytest.raises(OptionError, match=r"no split 'trian' in the data set; its "
                                       r"splits are \['test', 'train'\]"):
        tfspark.keras_preprocessing(written, split="trian")
    cols = train_columns(written)
    probe = np.array([-1.0, 0.0, 5.0, 20.0, 400.0], np.float32)
    adapted = keras.layers.Normalization(axis=None)  # one mean and variance
    adapted.adapt(cols["x"].astype(np.float32))
    np.testing.assert_allclose(np.asarray(layers["x"](probe)), np.asarray(adapted(probe)),
                               rtol=1e-4, atol=1e-4)
    for name, layer in (("cat", keras.layers.StringLookup()),
                        ("cnt", keras.layers.IntegerLookup())):
        layer.adapt(cols[name])
        ours, theirs = layers[name].get_vocabulary(), layer.get_vocabulary()
        assert ours[0] == theirs[0] and len(ours) == len(theirs)  # the OOV token first

        counts: dict = defaultdict(int)
        for v in cols[name]:
            counts[v.decode() if isinstance(v, bytes) else int(v)] += 1

        def by_count(vocab, counts=counts):  # identical up to the order of ties
            return [sorted(str(v) for v in vocab[1:] if counts[
                v if not isinstance(v, (bytes, np.bytes_)) else v.decode()] == c)
                for c in sorted(set(counts.values()), reverse=True)]

        assert by_count(ours) == by_count(theirs), name
    bounds = layers["day"].bin_boundaries
    days = np.sort(cols["day"])
    for p, b in zip(np.arange(0.1, 1.0, 0.1), bounds):
        assert np.quantile(days, p - 0.01) <= b <= np.quantile(days, p + 0.01)


def test_array_statistics_and_pooling_equal_numpy_on_the_split(written):
    """Element statistics of a variable-length array, and the PooledMean built from them,
    against numpy on every parsed row of the train split."""
    tf = pytest.importorskip("tensorflow")
    rows = []
    for x, _ in tfspark.make_dataset(written, 512, split="train", shuffle_buffer=0):
        rows.extend(x["arr"].to_list())
    flat = np.array([v for r in rows for v in r], np.float64)
    e = manifest(written)["stats"]["splits"]["train"]["arr"]["elements"]
    assert e["count"] == flat.size and e["min"] == flat.min() and e["max"] == flat.max()
    np.testing.assert_allclose([e["mean"], e["variance"]], [flat.mean(), flat.var()],
                               rtol=1e-9)
    layer = tfspark.keras_preprocessing(written, split="train")["arr"]
    probe = [[], [0.0], [1.0, 2.0], [0.0, 1.0, 2.0]]
    got = np.asarray(layer(tf.ragged.constant(probe, dtype=tf.float32)))
    std = flat.std()
    want = [[np.mean([(v - flat.mean()) / std for v in r]) if r else 0.0, np.log1p(len(r))]
            for r in probe]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_top_elements_of_id_arrays_and_multi_hot(spark, tmp_path):
    from collections import Counter

    tf = pytest.importorskip("tensorflow")
    rows = [(i, [i % 7, i % 3] if i % 5 else None, ["a", "b"][: i % 3]) for i in range(200)]
    out = str(tmp_path / "ids")
    tfspark.write_tfrecords(spark.createDataFrame(rows, "id long, items array<int>, "
                                                        "tags array<string>"), out)
    feats = manifest(out)["stats"]["features"]
    items = Counter(v for _, r, _ in rows if r for v in r)
    assert feats["items"]["top"] == sorted(([v, n] for v, n in items.items()),
                                           key=lambda p: (-p[1], p[0]))
    assert feats["tags"]["top"] == [["a", 133], ["b", 66]]
    layers = tfspark.keras_preprocessing(out, skip=["id"])
    hot = np.asarray(layers["tags"](tf.ragged.constant([["b"], [], ["a", "zz"]])))
    assert hot.tolist() == [[0, 0, 1], [0, 0, 0], [1, 1, 0]]  # OOV first, then a, b
    ids = tfspark.keras_preprocessing(out, skip=["id"], arrays="ids")["items"]
    assert ids(tf.ragged.constant([[0, 6]], dtype=tf.int64)).to_list() == [[
        ids.get_vocabulary().index(0), ids.get_vocabulary().index(6)]]


def test_no_statistics(spark, tmp_path):
    out = str(tmp_path / "plain")
    tfspark.write_tfrecords(spark.range(10).selectExpr("id", "id * 2 as v"), out, stats=False)
    assert "features" not in manifest(out)["stats"]
    with pytest.raises(tfspark.SchemaError, match="no feature statistics.*stats=True"):
        tfspark.keras_preprocessing(out)
    with pytest.raises(OptionError, match="no split 'train' in the data set: it was written "
                                          "without split=; leave split out"):
        tfspark.keras_preprocessing(out, split="train")
    with pytest.raises(tfspark.SchemaError, match="not features"):
        tfspark.keras_preprocessing(manifest(out) | {"stats": {"features": {"id": {}}}},
                                    categorical=["nope"])


def test_stats_command_prints_and_plots(written, tmp_path, capsys, monkeypatch):
    from tfspark.cli.main import main

    assert main(["stats", written, "--split", "train", "--plot", str(tmp_path / "png")]) == 0
    out = capsys.readouterr().out
    assert "statistics of" in out and "split 'train'" in out and "wrote 6 chart(s)" in out
    assert "length 0..3" in out  # arr, with its elements' mean and std in the columns
    # a date reads as a date, its spread as days (not 1.6e15 microseconds)
    assert re.search(r"\n  day +\d+ +\d{4}-\d\d-\d\d +[\d.]+ d +\d{4}-\d\d-\d\d", out), out
    charts = sorted(p.name for p in (tmp_path / "png").iterdir())
    # Numbers (deciles) and categories (top values); an array of numbers has neither, and a
    # row id would be a flat histogram: each gets a line saying why, not a chart
    assert charts == ["cat.png", "cnt.png", "day.png", "flag.png", "x.png", "y.png"]
    assert "  no chart for id: about one value per row (an id): nothing to draw" in out
    assert "  no chart for arr: its statistics hold neither deciles nor" in out
    kinds = dict(line.split(None, 1) for line in out.split("chart(s)")[1].splitlines()[1:]
                 if not line.startswith("  no chart"))
    # A label and a boolean: a bar per value; 50 integers and ids: histograms; dates on a
    # date axis; the long tail of a log-normal is left out, saying where it goes
    assert kinds["y.png"] == kinds["flag.png"] == "rows per value"
    assert kinds["cnt.png"] == "histogram of the deciles"
    assert kinds["day.png"] == "histogram of the deciles, on a date axis"
    assert kinds["cat.png"] == "the most frequent values"
    assert re.fullmatch(r"histogram of the deciles \(top 10% not drawn: [\d.,]+ \.\. [\d.,]+\)",
                        kinds["x.png"]), kinds["x.png"]
    for name in charts:
        assert (tmp_path / "png" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["stats", written, "--split", "nope"]) == 2
    assert capsys.readouterr().err.strip() == \
        f"error: no split 'nope' in {written}; its splits are ['test', 'train']"
    # a URI for the charts was a local directory named "s3:"
    monkeypatch.chdir(tmp_path)
    assert main(["stats", written, "--plot", "s3://bucket/png?endpoint_override=h:1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --plot 's3://bucket/png?...': the charts are written to a local directory, so give "
        "a local path (and copy them to the store after)")
    assert not (tmp_path / "s3:").exists()


def test_data_source_opt_in_matches_the_workflow(spark, tmp_path):
    """option featureStats=true: the tasks' merged statistics equal write_tfrecords' (the same
    sketches; exact ones exactly, deciles within the recorded rank error of the true ones)."""
    tfspark.register(spark)
    rng = np.random.default_rng(3)
    rows = [(i, None if i % 7 == 0 else float(rng.lognormal(1, 1)), f"k{int(rng.zipf(1.5)) % 50}",
             [int(v) for v in rng.integers(0, 9, i % 4)], None if i % 5 == 0 else
             [[float(i % 3)], [1.0, 2.0]], bool(i % 2)) for i in range(4000)]
    df = spark.createDataFrame(rows, "id long, x double, k string, ids array<int>, "
                                     "r array<array<double>>, b boolean").repartition(4)
    ours, theirs = str(tmp_path / "source"), str(tmp_path / "workflow")
    df.write.format("tfrecord").mode("overwrite").option("featureStats", "true").save(ours)
    tfspark.write_tfrecords(df, theirs, backup_path=str(tmp_path / "bk"))
    a, b = manifest(ours)["stats"], manifest(theirs)["stats"]
    assert a["computed_by"] == b["computed_by"] == "write tasks (sketches)"
    err = a["quantile_rank_error"]
    for name in ("id", "x", "k", "ids", "r", "b"):
        sa, sb = a["features"][name], b["features"][name]
        for key in ("rows", "nulls", "count", "min", "max", "length", "top", "max_chars"):
            assert sa.get(key) == sb.get(key), (name, key)
        for key in ("mean", "variance"):
            if key in sb:
                assert sa[key] == pytest.approx(sb[key], rel=1e-9), (name, key)
        if "elements" in sb:
            assert sa["elements"] == pytest.approx(sb["elements"], rel=1e-9), name
        if "quantiles" in sb:
            xs = np.sort(np.array([r[1] for r in rows if r[1] is not None]  # present
                                  if name == "x" else [r[0] for r in rows] if name == "id"
                                  else [float(r[5]) for r in rows]))
            for p, v in zip(sa["quantiles"]["probabilities"], sa["quantiles"]["values"]):
                assert np.quantile(xs, max(p - 2 * err, 0), method="inverted_cdf") <= v <= \
                    np.quantile(xs, min(p + 2 * err, 1), method="inverted_cdf"), (name, p, v)
    layers = tfspark.keras_preprocessing(ours)
    assert {"x", "k", "ids", "r"} <= set(layers)
    # A small top_k: counts past the cap are pruned, and the bound on what that cost is kept.
    small = str(tmp_path / "small")
    df.write.format("tfrecord").mode("overwrite").option("featureStats", "true") \
        .option("statsTopK", "3").save(small)
    k = manifest(small)["stats"]["features"]["k"]
    assert len(k["top"]) == 3 and k["top_count_error"] > 0
    assert abs(k["distinct_approx"] - len({r[2] for r in rows})) <= 1  # HLL: exact when small
    assert "top" not in manifest(small)["stats"]["features"]["id"]  # 4000 ids: not a vocabulary
    df.limit(10).write.format("tfrecord").mode("append").option("featureStats", "true") \
        .save(small)
    assert manifest(small)["stats"]["features_scope"] == "last write"
    with pytest.raises(Exception, match="featureStats=true needs a feature spec"):
        spark.range(2).selectExpr("cast(cast(id as string) as binary) as value") \
            .write.format("tfrecord") \
            .mode("overwrite").option("recordType", "ByteArray") \
            .option("featureStats", "true").save(str(tmp_path / "raw"))


def test_nan_infinity_and_nulls_follow_describe_and_sql(spark, tmp_path):
    """A double column with NaN, +-inf and nulls, an integer column
    with nulls. Both statistics paths give count = non-null values, NaN and infinities counted
    apart, moments and monotonic deciles of the finite values (as SQL AVG / VAR_POP on them),
    `filled` for what the model sees; the layers built from them are finite."""
    from pyspark.sql import functions as F

    keras = pytest.importorskip("keras")
    rng = np.random.default_rng(5)
    n = 5000
    kinds = rng.choice(["v", "nan", "inf", "-inf", "null"], n, p=[.74, .1, .05, .03, .08])
    vals = rng.normal(50, 10, n)
    xs = [None if k == "null" else float(k) if k in ("nan", "inf", "-inf") else float(v)
          for k, v in zip(kinds, vals)]
    ys = [None if i % 9 == 0 else int(i % 40) for i in range(n)]
    df = spark.createDataFrame([(i, x, y, None) for i, (x, y) in enumerate(zip(xs, ys))],
                               "id long, x double, y int, s string").repartition(3)
    wf, ds = str(tmp_path / "workflow"), str(tmp_path / "source")
    tfspark.write_tfrecords(df, wf, backup_path=str(tmp_path / "bk"), defaults={"x": 0.0},
                            stats_exact=True)  # the jobs; the data source below sketches
    tfspark.register(spark)
    df.write.format("tfrecord").mode("overwrite").option("featureStats", "true") \
        .option("defaults", '{"x": 0.0}').save(ds)
    sql = df.select(F.count("x").alias("count"), F.avg("y").alias("ymean"),
                    F.count("y").alias("ycount")).first()
    finite = np.array([x for x in xs if x is not None and np.isfinite(x)])
    filled = np.array([0.0 if x is None else x for x in xs if x is None or np.isfinite(x)])
    for path in (wf, ds):
        stats = manifest(path)["stats"]["features"]
        x, y = stats["x"], stats["y"]
        assert x["count"] == sql["count"] and x["nulls"] == kinds.tolist().count("null")
        assert (x["nan"], x["pos_inf"], x["neg_inf"]) == tuple(
            kinds.tolist().count(k) for k in ("nan", "inf", "-inf"))
        assert x["min"] == finite.min() and x["max"] == finite.max()
        assert x["mean"] == pytest.approx(finite.mean(), rel=1e-9)
        assert x["variance"] == pytest.approx(finite.var(), rel=1e-9)
        assert x["filled"]["mean"] == pytest.approx(filled.mean(), rel=1e-9)
        assert x["filled"]["variance"] == pytest.approx(filled.var(), rel=1e-9)
        q = x["quantiles"]["values"]
        assert q == sorted(q) and all(np.isfinite(q))
        for p, v in zip(x["quantiles"]["probabilities"], q):
            assert np.quantile(finite, max(p - .05, 0)) <= v <= np.quantile(finite, p + .05)
        assert y["count"] == sql["ycount"] and y["mean"] == pytest.approx(sql["ymean"])
        assert "nan" not in y  # integers are never NaN
        assert all(v is not None for v, _ in y["top"])  # top values of present values
        with pytest.warns(UserWarning, match=r"left out 's' \(no values to build a vocab.*all "
                                               r"5000 rows are null"):
            layers = tfspark.keras_preprocessing(path)
        assert "s" not in layers
        probe = np.array([0.0, 50.0, 100.0, np.nan, np.inf], np.float32)
        assert isinstance(layers["x"], tfspark.keras.MeanImputation)  # NaN and inf reach the model
        got = np.asarray(layers["x"](probe))
        assert np.isfinite(got).all() and got[:, 1].tolist() == [0, 0, 0, 1, 1]
        adapted = keras.layers.Normalization(axis=None)
        adapted.adapt(filled.astype(np.float32))  # what make_dataset gives, NaN/inf aside
        np.testing.assert_allclose(got[:3, 0], np.asarray(adapted(probe[:3])),
                                   rtol=1e-4, atol=1e-4)
        with pytest.raises(tfspark.SchemaError, match="max_tokens=0"):
            tfspark.keras_preprocessing(path, max_tokens=0)


def test_impute_and_indicate_a_nullable_number(spark, tmp_path):
    """Nulls written with a NaN default, and NaN values: keras_preprocessing's MeanImputation
    gives the model finite values and an is-missing input, from make_dataset's batches."""
    pytest.importorskip("tensorflow")
    rows = [(i, None if i % 4 == 0 else float("nan") if i % 9 == 0 else float(i % 10))
            for i in range(400)]
    df = spark.createDataFrame(rows, "id long, x double")
    out = str(tmp_path / "ds")
    tfspark.write_tfrecords(df, out, defaults={"x": float("nan")},
                            backup_path=str(tmp_path / "bk"))
    s = manifest(out)["stats"]["features"]["x"]
    assert "filled" not in s  # no finite value fills the nulls in
    layer = tfspark.keras_preprocessing(out)["x"]
    assert isinstance(layer, tfspark.keras.MeanImputation)
    present = np.array([x for _, x in rows if x is not None and not np.isnan(x)])
    for batch in tfspark.make_dataset(out, 64, shuffle_buffer=0, label_cols=[]):
        got = np.asarray(layer(batch["x"]))
        x = batch["x"].numpy()
        assert np.isfinite(got).all()
        np.testing.assert_array_equal(got[:, 1], np.isnan(x).astype(np.float32))
        fine = ~np.isnan(x)
        np.testing.assert_allclose(got[fine, 0], (x[fine] - present.mean()) / present.std(),
                                   rtol=1e-4, atol=1e-5)
    with pytest.warns(UserWarning, match=r"feature 'x': 133 rows are NaN or infinite"):
        plain = tfspark.keras_preprocessing(out, impute=False)["x"]  # 100 nulls + 33 NaN
    assert type(plain).__name__ == "Normalization"


def _write_beside(df, out, statistics, rows=None):
    """write_through_tasks of df to a new path `out`, with `statistics` (a Meanwhile) running
    beside it, as write_tfrecords runs its statistics (rows: the rows it should report)."""
    from tfspark.spark.tasks import write_through_tasks
    from tfspark.spark.write import Workflow
    from tfspark.store.commit import StartedFrom, new_write_id
    from tfspark.store.options import WriteOptions

    return write_through_tasks(df, WriteOptions.from_arguments(str(out)), Workflow(
        "errorifexists", StartedFrom(None), new_write_id(), tfspark.infer_spec(df.schema)),
        statistics, rows=rows)


def test_task_reports_that_do_not_add_up_commit_nothing(spark, tmp_path):
    """The tasks' reports come back through a collect, which PySpark cut short without an
    error when the driver's JVM ran out of heap serving it (50 MiB values on the loopback
    cluster): written rows must add up to the staged rows before anything is committed."""
    df = spark.range(300).selectExpr("id", "id * 2 AS v").repartition(3)
    out = tmp_path / "short"
    with pytest.raises(tfspark.CountMismatchError, match=r"reported 300 rows written of the "
                                                         r"301 staged \(3 task reports"):
        _write_beside(df, out, None, rows=301)
    left = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert left == [], left
    assert _write_beside(df, tmp_path / "whole", None, rows=300).files


def test_the_commit_takes_the_statistics_computed_meanwhile_and_nothing_when_they_fail(
        spark, tmp_path):
    """write_tfrecords computes the statistics while its tasks write the TFRecords: the
    manifest is committed once both are done, with the statistics in it, and not at all (the
    tasks' files removed) when the statistics fail."""
    from tfspark.spark.meanwhile import Meanwhile

    df = spark.range(200).selectExpr("id", "id * 2 AS v")
    counted = Meanwhile(spark, lambda: {"features": {"v": {"rows": df.count()}}}, "test")
    done = _write_beside(df, tmp_path / "ok", counted)
    assert done.stats["features"] == {"v": {"rows": 200}}
    assert read_manifest(str(tmp_path / "ok")).feature_stats()["v"]["rows"] == 200

    def fail():
        df.selectExpr("assert_true(id < 0, 'the statistics job failed')").collect()

    failed = tmp_path / "failed"
    with pytest.raises(Exception, match="the statistics job failed"):
        _write_beside(df, failed, Meanwhile(spark, fail, "test"))
    left = [p for p in failed.rglob("*") if p.is_file()] if failed.exists() else []
    assert left == [], left


def test_failed_tasks_cancel_the_statistics_jobs(spark, tmp_path):
    """When the TFRecord tasks fail, write_tfrecords fails at once: the statistics' jobs still
    running are cancelled, not waited for (the job here would run for minutes)."""
    from tfspark.spark.meanwhile import Meanwhile

    df = spark.createDataFrame([([1.0, None],)], "a array<double>")  # a null element: refused
    # one task: the session's other slot is the writer's (jobs are scheduled first come)
    long_job = Meanwhile(spark, lambda: spark.range(0, 10**12, 1, 1).selectExpr(
        "sum(id % 7)").collect(), "test")
    out = tmp_path / "ds"
    with pytest.raises(Exception, match="null"):
        _write_beside(df, out, long_job)
    with pytest.raises(Exception, match="(?i)cancel"):
        long_job.result()
    assert not (out / "_tfspark.json").exists()


def test_statistics_whose_task_reports_would_be_too_large_come_from_the_jobs(
        spark, tmp_path, caplog):
    """The tasks' statistics come back through the driver: when they could take more than
    export.REPORTS_BYTES (here: top values of 3,000,000 per array feature, 144 MB of counts
    a task at most), Spark's jobs gather them instead, and the write says so."""
    import logging

    df = spark.range(50).selectExpr("id", "array(id % 7, id % 5) AS ids")
    small, large = str(tmp_path / "small"), str(tmp_path / "large")
    tfspark.write_tfrecords(df, small)
    with caplog.at_level(logging.INFO, logger="tfspark"):
        tfspark.write_tfrecords(df, large, stats_top_k=3_000_000)
    assert manifest(small)["stats"]["computed_by"] == "write tasks (sketches)"
    stats = manifest(large)["stats"]
    assert "computed_by" not in stats and stats["stats_seconds"] > 0
    assert stats["features"]["ids"]["top"][0] == [0, 18]  # 0 is in 8 + 10 of the rows
    assert "statistics by Spark's jobs (the 1 write tasks' own could send the driver about " \
           "137 MB)" in caplog.text
