"""make_dataset, keras_inputs and the train job on data written by write_tfrecords.

One data set is written per module (every type, nulls, gzip, train/validation/test splits over
several files); the tests read it, or copies of parts of it, with TensorFlow.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
import shutil
from collections import Counter

import pytest
from jaxcheck import train_on_jax_without_tensorflow, write_train_config
from tfcheck import check_rich_row, f32, rich_fields

import tfspark
from tfspark.errors import OptionError, SchemaError
from tfspark.keras.inputs import keras_inputs
from tfspark.spec import FeatureSpec
from tfspark.store.manifest import ManifestError
from tfspark.store.read_plan import plan_read
from tfspark.tf.dataset import make_dataset

pytestmark = [pytest.mark.tf, pytest.mark.spark]

ROWS = 2000
SPLITS = {"train": 0.8, "validation": 0.1, "test": 0.1}


def _rows():
    from pyspark.ml.linalg import Vectors

    out = []
    for k in range(ROWS):
        null = k % 5 == 4
        # Two features and a learnable label: label = x1 + 2 * x2 > 0.
        x1 = math.sin(k * 12.9898) * 2
        x2 = math.cos(k * 78.233) * 1.5
        out.append((
            k, None if null else k * 1000 - 7, None if null else -32768 + k,
            None if null else (k % 256) - 128, None if null else k % 2 == 0,
            None if null else k / 3, None if null else (-1.0) ** k * 1e10 / (k + 1),
            None if null else decimal.Decimal(f"{k}.125"), None if null else f"té{k}\u4e2d",
            None if null else bytes([0, k % 256, 255]),
            None if null else dt.date(1960 + k % 80, 2, 28),
            None if null else dt.datetime(1950 + k % 80, 1, 1, 12, 0, 0, 123456,
                                          tzinfo=dt.timezone.utc),
            None if null else [float(j) for j in range(k % 4)],
            [float(k), 0.5, -0.0],
            None if null else [[j] * j for j in range(k % 3)],
            None if null else (k, f"s{k}"),
            None if null else (Vectors.dense([k, 1.0]) if k % 2 else
                               Vectors.sparse(2, [1], [float(k)])),
            ["a", "b", "c"][k % 3],
            x1, x2, int(x1 + 2 * x2 > 0),
        ))
    return out


def _schema():
    from pyspark.sql import types as T

    return T.StructType(rich_fields() + [
        T.StructField("cat", T.StringType(), False),
        T.StructField("x1", T.DoubleType(), False), T.StructField("x2", T.DoubleType(), False),
        T.StructField("label", T.IntegerType(), False),
    ])


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    """(path, source rows by id, write result): the one data set of this module."""
    rows = _rows()
    out = str(tmp_path_factory.mktemp("dataset") / "ds")
    df = spark.createDataFrame(rows, _schema())
    result = tfspark.write_tfrecords(df, out, label_cols=["label"], compression="gzip",
                                     split=SPLITS, split_key="id", max_records_per_file=300)
    assert result.rows == ROWS and result.splits["train"].files > 2
    return out, {r[0]: r for r in rows}, result


def _collect(tf, ds):
    """{feature: [python values per row]} (and "__label__") from a (features, labels) dataset."""
    out: dict[str, list] = {}
    for x, y in ds:
        for name, value in {**x, "__label__": y}.items():
            vals = _ragged_list(value) if isinstance(value, tf.RaggedTensor) else \
                value.numpy().tolist()
            out.setdefault(name, []).extend(vals)
    return out


def _ragged_list(rt):
    # RaggedTensor.to_list() slices row by row in eager mode: slow; fold the row splits instead.
    values = rt.flat_values.numpy().tolist()
    for splits in reversed([s.numpy().tolist() for s in rt.nested_row_splits]):
        values = [values[a:b] for a, b in zip(splits, splits[1:])]
    return values


def _ids(ds, key="id"):
    ids = []
    for batch in ds:
        x = batch[0] if isinstance(batch, tuple) else batch
        ids.extend(x[key].numpy().tolist())
    return ids


def _split_files(path, split):
    with open(os.path.join(path, split, "_tfspark.json")) as f:
        return json.load(f)


def test_every_type_matches_source(tf, data):
    path, src, result = data
    got: dict[int, dict] = {}
    for split in SPLITS:
        ds = make_dataset(path, 64, split=split, deterministic=True, shuffle_buffer=0,
                          shuffle_files=False)
        x_spec, y_spec = ds.element_spec
        assert y_spec.dtype == tf.int64 and y_spec.shape.rank == 1  # one label: a tensor
        assert "label" not in x_spec
        assert isinstance(x_spec["arr"], tf.RaggedTensorSpec) and x_spec["arr"].ragged_rank == 1
        assert isinstance(x_spec["rag"], tf.RaggedTensorSpec) and x_spec["rag"].ragged_rank == 2
        assert x_spec["emb"].shape.as_list() == [None, 3]
        assert x_spec["vec"].shape.as_list() == [None, 2] and x_spec["txt"].dtype == tf.string
        cols = _collect(tf, ds)
        assert len(cols["id"]) == result.splits[split].rows
        names = list(cols)
        for row in zip(*cols.values()):
            g = dict(zip(names, row))
            got[g["id"]] = g
    assert sorted(got) == list(range(ROWS))
    for k, r in src.items():
        g = got[k]
        check_rich_row(g, r)
        assert g["cat"] == r[17].encode() and g["x1"] == f32(r[18])
        assert g["__label__"] == r[20]


def test_labels_override_and_features_only(tf, data):
    path = data[0]
    ds = make_dataset(path, 32, split="test", label_cols=["label", "x1"])
    x, y = next(iter(ds))
    assert set(y) == {"label", "x1"} and "x1" not in x and "label" not in x
    ds = make_dataset(path, 32, split="test", label_cols=[])
    batch = next(iter(ds))
    assert isinstance(batch, dict) and "label" in batch  # no labels: features dict alone
    with pytest.raises(SchemaError, match="'nope'"):
        make_dataset(path, 32, split="test", label_cols=["nope"])


def test_interleave_two_epochs_every_record_twice(data):
    path, _, result = data
    ds = make_dataset(path, 50, split="train", epochs=2, seed=None)
    ids = _ids(ds)
    counts = Counter(ids)
    assert len(counts) == result.splits["train"].rows and set(counts.values()) == {2}
    assert ids[:200] != sorted(ids[:200])  # shuffled
    # The manifest's record count is the dataset's cardinality (Keras knows the steps).
    assert int(ds.cardinality()) == math.ceil(2 * result.splits["train"].rows / 50)


@pytest.mark.parametrize("cache", [True, "file"])
def test_seeded_order_repeats_and_cache(data, tmp_path, cache):
    path = data[0]
    cache = str(tmp_path / "cache") if cache == "file" else cache

    def read():
        return make_dataset(path, 32, split="validation", seed=7, deterministic=True,
                            cache=cache)

    ds = read()
    first, second = _ids(ds), _ids(ds)  # two passes, as Keras makes per epoch
    assert first != second and sorted(first) == sorted(second)  # reshuffled every pass
    assert _ids(read()) == first  # the same seed gives the same order again


def test_splits_read_only_their_rows(data):
    path, _, result = data
    val = _ids(make_dataset(path, 64, split="validation"))
    train = _ids(make_dataset(path, 64, split="train"))
    assert len(val) == result.splits["validation"].rows and not set(val) & set(train)
    # The split directory itself reads the same; the top directory needs a split.
    assert sorted(_ids(make_dataset(os.path.join(path, "validation"), 64))) == sorted(val)
    with pytest.raises(OptionError, match="split="):
        make_dataset(path, 64)
    with pytest.raises(ManifestError, match="no split 'nope'"):
        make_dataset(path, 64, split="nope")


def test_only_manifest_files_are_read(data, tmp_path):
    path = data[0]
    copy = tmp_path / "val"
    shutil.copytree(os.path.join(path, "validation"), copy)
    manifest = _split_files(path, "validation")
    first = manifest["files"][0]["path"]
    # A stray valid TFRecord (e.g. a failed attempt's), Spark/Hadoop leftovers.
    shutil.copy(copy / first, copy / "part-99999-stray.tfrecord.gz")
    (copy / "_SUCCESS").write_bytes(b"")
    (copy / ".part-0.crc").write_bytes(b"junk")
    ids = _ids(make_dataset(str(copy), 64))
    assert len(ids) == len(set(ids)) == manifest["records"]


def test_explicit_files_with_spec(data):
    path = data[0]
    manifest = _split_files(path, "test")
    files = [os.path.join(path, "test", e["path"]) for e in manifest["files"]]
    spec_json = FeatureSpec.from_dict(manifest["spec"]).to_json()
    for spec in (spec_json, os.path.join(path, "test", "_tfspark.json"), json.loads(spec_json)):
        ids = _ids(make_dataset(files, 64, spec=spec))  # gzip from the ".gz" suffix
        assert sorted(ids) == sorted(set(ids)) and len(ids) == manifest["records"]
    with pytest.raises(OptionError, match="spec="):
        make_dataset(files, 64)


def test_missing_manifest_missing_file_wrong_count(tf, data, tmp_path):
    path = data[0]
    copy = tmp_path / "val"
    shutil.copytree(os.path.join(path, "validation"), copy)
    first = _split_files(path, "validation")["files"][0]["path"]
    os.remove(copy / first)
    with pytest.raises(FileNotFoundError, match=first):
        make_dataset(str(copy), 64)
    # A file holding fewer records than its manifest says fails the epoch.
    doc = json.loads((copy / "_tfspark.json").read_text())
    doc["files"] = doc["files"][1:]
    doc["files"][0]["records"] += 1
    (copy / "_tfspark.json").write_text(json.dumps(doc))
    # The failure names the file and both counts (TensorFlow's own error names neither).
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"{doc['files'][0]['path']}: holds \d+ records but the manifest "
                             rf"lists {doc['files'][0]['records']}"):
        _ids(make_dataset(str(copy), 64))
    os.remove(copy / "_tfspark.json")
    with pytest.raises(ManifestError, match=f"no _tfspark.json in '{copy}'"):
        plan_read(str(copy))
    bad = tmp_path / "raw"
    bad.mkdir()
    (bad / "_tfspark.json").write_text(json.dumps(
        {"format": "tfspark.manifest", "version": 1, "record_type": "ByteArray", "spec": None,
         "files": [], "splits": []}))
    with pytest.raises(SchemaError, match="ByteArray"):
        make_dataset(str(bad), 64)


@pytest.mark.parametrize("split", ["train", "validation"])  # shard by files / by records
def test_shards_cover_every_record_once(data, split):
    path, _, result = data
    ids = []
    for index in range(2):
        ids += _ids(make_dataset(path, 64, split=split, shard=(2, index), even_shards=False))
    assert len(ids) == len(set(ids)) == result.splits[split].rows


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("split", ["train", "validation"])  # shard by files / by records
def test_even_shards_take_the_same_steps_on_every_worker(tf, data, split, workers):
    """What MultiWorkerMirroredStrategy needs: every worker the same batches per epoch, known
    to Keras; disjoint across workers; what is cut is at most the imbalance of the shards."""
    path, _, result = data
    rows = result.splits[split].rows
    steps, ids = [], []
    for index in range(workers):
        ds = make_dataset(path, 32, split=split, shard=(workers, index), epochs=2, seed=index)
        batches = [b[0]["id"].numpy().tolist() for b in ds]
        steps.append(len(batches))
        assert int(ds.cardinality()) == len(batches)
        ids += [i for b in batches[:len(batches) // 2] for i in b]  # one epoch
    assert len(set(steps)) == 1, steps
    assert len(ids) == len(set(ids)) and rows - len(ids) < rows / workers / 2


def _small_data_set(spark, path):
    from pyspark.sql import functions as F

    df = spark.range(0, 3000, numPartitions=3).select("id", (F.col("id") * 0.5).alias("x"))
    tfspark.write_tfrecords(df, str(path), mode="overwrite", max_records_per_file=1000)
    doc = json.loads((path / "_tfspark.json").read_text())
    return [f["path"] for f in doc["files"]]


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_a_corrupt_or_short_file_is_named_with_its_offset(spark, tf, tmp_path, damage):
    files = _small_data_set(spark, tmp_path / "ds")
    victim = tmp_path / "ds" / files[1]
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    else:
        data = data[:len(data) - 7]
    victim.write_bytes(bytes(data))
    # TensorFlow's own message ("corrupted record at 476") names no file: ours does.
    what = "(data|length) CRC mismatch" if damage == "flip" else "truncated record"
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"{victim}: {what}.* byte offset \d+"):
        _ids(make_dataset(str(tmp_path / "ds"), 256, shuffle_buffer=0))


def test_gzip_files_are_known_by_their_content_not_their_name(spark, tf, tmp_path):
    import gzip

    files = _small_data_set(spark, tmp_path / "ds")
    spec = str(tmp_path / "ds" / "_tfspark.json")
    named = []
    for k, rel in enumerate(files):  # gzip'd into files named like plain ones, and the reverse
        raw = (tmp_path / "ds" / rel).read_bytes()
        out = tmp_path / (f"plain_named_{k}.tfrecord" if k % 2 else f"raw_{k}.tfrecord.gz")
        out.write_bytes(gzip.compress(raw) if k % 2 else raw)
        named.append(str(out))
    ids = _ids(make_dataset(named, 256, spec=spec, label_cols=[], shuffle_buffer=0))
    assert sorted(ids) == list(range(3000))
    # Without a manifest every file is also counted again at its end: a short one is named.
    short = tmp_path / "plain_named_1.tfrecord"
    short.write_bytes(gzip.compress(gzip.decompress(short.read_bytes())[:-9]))
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"{short}: truncated record"):
        _ids(make_dataset(named, 256, spec=spec, label_cols=[], shuffle_buffer=0))


def test_keras_model_from_keras_inputs_learns(tf, data):
    import keras

    path = data[0]
    spec = FeatureSpec.from_dict(_split_files(path, "train")["spec"])
    small = FeatureSpec(tuple(spec[n] for n in ("x1", "x2", "label")))
    inputs = keras_inputs(small)
    assert set(inputs) == {"x1", "x2"} and inputs["x1"].shape == (None,)
    x = keras.layers.Concatenate()([keras.ops.expand_dims(inputs[n], -1) for n in ("x1", "x2")])
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(x))
    model.compile(keras.optimizers.Adam(0.05), "binary_crossentropy")
    ds = make_dataset(path, 32, split="train", spec=small, seed=1)
    before = model.evaluate(ds, verbose=0)
    model.fit(ds, epochs=1, verbose=0, shuffle=False)
    after = model.evaluate(ds, verbose=0)
    assert after < 0.7 * before, (before, after)


def test_keras_inputs_match_every_feature(tf, data):
    spec = FeatureSpec.from_dict(_split_files(data[0], "train")["spec"])
    inputs = keras_inputs(spec, include_labels=True)
    assert list(inputs) == spec.names
    assert inputs["arr"].ragged and inputs["arr"].shape == (None, None)
    assert inputs["rag"].ragged and inputs["rag"].shape == (None, None, None)
    assert inputs["emb"].shape == (None, 3) and inputs["txt"].dtype == "string"
    assert inputs["st.a"].dtype == "int64"


def test_train_job_end_to_end(data, tmp_path):
    import keras

    from tfspark.cli.train import train

    out = tmp_path / "model.keras"
    result = train({"data": data[0], "epochs": 1, "batch_size": 64, "model_out": str(out),
                    "exclude": ["id"], "hidden_units": [8], "bench_batches": 5, "verbose": 0},
                   echo=lambda s: None)
    assert out.exists() and result["task"] == "binary"
    model = keras.models.load_model(out)  # the saved file is a whole model
    x = next(iter(make_dataset(data[0], 8, split="test", label_cols=[])))
    assert model.predict({k: x[k] for k in model.input}, verbose=0).shape == (8, 1)
    assert "x1" in result["numeric"] and result["categorical"] == ["cat"]
    # Arrays are pooled (from the export's statistics); text and binary are not.
    assert {"arr", "rag"} <= set(result["arrays"]) and result["preprocessing"] == "statistics"
    assert {"txt", "bin"} <= set(result["ignored"])
    assert "val_loss" in result["final"] and result["train_examples_per_s"] > 0


def test_mirrored_strategy_iterates(tf, data):
    path, _, result = data
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    ds = make_dataset(path, 64, split="validation")
    n = 0
    for _x, y in strategy.experimental_distribute_dataset(ds):
        n += int(y.shape[0])
    assert n == result.splits["validation"].rows


@pytest.mark.training
@pytest.mark.slow
def test_train_job_on_jax_without_tensorflow_as_on_tensorflow(data, spark, tmp_path):
    """`tfspark train --backend jax`: the same model from the same statistics, fed by
    read_batches with strings as ids, in a process where TensorFlow cannot be imported, and on
    two Spark workers (one DataParallel model); validation AUC as the TensorFlow job's."""
    import re

    from tfspark.cli.config import TrainConfig
    from tfspark.cli.train import train
    from tfspark.cli.train_cluster import train_distributed

    settings = {"data": data[0], "epochs": 4, "batch_size": 64, "learning_rate": 0.01,
                "exclude": ["id"], "hidden_units": [8], "bench_batches": 0, "verbose": 0}
    on_tf = train({**settings, "model_out": str(tmp_path / "tf.keras")}, echo=lambda s: None)
    conf = write_train_config(tmp_path / "train.toml", settings)
    done = train_on_jax_without_tensorflow(conf, tmp_path / "jax.keras", tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "categorical features (1): cat (3 values, onehot)" in done.stdout, done.stdout
    jax_auc = float(re.search(r"^final: .*val_auc=([\d.]+)", done.stdout, re.M).group(1))
    assert (tmp_path / "jax.keras").exists()
    two = train_distributed(TrainConfig.from_mapping(
        {**settings, "backend": "jax", "workers": 2, "model_out": str(tmp_path / "two.keras"),
         "checkpoint_every": 5}),  # through ctx.fit: checkpoints mid-epoch too
        echo=lambda s: None, spark=spark)
    assert two["workers"] == 2 and (tmp_path / "two.keras").exists()
    import keras

    saved = keras.saving.load_model(str(tmp_path / "two.keras"))
    # Large integers (timestamps in microseconds) go in as float32: JAX wraps int64 arrays.
    assert saved.input["ts"].dtype == "float32", saved.input["ts"]
    log = (tmp_path / "two.checkpoints" / "logs" / "worker-1.log").read_text()
    assert "started: 2 processes, 2 devices in sync" in log, log[-3000:]
    aucs = {"tensorflow": on_tf["final"]["val_auc"], "jax": jax_auc,
            "jax, 2 workers": two["final"]["val_auc"]}
    assert min(aucs.values()) > 0.9 and max(aucs.values()) - min(aucs.values()) < 0.02, aucs


@pytest.mark.training
@pytest.mark.slow
def test_train_job_on_two_spark_workers_adapting_on_a_sample(data, spark, tmp_path):
    """`tfspark train --workers 2` without statistics: both workers adapt on the same sample
    (the whole split, fixed order), so they build the same model; the chief saves it."""
    import keras

    from tfspark.cli.main import main

    conf = tmp_path / "train.toml"
    out = tmp_path / "model.keras"
    conf.write_text(f'data = "{data[0]}"\nmodel_out = "{out}"\nworkers = 2\nuse_stats = false\n'
                    f'epochs = 2\nbatch_size = 64\nexclude = ["id"]\nhidden_units = [8]\n'
                    f'bench_batches = 0\nverbose = 0\n')
    assert main(["train", "--config", str(conf)]) == 0
    model = keras.models.load_model(out)
    x = next(iter(make_dataset(data[0], 8, split="test", label_cols=[])))
    assert model.predict({k: x[k] for k in model.input}, verbose=0).shape == (8, 1)
    logs = tmp_path / "model.checkpoints" / "logs"
    chosen = []
    for i in (0, 1):
        text = (logs / f"worker-{i}.log").read_text()
        assert f"worker {i} of 2: shard {i} of the train at 32 examples per step" in text
        # What each worker took from its sample (its label mean, vocabularies, distinct counts
        # of the ignored columns): the same lines, so the same sample.
        chosen.append([ln.split("] ", 1)[1] for ln in text.splitlines()
                       if "] preprocessing: adapted on 20 batches (no statistics): 640 rows, "
                          "label mean 0." in ln
                       or "] categorical features" in ln or "] ignored " in ln])
        assert len(chosen[-1]) == 7, text[-3000:]
    assert chosen[0] and chosen[0] == chosen[1], chosen
    assert not list((tmp_path / "model.checkpoints").glob("epoch-*"))


@pytest.mark.parametrize("cores,autotune", [(1, False), (2, False), (4, None)])
def test_the_autotuner_is_off_on_small_machines_and_a_caller_can_turn_it_on(
        tf, data, monkeypatch, cores, autotune):
    from tfspark.tf import dataset as ds_module

    path, _, result = data
    monkeypatch.setattr(ds_module, "cores", lambda: cores)
    ds = make_dataset(path, 32, split="train", epochs=1)
    assert ds.options().autotune.enabled is autotune
    on = tf.data.Options()
    on.autotune.enabled = True
    again = ds.with_options(on)
    assert again.options().autotune.enabled is True
    assert sorted(_ids(ds)) == sorted(_ids(again)) and \
        len(_ids(ds)) == result.splits["train"].rows


@pytest.mark.spark
def test_keras_inputs_takes_a_spec_or_a_path(spark, tmp_path, tf):
    out = str(tmp_path / "d")
    tfspark.write_tfrecords(spark.range(5).selectExpr("id", "id * 1.5 as x"), out,
                            label_cols=["id"], stats=False)
    assert list(tfspark.keras_inputs(out)) == ["x"]
    with pytest.raises(tfspark.ManifestError, match=r"'x' does not exist: check the path"):
        tfspark.keras_inputs("x")
    with pytest.raises(SchemaError, match="needs a tfspark.FeatureSpec or a data set's path, "
                                          "got int"):
        tfspark.keras_inputs(3)
    with pytest.raises(SchemaError, match=r"names \['y'\] are not features of the data set; "
                                          r"its features are \['id', 'x'\]"):
        tfspark.keras_inputs(out, names=["x", "y"])

