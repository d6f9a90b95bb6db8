"""make_dataset's planning (files, spec, splits, labels, errors) without TensorFlow or Spark."""

from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
import sys

import pytest
from pyspark.sql import types as T

from tfspark.errors import OptionError, SchemaError
from tfspark.spec import infer_spec
from tfspark.store import manifest as mf
from tfspark.store.fs import locate
from tfspark.store.read_plan import plan_read

try:  # tests/unit run without TensorFlow: the tests that need it installed skip
    HAS_TF = importlib.util.find_spec("tensorflow") is not None
except ValueError:  # blocked (sys.modules["tensorflow"] = None), as in the no-TF lane
    HAS_TF = False
needs_tf = pytest.mark.skipif(not HAS_TF, reason="TensorFlow is not installed")

SPEC = infer_spec(T.StructType([T.StructField("x", T.FloatType()),
                                T.StructField("y", T.LongType(), False)]), label_cols=["y"])


def _write(root, files, compression=None, record_type="Example", splits=True):
    """A data set on disk: files {rel path: (split, records)}; data files get dummy bytes
    (gzip'd ones are gzip streams, as their content is what readers go by)."""
    m = mf.Manifest(spec=SPEC if record_type == "Example" else None,
                    compression=compression, record_type=record_type)
    entries = []
    for rel, (split, records) in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(gzip.compress(b"x") if rel.endswith(".gz") else b"x")
        entries.append({"path": rel, "records": records, "bytes": 1,
                        "split": split if splits else None})
    mf.write_manifest(locate(str(root)), m.with_files([mf.FileEntry(**e) for e in entries], "w"))
    return root


@pytest.fixture
def ds_dir(tmp_path):
    return _write(tmp_path / "ds", {"train/part-0.tfrecord.gz": ("train", 5),
                                    "train/part-1.tfrecord.gz": ("train", 7),
                                    "test/part-2.tfrecord.gz": ("test", 3)}, "gzip")


@needs_tf
def test_import_does_not_load_tensorflow():
    code = "import tfspark.tf.dataset, tfspark.keras.inputs, tfspark.cli.train, sys; " \
           "print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False False"


