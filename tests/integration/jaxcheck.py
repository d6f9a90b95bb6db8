"""Processes where TensorFlow cannot be imported, as on a machine without it (Keras, finding
TensorFlow installed, would import it): their PYTHONPATH, and `tfspark train --backend jax`
run in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_train_config(path: Path, settings: Mapping[str, Any], extra: str = "") -> Path:
    """The train job's TOML config of these settings, then `extra` (a [store] table, say)."""
    path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()) + extra)
    return path


def path_without_tensorflow(tmp_path: Path) -> str:
    """A PYTHONPATH whose first entry holds a package `tensorflow` that fails to import."""
    absent = tmp_path / "no-tf" / "tensorflow"
    absent.mkdir(parents=True, exist_ok=True)
    (absent / "__init__.py").write_text("raise ImportError('TensorFlow is not installed')\n")
    return os.pathsep.join(filter(None, [str(absent.parent), os.environ.get("PYTHONPATH")]))


def train_on_jax_without_tensorflow(conf: Path, model_out: Path,
                                    tmp_path: Path) -> subprocess.CompletedProcess:
    """The train job of `conf` on JAX, saving to `model_out`; its exit status and output."""
    env = {**os.environ, "PYTHONPATH": path_without_tensorflow(tmp_path)}
    env.pop("KERAS_BACKEND", None)
    return subprocess.run([sys.executable, "-m", "tfspark.cli", "train", "--config", str(conf),
                           "--backend", "jax", "--model-out", str(model_out)],
                          env=env, capture_output=True, text=True, timeout=600)
