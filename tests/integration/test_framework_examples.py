"""examples/{jax_logistic,torch_logistic,grain_jax,keras_logistic}.py run as a user runs them
(subprocesses, on the sample table as `tfspark export` writes it, smaller): the same convex
model trained in JAX, PyTorch, Grain + JAX and Keras 3 on each backend reaches the same
validation AUC within 0.01. JAX, PyTorch and Grain run without importing TensorFlow."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tfspark
from tfspark.spark.sample import sample_dataframe

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # trains in four processes
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# Run, then check TensorFlow was never imported (it is installed here: an import would show).
NO_TF = """
import runpy, sys
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
assert "tensorflow" not in sys.modules, "TensorFlow was imported"
"""
RUNS = [  # (example, KERAS_BACKEND, modules it needs, must not import TensorFlow)
    ("jax_logistic.py", None, ["jax"], True),
    ("torch_logistic.py", None, ["torch"], True),
    ("grain_jax.py", None, ["grain", "jax"], True),
    # Keras imports TensorFlow itself when it is installed (test_string_ids runs Keras on JAX
    # and PyTorch with TensorFlow unimportable)
    ("keras_logistic.py", "jax", ["keras", "jax"], False),
    ("keras_logistic.py", "torch", ["keras", "torch"], False),
    ("keras_logistic.py", "tensorflow", ["keras", "tensorflow"], False),
]


@pytest.fixture(scope="module")
def sample(spark, tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("examples") / "sample_tfrecords")
    tfspark.write_tfrecords(sample_dataframe(spark, rows=20_000), out, label_cols=["label"],
                            split={"train": 0.8, "validation": 0.2}, split_key="id",
                            rows_per_record=256)
    return out


def run(example: str, backend: str | None, no_tf: bool, path: str) -> float:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(EXAMPLES)]))
    if backend is not None:
        env["KERAS_BACKEND"] = backend
    cmd = [sys.executable, "-c", NO_TF] if no_tf else [sys.executable]
    done = subprocess.run([*cmd, str(EXAMPLES / example), path], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"{example} ({backend}): {done.stderr[-3000:]}"
    m = re.search(r"validation AUC (0\.\d+)$", done.stdout, re.M)
    assert m, done.stdout[-2000:]
    return float(m.group(1))


def test_every_framework_reaches_the_same_auc(sample):
    aucs = {}
    for example, backend, needs, no_tf in RUNS:
        if all(__import__("importlib").util.find_spec(m) for m in needs):
            aucs[f"{example} {backend or ''}".strip()] = run(example, backend, no_tf, sample)
    assert len(aucs) >= 2, f"fewer than two frameworks installed: {aucs}"
    assert min(aucs.values()) > 0.75, aucs  # the label follows income, age and country
    assert max(aucs.values()) - min(aucs.values()) <= 0.01, aucs
