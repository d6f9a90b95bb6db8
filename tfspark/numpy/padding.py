"""read_batches(..., ragged="padded"): variable-length features as a fixed-width array and a
mask, the form JAX (one shape, one compile) and Keras's masking layers take on every backend.

A feature `name` becomes two columns: `name`, its values [batch, length] with the rest of each
row filled (0, or b"" for strings), and `name_mask`, bool [batch, length], True where a value
is. The length is pad_to's for the feature, else the longest row the statistics of the data
set saw (so every batch has the same shape); longer rows are cut (as keras.utils.pad_sequences
with truncating="post"). Everything is NumPy on whole columns: no Python per row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tfspark.errors import OptionError
from tfspark.numpy.columns import Ragged
from tfspark.spec import FeatureSpec
from tfspark.store import manifest as mf

MASK = "_mask"


def pad_lengths(spec: FeatureSpec, labels: tuple[str, ...], manifest: mf.Manifest | None,
                strings: str, pad_to: int | Mapping[str, int] | None) -> dict[str, int]:
    """{feature: width} of the variable-length features read (labels aside); OptionError
    names a feature that cannot be padded or has no width, and what to do."""
    varlen = [f for f in spec.features if f.kind in ("varlen", "ragged") and f.name not in labels]
    names = {f.name for f in spec.features}
    given = pad_to if isinstance(pad_to, Mapping) else {}
    unknown = sorted(set(given) - {f.name for f in varlen})
    if unknown:
        raise OptionError(f"pad_to names {unknown}, which are not variable-length features read "
                          f"here ({sorted(f.name for f in varlen)})")
    stats = (manifest.feature_stats() if manifest is not None else None) or {}
    out = {}
    for f in varlen:
        if f.kind == "ragged" or (f.dtype == "string" and strings == "bytes"):
            raise OptionError(f"ragged='padded' pads one level: {f.name!r} has two (a 2-D "
                              f"ragged feature, or strings='bytes'); leave it out with "
                              f"columns=[...] or read it with ragged='ragged'")
        if f.name + MASK in names:
            raise OptionError(f"ragged='padded' names {f.name!r}'s mask {f.name + MASK!r}, which "
                              f"is a feature already; rename one of them")
        width = given.get(f.name, pad_to if isinstance(pad_to, int) else None)
        if width is None:
            width = ((stats.get(f.name) or {}).get("length") or {}).get("max")
        if not isinstance(width, int) or isinstance(width, bool) or width < 1:
            raise OptionError(f"ragged='padded' needs a width for {f.name!r}: the data set's "
                              f"statistics give none, so pass pad_to={{{f.name!r}: n}} (or "
                              f"pad_to=n for all)" if width is None else
                              f"pad_to for {f.name!r} must be a positive int, got {width!r}")
        out[f.name] = width
    return out


def pad(column: Ragged, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(values [rows, width] with the rest filled, mask [rows, width]) of a 1-level Ragged."""
    splits = np.asarray(column.row_splits, dtype=np.int64)
    values = np.asarray(column.values)
    rows = len(splits) - 1
    lengths = np.diff(splits)
    mask = np.arange(width) < lengths[:, None]
    fill = b"" if values.dtype == object else 0
    out = np.full((rows, width), fill, dtype=values.dtype)
    row = np.repeat(np.arange(rows), lengths)
    col = np.arange(len(values)) - np.repeat(splits[:-1], lengths)
    keep = col < width
    out[row[keep], col[keep]] = values[:splits[-1]][keep]
    return out, mask


def pad_batch(batch: dict[str, Any], widths: Mapping[str, int]) -> dict[str, Any]:
    """The batch with each padded feature as its values and its mask, in place of the Ragged."""
    for name, width in widths.items():
        column = batch.get(name)
        if isinstance(column, Ragged):
            batch[name], batch[name + MASK] = pad(column, width)
    return batch
