"""Records that lack what a given spec asks for: read_batches and
make_dataset agree. A required feature (not nullable, no default) missing from a record fails
naming the feature and the file, in both; a default fills it in, in both; a spec whose keys are
in none of the records fails before reading. Files are written by TensorFlow's own writer."""

from __future__ import annotations

import numpy as np
import pytest

import tfspark
from tfspark.errors import SchemaError
from tfspark.spec import FeatureSpec

pytestmark = pytest.mark.tf


def _spec(b_default: int | None) -> FeatureSpec:
    def feature(name: str, default: int | None) -> dict:
        out = {"name": name, "path": [name], "kind": "fixed", "dtype": "int64",
               "encoding": "int", "source_type": "bigint", "shape": [],
               "nullable": default is not None, "label": False}
        if default is not None:
            out["default"] = default
        return out

    return FeatureSpec.from_dict({"format": "tfspark.feature_spec", "version": 1,
                                  "features": [feature("a", None), feature("b", b_default)]})


@pytest.fixture(scope="module")
def holey(tmp_path_factory, tf):
    """6 Examples with a = 0..5 and b = 10 * a, except record 3, which has no b."""
    path = str(tmp_path_factory.mktemp("holey") / "data.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(6):
            feats = {"a": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
            if i != 3:
                feats["b"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[10 * i]))
            w.write(tf.train.Example(features=tf.train.Features(feature=feats))
                    .SerializeToString())
    return path


def _all(reader) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"a": [], "b": []}
    for batch in reader:
        for k in out:
            out[k] += [int(v) for v in np.asarray(batch[k])]
    return out


def test_a_missing_required_feature_fails_in_both_readers(holey, tf):
    spec = _spec(None)
    with pytest.raises(SchemaError, match=rf"{holey}: required feature 'b' is missing"):
        _all(tfspark.read_batches([holey], 4, spec=spec, shuffle_buffer=0, num_threads=1))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"{holey}.*record 3 has no required feature b "):
        _all(tfspark.make_dataset([holey], 4, spec=spec, shuffle_buffer=0,
                                  deterministic=True).as_numpy_iterator())


def test_a_default_fills_in_the_same_in_both_readers(holey):
    spec = _spec(-1)
    want = {"a": list(range(6)), "b": [0, 10, 20, -1, 40, 50]}
    got = _all(tfspark.read_batches([holey], 4, spec=spec, shuffle_buffer=0, num_threads=1))
    assert got == want
    got = _all(tfspark.make_dataset([holey], 4, spec=spec, shuffle_buffer=0,
                                    deterministic=True).as_numpy_iterator())
    assert got == want


def test_a_spec_of_other_keys_fails_before_reading(holey):
    other = FeatureSpec.from_dict({"format": "tfspark.feature_spec", "version": 1, "features": [
        {"name": "x", "path": ["x"], "kind": "fixed", "dtype": "int64", "encoding": "int",
         "source_type": "bigint", "shape": [], "nullable": True, "default": 0,
         "label": False}]})
    for read in (tfspark.read_batches, tfspark.make_dataset):
        with pytest.raises(SchemaError, match=r"names none of the keys in .*\['a', 'b'\]"):
            read([holey], 4, spec=other)


def test_a_strided_shard_names_the_record_in_the_file(tmp_path, tf):
    """With fewer files than workers each worker reads every n-th record of the file; the
    error names the record's place in the file, also in a later block of the shard."""
    path = str(tmp_path / "data.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(12):  # record 9 has no b; worker 1 of 2 reads 1, 3, 5, 7 | 9, 11
            feats = {"a": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
            if i != 9:
                feats["b"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[10 * i]))
            w.write(tf.train.Example(features=tf.train.Features(feature=feats))
                    .SerializeToString())
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=rf"{path}.*record 9 has no required feature b "):
        _all(tfspark.make_dataset([path], 4, spec=_spec(None), shuffle_buffer=0, shard=(2, 1),
                                  deterministic=True).as_numpy_iterator())
