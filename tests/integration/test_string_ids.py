"""read_batches(strings="ids"): strings become the ids Keras's StringLookup gives them (the
oracle: the layer keras_preprocessing builds from the same statistics), in both layouts, for
scalar, variable-length and 2-D string features; vocabularies from a split or given; every
string feature read needs one, and the error names those without."""

from __future__ import annotations

import os

import numpy as np
import pytest
from jaxcheck import path_without_tensorflow

import tfspark
from tfspark.errors import OptionError
from tfspark.numpy import Ragged

pytestmark = [pytest.mark.spark]

ROWS = 2_000
CITIES = ["paris", "lyon", "nice", "lille", "metz", "brest", "caen", "dijon"]


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory) -> dict[int, str]:
    """city (nullable, skewed), tags (variable-length, nullable), grid (2-D), order (an id:
    one value per row), y; rows per record 1 and 64, three splits."""
    from pyspark.sql import functions as F

    i = F.col("id")
    city = F.element_at(F.array(*[F.lit(c) for c in CITIES]),
                        (F.pmod(i * i, F.lit(len(CITIES))) + 1).cast("int"))
    df = spark.range(ROWS, numPartitions=2).select(
        i.alias("key"), F.when(i % 9 == 0, None).otherwise(city).alias("city"),
        F.expr("CASE WHEN id % 5 = 0 THEN NULL ELSE "
               "transform(sequence(0, id % 3), x -> concat('t', CAST((id + x) % 6 AS STRING)))"
               " END").alias("tags"),
        F.expr("array(array(concat('g', CAST(id % 4 AS STRING))), array())").alias("grid"),
        F.concat(F.lit("order-"), i.cast("string")).alias("order"),
        (i % 2).cast("int").alias("y"))
    root = tmp_path_factory.mktemp("ids")
    out = {}
    for block in (1, 64):
        path = str(root / f"b{block}")
        tfspark.write_tfrecords(df, path, label_cols=["y"], rows_per_record=block,
                                split={"train": 0.8, "validation": 0.2}, split_key="key",
                                backup_path=path + "_backup")
        out[block] = path
    return out


def _rows(reader, name: str) -> list:
    out: list = []
    for x, _ in reader:
        col = x[name]
        out += col.to_list() if isinstance(col, Ragged) else col.tolist()
    return out


@pytest.mark.tf
@pytest.mark.parametrize("block", [1, 64])
def test_ids_are_what_string_lookup_gives(written, block):
    path = written[block]
    keep = ["key", "city", "tags", "grid"]
    args = dict(shuffle_buffer=0, shuffle_files=False, num_threads=1, split="train",
                columns=keep)
    strings = tfspark.read_batches(path, 256, **args)
    ids = tfspark.read_batches(path, 256, strings="ids", **args)
    layers = tfspark.keras_preprocessing(path, arrays="ids", skip=["order"])  # all rows
    assert _rows(ids, "key") == _rows(strings, "key")
    city = _rows(strings, "city")
    want = layers["city"](np.array([c.decode() for c in city])).numpy().tolist()
    got = _rows(ids, "city")
    assert got == want and min(got) >= 1  # every city is in the vocabulary; nulls too
    assert isinstance(next(iter(ids))[0]["city"], np.ndarray)
    assert next(iter(ids))[0]["city"].dtype == np.int64
    lookup = layers["tags"]
    for theirs, ours in zip(_rows(strings, "tags"), _rows(ids, "tags")):
        expect = lookup(np.array([t.decode() for t in theirs] or [""]))
        assert ours == (expect.numpy().tolist() if theirs else []), (theirs, ours)
    grid = _rows(ids, "grid")
    assert all(len(r) == 2 and len(r[0]) == 1 and r[1] == [] for r in grid)
    assert {r[0][0] for r in grid} <= set(range(1, 5))