@needs_tf
def test_read_side_does_not_load_pyspark():
    # What a GPU box without Spark imports: the files, spec, options, verify, tf.data side.
    code = ("import tfspark, tfspark.store.read_plan, tfspark.store.integrity, "
            "tfspark.store.options, "
            "tfspark.tf.dataset, tfspark.keras.inputs, tfspark.arrow.decode, tfspark.arrow.encode, "
            "tfspark.cli.inspect, tfspark.cli.config, sys; tfspark.verify; tfspark.FeatureSpec; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_split_plan(ds_dir):
    plan = plan_read(str(ds_dir), split="train")
    assert plan.files == (str(ds_dir / "train/part-0.tfrecord.gz"),
                          str(ds_dir / "train/part-1.tfrecord.gz"))
    assert plan.records == (5, 7) and plan.compression == "gzip" and plan.labels == ("y",)
    assert plan_read(str(ds_dir / "test")).files == (str(ds_dir / "test/part-2.tfrecord.gz"),)
    assert plan_read(str(ds_dir / "test"), split="test").records == (3,)


def test_split_errors(ds_dir):
    with pytest.raises(OptionError, match=r"holds the splits \['test', 'train'\]"):
        plan_read(str(ds_dir))
    with pytest.raises(mf.ManifestError, match="its splits are"):
        plan_read(str(ds_dir), split="validation")
    with pytest.raises(OptionError, match="split name"):
        plan_read(str(ds_dir), split="../x")


def test_labels(ds_dir):
    assert plan_read(str(ds_dir), split="test", label_cols="x").labels == ("x",)
    assert plan_read(str(ds_dir), split="test", label_cols=[]).labels == ()
    with pytest.raises(SchemaError, match=r"\['z'\]"):
        plan_read(str(ds_dir), split="test", label_cols=["y", "z"])


def test_missing_file_is_named(ds_dir):
    (ds_dir / "train/part-1.tfrecord.gz").unlink()
    with pytest.raises(FileNotFoundError, match="part-1.tfrecord.gz"):
        plan_read(str(ds_dir), split="train")


def test_a_store_lists_beside_the_manifest_read_and_looks_again_before_refusing(tmp_path):
    """On an object store (here the local disk behind a SubTreeFileSystem, which tfspark
    treats as one) the listing that checks the files starts beside the manifest read. A listing
    taken before a write committed new files is looked at again before a file is called
    missing; a file really gone is still named."""
    from concurrent.futures import Future

    import pyarrow.fs as pafs

    from tfspark.store.read_plan import _check_exist

    _write(tmp_path / "ds", {"part-0.tfrecord": (None, 5), "part-1.tfrecord": (None, 7)},
           splits=False)
    store = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    plan = plan_read("ds", filesystem=store)
    assert plan.records == (5, 7)
    root = locate("ds", store)
    assert not root.is_local
    files, rels = [root.child(r) for r in plan.rels], list(plan.rels)
    stale: Future[list[str]] = Future()
    stale.set_result(["_tfspark.json", "part-0.tfrecord"])  # before part-1 was committed
    _check_exist(files, root, rels, (root, stale))  # no error: part-1 is there now
    (tmp_path / "ds" / "part-1.tfrecord").unlink()
    with pytest.raises(FileNotFoundError, match="part-1.tfrecord"):
        plan_read("ds", filesystem=store)
    with pytest.raises(FileNotFoundError, match="part-1.tfrecord"):
        _check_exist(files, root, rels, (root, stale))


def test_missing_manifest(tmp_path):
    with pytest.raises(mf.ManifestError, match="no _tfspark.json in"):
        plan_read(str(tmp_path))


def test_bytearray_and_escaping_manifests(tmp_path):
    raw = _write(tmp_path / "raw", {"part-0.tfrecord": (None, 1)}, record_type="ByteArray",
                 splits=False)
    with pytest.raises(SchemaError, match="ByteArray"):
        plan_read(str(raw))
    bad = _write(tmp_path / "bad", {"part-0.tfrecord": (None, 1)}, splits=False)
    doc = json.loads((bad / mf.NAME).read_text())
    doc["files"][0]["path"] = "../outside.tfrecord"
    (bad / mf.NAME).write_text(json.dumps(doc))
    with pytest.raises(mf.ManifestError, match="outside"):
        plan_read(str(bad))


def test_explicit_files(ds_dir, tmp_path):
    files = [str(ds_dir / "train/part-0.tfrecord.gz")]
    plan = plan_read(files, spec=SPEC.to_json())
    assert plan.compression == "gzip" and plan.records is None and plan.labels == ("y",)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(SPEC.to_json())
    assert plan_read(files, spec=str(spec_file), compression="none").compression is None
    # A manifest as the spec brings its compression along.
    assert plan_read(files, spec=str(ds_dir / "train" / mf.NAME)).compression == "gzip"
    assert plan_read(files[0], spec=SPEC).files == tuple(files)  # one file as a str
    plain = tmp_path / "a.tfrecord"
    plain.write_bytes(b"")
    # Compression comes from each file's content: mixed files are fine, a name does not lie.
    mixed = plan_read(files + [str(plain)], spec=SPEC)
    assert mixed.file_compressions() == ("gzip", None) and mixed.compression is None
    renamed = tmp_path / "gzip_inside.tfrecord"
    renamed.write_bytes((ds_dir / "train/part-0.tfrecord.gz").read_bytes())
    assert plan_read([str(renamed)], spec=SPEC).compression == "gzip"
    with pytest.raises(OptionError, match="needs spec="):
        plan_read(files)
    with pytest.raises(FileNotFoundError, match="nope.tfrecord"):
        plan_read([str(tmp_path / "nope.tfrecord")], spec=SPEC)


@pytest.mark.parametrize("kwargs, match", [
    ({"batch_size": 0}, "batch_size"),
    ({"shuffle_buffer": -1}, "shuffle_buffer"),
    ({"epochs": 0}, "epochs"),
    ({"shard": (2, 2)}, "shard"),
    ({"num_parallel_reads": 0}, "num_parallel_reads"),
    ({"cache": 1}, "cache"),
])
@needs_tf
def test_bad_arguments_fail_before_tensorflow(ds_dir, kwargs, match):
    from tfspark.tf.dataset import make_dataset

    args = {"batch_size": 8, **kwargs}
    with pytest.raises(OptionError, match=match):
        make_dataset(str(ds_dir), split="train", **args)


def test_train_config_file_and_errors(tmp_path):
    from tfspark.cli.config import TrainConfig, load_train_config, packaged

    cfg = load_train_config(packaged("train.toml"), epochs=7)
    assert cfg.epochs == 7 and cfg.model_out.endswith(".keras") and cfg.exclude == ("id",)
    assert TrainConfig.from_mapping({"steps_per_epoch": "none"}).steps_per_epoch is None
    for bad, match in (({"epoch": 1}, "unknown key 'epoch'"),
                       ({"batch_size": 0}, "batch_size"),
                       ({"model_out": "m.h5"}, r"\.keras"),
                       ({"hidden_units": ["a"]}, "hidden_units"),
                       ({"checkpoint_every": 0, "backend": "jax", "workers": 2},
                        "checkpoint_every")):
        with pytest.raises(OptionError, match=match):
            TrainConfig.from_mapping(bad)
    # checkpoints are a run on Spark workers' (or a rerun resuming theirs): not one process's
    with pytest.raises(OptionError, match=r"checkpoint_every in config is for training on "
                       r"Spark workers \(workers > 1, or a rerun resuming their checkpoints\)"):
        TrainConfig.from_mapping({"checkpoint_every": 50}).check_in_process("config")
