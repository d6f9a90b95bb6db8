"""keras_inputs(): one keras.Input per spec feature, matching what the readers yield.

Shapes leave out the batch dimension: fixed scalar -> (), fixed [n] -> (n,), VarLen ->
(None,) ragged, 2-D ragged and SequenceExample feature lists -> (None, None) ragged. Strings
are string Inputs (make_dataset; read_batches' default) or int64 ones (read_batches'
strings="ids", for backends without strings). Keras 3 is imported inside the function: any
backend, no TensorFlow needed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tfspark.errors import SchemaError
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.store.manifest import read_manifest

_KERAS_DTYPES = {"int64": "int64", "float32": "float32", "string": "string"}
# Keras refuses "/" in layer names, and TensorFlow name scopes dislike most punctuation, so
# anything outside these characters becomes "_" in the Input's name (the dict key is unchanged).
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def keras_inputs(spec: FeatureSpec | str | os.PathLike, *, include_labels: bool = False,
                 names: list[str] | None = None, strings: str = "object",
                 padded: Mapping[str, int] | None = None,
                 stacks: Sequence[Any] = ()) -> dict[str, Any]:
    """{feature name: keras.Input} for the features of a spec, in spec order.

    The dict is keyed by the feature name, which is what the readers' feature dicts use, so
    `keras.Model(inputs=keras_inputs(spec), ...)` lines up with the data by key; each Input's
    own `name` is the feature name with characters Keras refuses replaced by "_" (made unique;
    Keras then warns that a key and its Input's name differ: the dict still lines up by key).

    Args:
        spec: a FeatureSpec, or the path of a data set (its manifest's spec).
        include_labels: the label features too.
        names: only these features (in this order).
        strings: "ids": string features as int64 Inputs, for read_batches(strings="ids").
        padded: {feature: width} of read_batches(ragged="padded") (its reader's pad_widths):
            each such feature is an Input of shape (width,) and its mask `name_mask` a bool
            one.
        stacks: read_batches(stack=...)'s reader.stacks: each stack is one Input (width,)
            named like it, in place of the features it holds (after the others).

    Returns:
        {feature name: keras.Input}.

    Raises:
        SchemaError: names that are not features of the spec.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"x": [1.0], "ys": [[1, 2]], "y": [0]}), "ds",
        ...                           label_cols="y")
        >>> {name: tuple(i.shape) for name, i in tfspark.keras_inputs("ds").items()}
        {'x': (None,), 'ys': (None, 2)}
    """
    import keras

    if isinstance(spec, (str, os.PathLike)):
        spec = read_manifest(os.fspath(spec)).spec or FeatureSpec(())
    if not isinstance(spec, FeatureSpec):
        raise SchemaError(f"keras_inputs needs a tfspark.FeatureSpec or a data set's path, got "
                          f"{type(spec).__name__}")
    if strings not in ("object", "ids"):
        raise SchemaError(f"strings={strings!r}: use 'object' (string Inputs) or 'ids' (int64 "
                          f"Inputs for read_batches(strings='ids'))")
    if names is None:
        features = [f for f in spec.features if include_labels or not f.label]
    else:
        spec.check_names(names, "keras_inputs: names")
        features = [spec[n] for n in names]
    inside = {c for st in stacks for c in st.columns}
    _check_ragged([f for f in features if f.name not in inside and f.name not in (padded or {})],
                  keras.backend.backend())
    out: dict[str, Any] = {}
    used: set[str] = set()
    for f in (f for f in features if f.name not in inside):
        shape, ragged = input_shape(f)
        dtype = "int64" if f.dtype == "string" and strings == "ids" else _KERAS_DTYPES[f.dtype]
        if padded and f.name in padded:
            shape, ragged = (padded[f.name],), False
        out[f.name] = keras.Input(shape=shape, dtype=dtype, ragged=ragged,
                                  name=_unique(keras_name(f.name), used))
        if padded and f.name in padded:
            out[f.name + "_mask"] = keras.Input(shape=shape, dtype="bool", name=_unique(
                keras_name(f.name + "_mask"), used))
    for st in stacks:
        out[st.name] = keras.Input(shape=(st.width,), dtype=st.dtype.__name__,
                                   name=_unique(keras_name(st.name), used))
    return out


def _check_ragged(features: list[Feature], backend: str) -> None:
    """Only Keras on TensorFlow takes ragged Inputs: on the others, name the variable-length
    features (keras.Input's own error names neither the feature nor what to do)."""
    ragged = [f for f in features if input_shape(f)[1]]
    if not ragged or backend == "tensorflow":
        return
    two = [f.name for f in ragged if f.kind == "ragged"]
    raise SchemaError(f"keras_inputs: Keras on the {backend} backend takes no ragged Inputs, and "
                      f"{', '.join(repr(f.name) for f in ragged)} are variable-length: read them "
                      f"with read_batches(..., ragged='padded') and give that reader's "
                      f"pad_widths as padded=" +
                      (f" ({', '.join(map(repr, two))}: 2-D, which cannot be padded)"
                       if two else "") + ", or leave them out with names=[...]")


def input_shape(f: Feature) -> tuple[tuple[int | None, ...], bool]:
    """(shape without the batch dimension, ragged?) of a feature as make_dataset yields it."""
    if f.kind == "fixed":
        return tuple(f.shape), False
    if f.kind == "varlen":
        return (None,), True
    return (None, None), True


def keras_name(name: str) -> str:
    """`name` with the characters Keras refuses in layer names replaced by "_"."""
    safe = _NAME_UNSAFE.sub("_", name)
    return safe if safe and safe[0].isalnum() else f"f{safe}"


def _unique(name: str, used: set[str]) -> str:
    out, k = name, 1
    while out in used:
        k += 1
        out = f"{name}_{k}"
    used.add(out)
    return out