def test_vocabularies_given_or_of_a_split(written):
    path = written[64]
    ids = tfspark.read_batches(path, 100, strings="ids", columns=["city"], shuffle_buffer=0,
                               shuffle_files=False, num_threads=1, label_cols=[],
                               split="train", vocabulary={"city": ["paris", "lyon"]})
    names = tfspark.read_batches(path, 100, columns=["city"], shuffle_buffer=0,
                                 shuffle_files=False, num_threads=1, label_cols=[],
                                 split="train")
    expect = [{b"paris": 1, b"lyon": 2}.get(c, 0) for c in _rows_plain(names, "city")]
    assert _rows_plain(ids, "city") == expect
    # the vocabulary of one split's statistics, read on another split
    train = tfspark.read_batches(path, 100, strings="ids", columns=["city"], label_cols=[],
                                 split="validation", vocabulary="train")
    assert set(_rows_plain(train, "city")) <= set(range(0, len(CITIES) + 2))


def _rows_plain(reader, name: str) -> list:
    return [v for batch in reader for v in batch[name].tolist()]


def test_every_string_feature_needs_a_vocabulary(written):
    path = written[1]
    with pytest.raises(OptionError, match=r"'order' has none \(its statistics keep no top "
                                          r"values.*columns=\[\.\.\.\]"):
        tfspark.read_batches(path, 10, strings="ids", split="train")
    with pytest.raises(OptionError, match=r"\['town'\] are not string features"):
        tfspark.read_batches(path, 10, strings="ids", columns=["city"], split="train",
                             vocabulary={"town": ["x"]})
    with pytest.raises(OptionError, match="no statistics of that split"):
        tfspark.read_batches(path, 10, strings="ids", columns=["city"], split="train",
                             vocabulary="nope")
    with pytest.raises(OptionError, match="vocabulary= is for strings='ids'"):
        tfspark.read_batches(path, 10, split="train", vocabulary={"city": ["x"]})


FIT = r'''
import os, sys
os.environ["KERAS_BACKEND"] = sys.argv[2]
import keras
import numpy as np
import tfspark

path = sys.argv[1]
keras.utils.set_random_seed(1)
layers = tfspark.keras_preprocessing(path, strings="ids", split="train", skip=["grid"],
                                     categorical=[])
city = layers["city"]
assert isinstance(city, tfspark.keras.VocabularyIds), type(city)
# an array of strings: ids per element (for PooledEmbedding), not TensorFlow's lookup
assert isinstance(layers["tags"], tfspark.keras.VocabularyIds), type(layers["tags"])
try:  # a variable-length feature is refused by name: this backend takes it only padded
    tfspark.keras_inputs(path, strings="ids")
    raise SystemExit("keras_inputs took the variable-length 'tags' unpadded")
except tfspark.SchemaError as e:
    assert "takes no ragged Inputs, and 'grid', 'tags' are variable-length" in str(e) and \
        "('grid': 2-D, which cannot be padded)" in str(e), e
inputs = tfspark.keras_inputs(path, names=["city", "key"], strings="ids")
x = keras.layers.Embedding(city.vocabulary_size(), 4)(city(inputs["city"]))
key = layers["key"](inputs["key"])  # a scalar's Normalization takes its Input as it is
x = keras.layers.Concatenate()([x, keras.layers.Reshape((1,))(key)])
model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(x))
model.compile(optimizer=keras.optimizers.Adam(0.05), loss="binary_crossentropy",
              metrics=["accuracy"])
train = tfspark.read_batches(path, 64, split="train", strings="ids", vocabulary="train",
                             columns=["city", "key"], epochs=None, seed=1)
model.fit(iter(train), steps_per_epoch=train.steps_per_epoch(), epochs=4, verbose=0)
test = tfspark.read_batches(path, 400, split="validation", strings="ids", vocabulary="train",
                            columns=["city", "key"])
acc = model.evaluate(iter(test), steps=test.steps_per_epoch(), verbose=0,
                     return_dict=True)["accuracy"]
print("BACKEND", keras.backend.backend(), "TF", "tensorflow" in sys.modules and
      sys.modules["tensorflow"] is not None, "ACCURACY", round(float(acc), 3))
'''


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_keras_learns_from_ids_on_a_backend_without_tensorflow(written, backend, tmp_path):
    """Keras 3 on PyTorch or JAX, TensorFlow unimportable: keras_inputs, keras_preprocessing
    and read_batches(strings="ids") train a model whose label follows the city's parity."""
    import subprocess
    import sys

    pytest.importorskip(backend)
    script = tmp_path / "fit.py"
    script.write_text(FIT)
    # A tensorflow that fails to import, as on a machine without it (sys.modules["tensorflow"]
    # = None would not do: Keras's preprocessing layers take the name's presence for TensorFlow)
    env = {**os.environ, "PYTHONPATH": path_without_tensorflow(tmp_path)}
    done = subprocess.run([sys.executable, str(script), written[64], backend],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("BACKEND")][-1]
    _, name, _, tf_loaded, _, acc = line.split()
    assert name == backend and tf_loaded == "False"
    assert float(acc) > 0.8  # nulls (1 in 9) read as the default string: no parity there


