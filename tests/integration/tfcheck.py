"""Read a tfspark output directory with TensorFlow only (the oracle) and compare to Spark rows."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from tfspark.spec import FeatureSpec


def read_with_tf(tf: Any, path: str, split: str | None = None) -> tuple[FeatureSpec, dict]:
    """Parse every file the manifest names with TFRecordDataset + parse_example.

    Returns the spec and {feature: list of per-row python values}.
    """
    root = os.path.join(path, split) if split else path
    with open(os.path.join(root, "_tfspark.json")) as f:
        manifest = json.load(f)
    spec = FeatureSpec.from_dict(manifest["spec"])
    files = [os.path.join(root, e["path"]) for e in manifest["files"]]
    comp = "GZIP" if manifest["compression"] == "gzip" else ""
    out: dict[str, list] = {name: [] for name in spec.names}
    if not files:
        return spec, out
    ds = tf.data.TFRecordDataset(files, compression_type=comp).batch(4096)
    parsing = spec.parsing_spec()
    for batch in ds:
        parsed = tf.io.parse_example(batch, parsing)
        for name, value in parsed.items():
            if isinstance(value, tf.sparse.SparseTensor):
                value = tf.RaggedTensor.from_sparse(value)
            out[name].extend(value.to_list() if hasattr(value, "to_list") else
                             value.numpy().tolist())
    return spec, out


def rows_by(values: dict, key: str) -> dict[Any, dict]:
    """{key value: {feature: value}} from read_with_tf's columns."""
    names = list(values)
    return {row[names.index(key)]: dict(zip(names, row)) for row in zip(*values.values())}


def f32(x: Any) -> Any:
    if x is None:
        return None
    if isinstance(x, list):
        return [f32(v) for v in x]
    return float(np.float32(x))
