"""Keras 3 preprocessing layers built from the statistics write_tfrecords stores in the manifest
(spark.stats): no adapt() pass over the data.

    numbers      keras.layers.Normalization(mean=, variance=)
    strings      keras.layers.StringLookup(vocabulary=top values, most frequent first), or
                 with strings="ids" tfspark.keras.VocabularyIds (the reader looked them up)
    integer ids  keras.layers.IntegerLookup(vocabulary=...)       (the names in `categorical`)
    bucketized   keras.layers.Discretization(bin_boundaries=deciles) (the names in `bucketize`)
  and for array features (variable-length, 2-D ragged, SequenceExample feature lists), from
  the statistics of their elements, pooled to one vector per row:
    string / integer arrays   a lookup with output_mode="multi_hot" (arrays="multi_hot"), or
                              the lookup's ids (arrays="ids") for tfspark.keras.PooledEmbedding
    number arrays             tfspark.keras.PooledMean(mean=, variance=): mean of the normalized
                              values and log1p of their count; fixed [n] arrays Normalization

Plain layers rather than a keras.utils.FeatureSpace: FeatureSpace wants to adapt() itself on a
dataset and builds its own concatenated output, while these layers slot into any model and work
on every Keras backend (the NumPy reader's batches included).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable
from typing import Any

from tfspark.errors import SchemaError, scrubbed
from tfspark.spec.kinds import float_of_json
from tfspark.spec.model import Feature
from tfspark.store import manifest as mf
from tfspark.store.partitions import read_data_set_manifest
from tfspark.store.stats import rules
from tfspark.store.vocabulary import vocabulary


@scrubbed
def keras_preprocessing(path_or_manifest: str | os.PathLike | mf.Manifest | dict, *,
                        split: str | None = None,
                        categorical: Iterable[str] = (), bucketize: Iterable[str] = (),
                        max_tokens: int | None = None, skip: Iterable[str] = (),
                        arrays: str = "multi_hot", impute: bool = True,
                        filesystem: Any = None, strings: str = "object") -> dict[str, Any]:
    """{feature name: Keras layer} for the features of a data set, from its stored statistics.

    Normalization for numbers, StringLookup for strings, IntegerLookup for the integer
    features named in `categorical`, Discretization (deciles) for those in `bucketize`; array
    features pooled (ragged input needs the TensorFlow backend). Labels and `skip` names are
    left out, and so are binary and date/timestamp arrays and ml Vectors.

    The layers fit what the readers give the model: Normalization uses the statistics of the
    values with each null as the spec's default (the same as adapt() on the parsed rows),
    lookups count that default as often as there were nulls; deciles are of the present
    values. Every layer is built from finite statistics: NaN and infinities are counted apart.
    A feature whose statistics give no usable layer (no finite value, no value at all) is left
    out with a warning naming it.

    Missing numbers: a number feature the model can see as NaN or infinite (such values in
    the data, or nulls written with defaults={"x": float("nan")}) gets, with impute=True,
    tfspark.keras.MeanImputation: its normalized value, the mean where missing, and an
    is-missing input ([batch, 2]: impute-and-indicate). To impute a nullable column's nulls
    that way, write it with a NaN default; with its type's default (0) the model cannot tell a
    null from a real 0.

    Args:
        path_or_manifest: a data set's directory or URI, or its Manifest.
        split: the statistics of that split (default: all rows; use the training split's to
            avoid looking at validation data).
        categorical: integer features that get an IntegerLookup.
        bucketize: number features that get a Discretization by deciles.
        max_tokens: the most frequent values kept by lookups (at least 1).
        skip: features left out.
        arrays: string and integer arrays as "multi_hot" (a lookup with that output mode) or
            "ids" (the lookup's ids, to pool with tfspark.keras.PooledEmbedding).
        impute: number features that can be NaN get MeanImputation (False: a Normalization,
            through which NaN stays NaN, with a warning).
        filesystem: a pyarrow or fsspec filesystem. Default: from the path.
        strings: "ids": string features arrive as ids (read_batches(strings="ids",
            vocabulary= the same split as here)) and get tfspark.keras.VocabularyIds (ids
            past max_tokens become 0, out of vocabulary) instead of a StringLookup, which
            needs TensorFlow; so do arrays of strings (the ids of each element, to pool with
            tfspark.keras.PooledEmbedding). Every layer but those of integer arrays then runs
            on the JAX, PyTorch and TensorFlow backends.

    Returns:
        {feature name: Keras layer}, in spec order.

    Raises:
        SchemaError: the data set has no statistics (written with stats=False or through the
            data source), or names that are not its features.
        OptionError: a split it lacks.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> table = pa.table({"x": [1.0, 2.0, 3.0], "city": ["a", "b", "a"], "y": [0, 1, 0]})
        >>> _ = tfspark.write_dataset(table, "ds", label_cols="y")
        >>> layers = tfspark.keras_preprocessing("ds", strings="ids")
        >>> {name: type(layer).__name__ for name, layer in layers.items()}
        {'city': 'VocabularyIds', 'x': 'Normalization'}
    """
    m = path_or_manifest if isinstance(path_or_manifest, mf.Manifest) else \
        mf.Manifest.from_dict(path_or_manifest) if isinstance(path_or_manifest, dict) else \
        read_data_set_manifest(path_or_manifest, filesystem)
    if m.spec is None:
        raise SchemaError("the data set holds raw records (no spec): nothing to preprocess")
    spec = m.spec
    m.check_split(split or None, "the data set")
    per = m.feature_stats(split)
    if not per:
        raise SchemaError("the data set has no feature statistics" + (
            f" for split {split!r} (splits with statistics: {m.stats_splits()})" if split
            else "") + ": write it with tfspark.write_tfrecords(..., stats=True) (the default)")
    if m.stats.get("features_scope") == "last write":
        warnings.warn("the data set's statistics cover only the rows of its last append; "
                      "overwrite it to compute them over all rows", stacklevel=2)
    if arrays not in ("multi_hot", "ids"):
        raise SchemaError(f"arrays={arrays!r}: use 'multi_hot' (pooled lookups) or 'ids' (ids "
                          f"for tfspark.keras.PooledEmbedding)")
    if strings not in ("object", "ids"):
        raise SchemaError(f"strings={strings!r}: use 'object' (StringLookup layers) or 'ids' "
                          f"(for read_batches(strings='ids'))")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise SchemaError(f"max_tokens={max_tokens!r}: a lookup keeps at least 1 value; give a "
                          f"positive int, or None for all the top values")
    categorical, bucketize, skip = set(categorical), set(bucketize), set(skip)
    spec.check_names(sorted(categorical | bucketize | skip), "categorical/bucketize/skip")
    layers: dict[str, Any] = {}
    left_out: dict[str, str] = {}
    for f in spec.features:
        s = per.get(f.name)
        if f.label or f.name in skip or s is None:
            continue
        made = _layer(f, s, bucketize=f.name in bucketize, categorical=f.name in categorical,
                      max_tokens=max_tokens, arrays=arrays, impute=impute, strings=strings)
        if isinstance(made, str):
            left_out[f.name] = made
        elif made is not None:
            layers[f.name] = made
    if left_out:
        warnings.warn("keras_preprocessing left out " + "; ".join(
            f"{name!r} ({why})" for name, why in left_out.items())
            + ": skip them (skip=[...]) or fix their values", stacklevel=2)
    return layers


def _layer(f: Feature, s: dict[str, Any], *, bucketize: bool, categorical: bool,
           max_tokens: int | None, arrays: str, impute: bool, strings: str = "object") -> Any:
    """The layer for one feature, None when its kind gets none, or why it cannot be built."""
    import keras

    from tfspark.keras.layers import MeanImputation, VocabularyIds

    name = f"{f.name}_preprocessing"
    if f.kind != "fixed" or f.shape:
        return array_layer(f, s, max_tokens, arrays, name, strings)
    if bucketize:
        bounds = sorted({v for v in map(float_of_json, s.get("quantiles", {}).get("values", []))
                         if math.isfinite(v)})
        if not bounds:
            return "no finite values to take deciles of"
        return keras.layers.Discretization(bin_boundaries=bounds, name=name)
    if f.dtype == "string" or categorical:
        if not s.get("top"):
            return _no_vocabulary(s)
        if f.dtype == "string" and strings == "ids":
            return VocabularyIds(vocabulary(f, s, max_tokens), name=name)
        return lookup(f, vocabulary(f, s, max_tokens), "int", name)
    if "count" not in s:  # not a number (binary strings, ...)
        return None
    moments = normalization(s)
    if moments is None:
        return "no finite values to normalize with"
    missing = _nonfinite_rows(f, s)
    if missing and impute:
        return MeanImputation(mean=moments[0], variance=moments[1], name=name)
    if missing:
        warnings.warn(f"feature {f.name!r}: {missing} rows are NaN or infinite to the model and "
                      f"stay so through its Normalization; impute=True replaces them with the "
                      f"mean and adds an is-missing input", stacklevel=3)
    # axis=None: one mean and variance, so the layer takes keras_inputs' scalar Input (None,)
    # as it is (the default axis=-1 would be the batch axis there, which Keras refuses)
    return keras.layers.Normalization(mean=moments[0], variance=moments[1], axis=None, name=name)


def _nonfinite_rows(f: Feature, s: dict[str, Any]) -> int:
    """Rows the readers give as NaN or infinite: such values, and nulls whose default is."""
    n = sum(s.get(k, 0) for k in ("nan", "pos_inf", "neg_inf"))
    if f.default is not None and not math.isfinite(float(f.default)):
        n += s.get("nulls", 0)
    return n


def _no_vocabulary(s: dict[str, Any]) -> str:
    """Why a string or integer feature's statistics have no top values."""
    if s.get("rows", 0) == s.get("nulls", 0):
        return f"no values to build a vocabulary from: all {s.get('rows', 0)} rows are null"
    if s.get("max_chars", 0) > 256:
        return "values of more than 256 characters: text, not a vocabulary"
    distinct = s.get("distinct_approx", 0)
    if rules.id_like(distinct, s.get("rows", 0) - s.get("nulls", 0)):
        return (f"about {distinct} distinct values in {s.get('rows', 0)} rows: an id or free "
                f"text, not a category")
    return "more distinct values than the statistics' top_k: a number or an id, not a category"


def normalization(s: dict[str, Any]) -> tuple[float, float] | None:
    """(mean, variance) that normalize a feature as the readers give it (nulls as the spec's
    default: the `filled` statistics where there were nulls); None without finite ones."""
    src = s.get("filled") or s
    if src.get("mean") is None or src.get("variance") is None:
        return None
    mean, variance = float_of_json(src["mean"]), float_of_json(src["variance"])
    if not (math.isfinite(mean) and math.isfinite(variance)):
        return None
    return mean, variance


def lookup(f: Feature, vocabulary: list[Any], output_mode: str, name: str) -> Any:
    """StringLookup (string features) or IntegerLookup (the others) of `vocabulary`."""
    import keras

    if f.dtype == "string":
        return keras.layers.StringLookup(vocabulary=[str(v) for v in vocabulary],
                                         output_mode=output_mode, name=name)
    return keras.layers.IntegerLookup(vocabulary=[int(v) for v in vocabulary],
                                      output_mode=output_mode, name=name)


def array_layer(f: Feature, s: dict[str, Any], max_tokens: int | None, arrays: str,
                name: str, strings: str = "object") -> Any:
    """The pooling layer of an array feature (module docstring), None when its kind gets
    none, or why its statistics give none; arrays: "multi_hot" or "ids", what lookups give.
    strings="ids": an array of strings arrives as ids (read_batches(strings="ids")), and gets
    VocabularyIds: the ids per element, for tfspark.keras.PooledEmbedding to pool (a lookup
    would need TensorFlow)."""
    import keras

    from tfspark.keras.layers import PooledMean, VocabularyIds

    if "top" in s:
        if not s["top"]:
            return "no elements to build a vocabulary from"
        if f.dtype == "string" and strings == "ids":
            return VocabularyIds(vocabulary(f, s, max_tokens), name=name)
        return lookup(f, vocabulary(f, s, max_tokens),
                      "multi_hot" if arrays == "multi_hot" else "int", name)
    e = s.get("elements")
    if not e:
        return None
    moments = normalization(e)
    if moments is None:
        return "no finite elements to normalize with"
    if f.kind == "fixed":  # [n]: every row has n values, normalized one by one
        return keras.layers.Normalization(mean=moments[0], variance=moments[1], name=name)
    return PooledMean(mean=moments[0], variance=moments[1], name=name)