def test_vocabulary_ids_layer_clamps_and_reports_its_vocabulary():
    pytest.importorskip("keras")
    layer = tfspark.keras.VocabularyIds(["a", "b"])
    assert layer.vocabulary_size() == 3 and layer.get_vocabulary() == ["[UNK]", "a", "b"]
    assert np.asarray(layer(np.array([0, 1, 2, 3, 7]))).tolist() == [0, 1, 2, 0, 0]


def test_padded_variable_length_features(written):
    """ragged="padded": values [batch, width] and a mask, the width of the longest row in the
    statistics (or pad_to, cutting longer rows); the same rows as the Ragged reader's."""
    path = written[64]
    args = dict(split="train", columns=["key", "tags"], shuffle_buffer=0, shuffle_files=False,
                num_threads=1)
    ragged = [(k, r) for x, _ in tfspark.read_batches(path, 300, **args)
              for k, r in zip(x["key"].tolist(), x["tags"].to_list())]
    for strings, fill in (("object", b""), ("ids", 0)):
        padded = list(tfspark.read_batches(path, 300, ragged="padded", strings=strings, **args))
        x = padded[0][0]
        assert x["tags"].shape == x["tags_mask"].shape == (300, 3)  # tags hold 1..3 values
        assert x["tags_mask"].dtype == bool
        rows = [(k, v, m) for x, _ in padded
                for k, v, m in zip(x["key"].tolist(), x["tags"].tolist(), x["tags_mask"].tolist())]
        assert [k for k, _, _ in rows] == [k for k, _ in ragged]
        for (_, want), (_, values, mask) in zip(ragged, rows):
            assert sum(mask) == len(want) and values[len(want):] == [fill] * (3 - len(want))
            if strings == "object":
                assert values[:len(want)] == want
    reader = tfspark.read_batches(path, 300, ragged="padded", strings="ids", **args)
    inputs = tfspark.keras_inputs(path, names=["tags"], strings="ids", padded=reader.pad_widths)
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == {
        "tags": ((None, 3), "int64"), "tags_mask": ((None, 3), "bool")}
    cut = next(iter(tfspark.read_batches(path, 300, ragged="padded", pad_to=2, **args)))[0]
    assert cut["tags"].shape == (300, 2) and cut["tags_mask"].all(axis=1).any()
    with pytest.raises(OptionError, match="pads one level: 'grid' has two"):
        tfspark.read_batches(path, 10, split="train", ragged="padded")
    with pytest.raises(OptionError, match=r"pad_to names \['city'\], which are not"):
        tfspark.read_batches(path, 10, split="train", columns=["tags"], ragged="padded",
                             pad_to={"city": 3})
    with pytest.raises(OptionError, match="pad_to= is for ragged='padded'"):
        tfspark.read_batches(path, 10, split="train", pad_to=3)
