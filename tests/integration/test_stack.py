"""read_batches(stack=...): several fixed features handed over as one array [batch, k]. The
oracle is the same reader without stack= and np.stack of its columns: the same rows in the
same order for both layouts, with and without a shuffle, on a resumed reader and in a PyTorch
DataLoader; every bad stack named in one line."""

from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T
from test_numpy_reader import write_dir

import tfspark
from tfspark.errors import OptionError
from tfspark.spec.from_spark import infer_spec

ROWS = 5_000
FLOATS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> dict[int, str]:
    """a, b, c (float32; b nullable), v (float32 [2]), i, j (int64), city (string), tags
    (variable-length), y (label); rows and block layout, 3 files each."""
    schema = T.StructType([
        *[T.StructField(n, T.FloatType(), n == "b") for n in FLOATS],
        T.StructField("v", T.ArrayType(T.FloatType(), False), False),
        T.StructField("i", T.LongType(), False), T.StructField("j", T.LongType(), False),
        T.StructField("city", T.StringType(), False),
        T.StructField("tags", T.ArrayType(T.LongType(), False), True),
        T.StructField("y", T.IntegerType(), False)])
    spec = infer_spec(schema, label_cols=["y"], shapes={"v": [2]}, defaults={"b": -1.0})
    rng = np.random.default_rng(0)
    k = np.arange(ROWS)
    batch = pa.RecordBatch.from_pydict({
        "a": pa.array(k.astype(np.float32)), "b": pa.array([None if x % 7 == 0 else x / 2
                                                            for x in k], pa.float32()),
        "c": pa.array(rng.standard_normal(ROWS, dtype=np.float32)),
        "v": pa.array([[x, -x] for x in k.astype(np.float32).tolist()],
                      pa.list_(pa.float32())),
        "i": pa.array(k), "j": pa.array(k * 3),
        "city": pa.array([["paris", "lyon", "nice"][x % 3] for x in k]),
        "tags": pa.array([None if x % 5 == 0 else list(range(x % 3)) for x in k],
                         pa.list_(pa.int64())),
        "y": pa.array((k % 2).astype(np.int32))})
    root = tmp_path_factory.mktemp("stack")
    return {block: write_dir(str(root / f"b{block}"), batch, spec, block, files=3)
            for block in (1, 64)}


STACK = {"x": ["a", "b", "v", "c"], "ids": ["j", "i"]}


def _stacked(x: dict) -> dict:
    """What stack=STACK should give, from the columns read apart."""
    return {"x": np.concatenate([x[n][:, None] if x[n].ndim == 1 else x[n]
                                 for n in STACK["x"]], 1),
            "ids": np.stack([x["j"], x["i"]], 1)}


