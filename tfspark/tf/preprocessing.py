"""Keras 3 preprocessing layers built from the statistics write_tfrecords stores in the manifest
(tfspark/spark/stats.py): no adapt() pass over the data.

    numbers      keras.layers.Normalization(mean=, variance=)
    strings      keras.layers.StringLookup(vocabulary=top values, most frequent first)
    integer ids  keras.layers.IntegerLookup(vocabulary=...)       (the names in `categorical`)
    bucketized   keras.layers.Discretization(bin_boundaries=deciles) (the names in `bucketize`)

Plain layers rather than a keras.utils.FeatureSpace: FeatureSpace wants to adapt() itself on a
dataset and builds its own concatenated output, while these layers slot into any model and work
on every Keras backend (the NumPy reader's batches included).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from typing import Any

from tfspark import manifest as mf
from tfspark.errors import SchemaError
from tfspark.spec.kinds import FLOAT_WORDS
from tfspark.spec.model import FeatureSpec


def keras_preprocessing(path_or_manifest: str | os.PathLike | dict, *, split: str | None = None,
                        categorical: Iterable[str] = (), bucketize: Iterable[str] = (),
                        max_tokens: int | None = None,
                        skip: Iterable[str] = ()) -> dict[str, Any]:
    """{feature name: Keras layer} for the fixed scalar features of a data set, from its stored
    statistics: Normalization for numbers, StringLookup for strings, IntegerLookup for the
    integer features named in `categorical`, Discretization (deciles) for those in
    `bucketize`. Labels and `skip` names are left out; so are array features.

    split: the statistics of that split (default: all rows; use the training split's to
    avoid looking at validation data). max_tokens: the most frequent values kept by lookups.
    Raises SchemaError when the data set has no statistics (written with stats=False or
    through the data source) or names are not its features.
    """
    import keras

    m = path_or_manifest if isinstance(path_or_manifest, dict) else \
        mf.read_manifest(os.fspath(path_or_manifest))
    spec = FeatureSpec.from_dict(m["spec"])
    stats = m.get("stats") or {}
    per = (stats.get("splits") or {}).get(split) if split is not None else stats.get("features")
    if not per:
        have = sorted(stats.get("splits") or {})
        raise SchemaError("the data set has no feature statistics" + (
            f" for split {split!r} (splits with statistics: {have})" if split else "") +
            ": write it with tfspark.write_tfrecords(..., stats=True) (the default)")
    if stats.get("features_scope") == "last write":
        warnings.warn("the data set's statistics cover only the rows of its last append; "
                      "overwrite it to compute them over all rows", stacklevel=2)
    categorical, bucketize, skip = set(categorical), set(bucketize), set(skip)
    unknown = sorted((categorical | bucketize | skip) - set(spec.names))
    if unknown:
        raise SchemaError(f"{unknown} are not features of the data set; features are "
                          f"{spec.names}")
    layers: dict[str, Any] = {}
    for f in spec.features:
        s = per.get(f.name)
        if f.label or f.name in skip or s is None or f.kind != "fixed" or f.shape:
            continue
        name = f"{f.name}_preprocessing"
        if f.name in bucketize:
            bounds = sorted({_num(v) for v in s.get("quantiles", {}).get("values", [])})
            layers[f.name] = keras.layers.Discretization(bin_boundaries=bounds, name=name)
        elif f.dtype == "string":
            layers[f.name] = keras.layers.StringLookup(
                vocabulary=_vocabulary(s, max_tokens, str), name=name)
        elif f.name in categorical:
            layers[f.name] = keras.layers.IntegerLookup(
                vocabulary=_vocabulary(s, max_tokens, int), name=name)
        elif "mean" in s and s.get("count"):
            layers[f.name] = keras.layers.Normalization(
                mean=_num(s["mean"]), variance=_num(s["variance"]), name=name)
    return layers


def _num(x: Any) -> float:
    return float(FLOAT_WORDS.get(x, x)) if isinstance(x, str) else float(x)


def _vocabulary(s: dict[str, Any], max_tokens: int | None, kind: type) -> list[Any]:
    top = s.get("top") or []
    if max_tokens is not None:
        top = top[:max_tokens]
    return [kind(v) for v, _ in top]