@pytest.mark.parametrize("block", [1, 64])
@pytest.mark.parametrize("shuffle_buffer", [None, 0])
def test_same_rows_as_the_columns_stacked(paths, block, shuffle_buffer):
    args = dict(seed=4, epochs=2, shuffle_buffer=shuffle_buffer)
    apart = list(tfspark.read_batches(paths[block], 512, **args))
    together = list(tfspark.read_batches(paths[block], 512, stack=STACK, **args))
    assert len(apart) == len(together) == -(-2 * ROWS // 512)
    for (xa, ya), (xb, yb) in zip(apart, together):
        want = _stacked(xa)
        assert sorted(xb) == ["city", "ids", "tags", "x"]  # stacked features leave the batch
        assert xb["x"].dtype == np.float32 and xb["x"].shape == (len(ya), 5)
        assert xb["ids"].dtype == np.int64 and xb["x"].flags["C_CONTIGUOUS"]
        assert np.array_equal(xb["x"], want["x"]) and np.array_equal(xb["ids"], want["ids"])
        assert np.array_equal(ya, yb) and xb["tags"].to_list() == xa["tags"].to_list()
    b = np.concatenate([x["x"][:, 1] for x, _ in together])
    assert (b == -1.0).sum() == 2 * len(range(0, ROWS, 7))  # nulls hold the default


def test_strings_as_ids_stack_and_a_resumed_reader_goes_on(paths):
    args = dict(seed=2, columns=["a", "i", "city"], strings="ids",
                vocabulary={"city": ["paris", "lyon"]}, stack={"k": ["i", "city"]})
    whole = [x["k"] for x, _ in tfspark.read_batches(paths[64], 300, **args)]
    assert whole[0].dtype == np.int64 and whole[0].shape == (300, 2)
    got = np.concatenate(whole)
    ids = {0: 1, 1: 2, 2: 0}  # paris, lyon, nice (outside the vocabulary)
    assert sorted(got[:, 0].tolist()) == list(range(ROWS))
    assert all(c == ids[i % 3] for i, c in got.tolist())
    reader = tfspark.read_batches(paths[64], 300, **args)
    it = iter(reader)
    for _ in range(5):
        next(it)
    state = json.loads(json.dumps(reader.state_dict()))
    rest = [x["k"] for x, _ in tfspark.read_batches(paths[64], 300, state=state, **args)]
    assert len(rest) == len(whole) - 5
    assert all(np.array_equal(p, q) for p, q in zip(rest, whole[5:]))


def test_a_dataloader_with_workers_gets_the_stacks(paths):
    torch = pytest.importorskip("torch")
    ds = tfspark.torch_dataset(paths[64], 400, stack={"x": FLOATS}, columns=FLOATS,
                               shuffle_buffer=0, num_threads=1)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    rows = torch.cat([x["x"] for x, _ in loader])
    assert rows.dtype == torch.float32 and rows.shape == (ROWS, 3)
    assert sorted(rows[:, 0].tolist()) == list(range(ROWS))


@pytest.mark.parametrize("stack, message", [
    ({"x": ["a", "tags"]}, "stack 'x': 'tags' is a varlen int64 feature; only fixed-length"),
    ({"x": ["a", "city"]}, "stack 'x': 'city' is a fixed string feature; only fixed-length"),
    ({"x": ["a", "i"]}, "stack 'x': 'i' is int64 where 'a' is float32; stack features of one"),
    ({"x": ["a", "y"]}, "stack 'x': 'y' is a label column; labels come apart"),
    ({"x": ["a", "nope"]}, "stack 'x': no feature 'nope' in the read"),
    ({"x": ["a"], "z": ["a", "b"]}, "stack 'z': 'a' is already in stack 'x'"),
    ({"c": ["a", "b"]}, "stack 'c' is named like a feature read apart"),
    ({"x": "a"}, "stack: 'x' must name a non-empty list of features"),
    ({"x": []}, "stack: 'x' must name a non-empty list of features"),
    (["a", "b"], "stack must be a dict {name: [feature, ...]}"),
])
def test_a_bad_stack_is_named_before_reading(paths, stack, message):
    with pytest.raises(OptionError, match=r"^" + re.escape(message)):
        tfspark.read_batches(paths[1], 10, stack=stack)


def test_keras_inputs_take_the_stacks_and_a_model_trains_on_them(paths):
    keras = pytest.importorskip("keras")
    reader = tfspark.read_batches(paths[64], 256, columns=["a", "b", "v", "c", "i", "j"],
                                  stack=STACK, shuffle_buffer=0)
    inputs = tfspark.keras_inputs(paths[64], names=["a", "b", "v", "c", "i", "j"],
                                  stacks=reader.stacks)
    assert {k: (tuple(v.shape), v.dtype) for k, v in inputs.items()} == {
        "x": ((None, 5), "float32"), "ids": ((None, 2), "int64")}
    h = keras.layers.Concatenate()([inputs["x"], keras.ops.cast(inputs["ids"], "float32")])
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(h))
    model.compile("sgd", "binary_crossentropy")
    x, y = next(iter(reader))
    assert np.isfinite(model.train_on_batch(x, y))
