"""Framed records -> NumPy columns (numpy.columns), for the row and the block layout, with what
make_dataset gives: fixed features dense with the spec's default where a row is null,
variable-length ones ragged (empty where null).

The compiled kernels of wire/ (which release the GIL) index the records and fill preallocated
arrays; numeric columns never pass through Arrow. Strings become object arrays of bytes
(strings="object": a categorical column's equal values share one object, found by a compiled
hash pass; otherwise Arrow makes one per value, under the GIL), or with strings="bytes" a Ragged of
their uint8 bytes one level below the feature's own shape (no Python object per value), or
with strings="ids" int64 ids of a vocabulary (store.vocabulary: 0 out of vocabulary),
looked up by Arrow's hash kernel over the bytes (no Python object per value either).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfspark.arrow.decode import Decoder, RecordIndex
from tfspark.arrow.decode_block import BlockPlace, block_lists, check_counts, list_feature
from tfspark.arrow.encode_block import gather_bytes
from tfspark.arrow.hashing import distinct_strings
from tfspark.numpy.columns import Ragged, Table
from tfspark.spec import layout
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.wire.protobuf import TOO_MANY

_DTYPES = {"int64": np.int64, "float32": np.float32, "string": object}


class NumpyDecoder:
    """Decodes chunks of framed records of `spec` (rows_per_record > 1: block records);
    strings: "object", "bytes" or "ids" (see the module docstring), the latter with
    `vocabularies` {string feature: its values as bytes}."""

    def __init__(self, spec: FeatureSpec, rows_per_record: int = 1, strings: str = "object",
                 vocabularies: dict[str, list[bytes]] | None = None):
        self.spec, self.block, self.strings = spec, rows_per_record, strings
        self.ids = {name: pa.array(values, pa.large_binary())
                    for name, values in (vocabularies or {}).items()}
        self.strings_of = {f.name: Lookup(self.ids[f.name]) if strings == "ids" else strings
                           for f in spec.features if f.dtype == "string"}
        if rows_per_record == 1:
            self._decoder = Decoder(spec)
        else:  # the nulls keys are not read: null rows hold defaults already
            self._decoder = Decoder(block_lists(spec, nulls=False))

    def decode(self, buf: np.ndarray, offsets: np.ndarray, *, path: str,
               offset: int = 0) -> tuple[Table, np.ndarray]:
        """(columns of every row, rows per record) of the framed records between offsets."""
        ctx = self._decoder.index(buf, offsets, framed=True, path=path, offset=offset)
        if self.block == 1:
            out: Table = {}
            k = j = 0
            for f in self.spec.features:
                if f.kind == "sequence":  # a SequenceExample's feature list j
                    _, row_steps, rows, values = ctx.steps(f, j)
                    out[f.name] = Ragged(Ragged(_leaf(f, values, self.form(f)), rows),
                                         row_steps)
                    j += 1
                    continue
                out[f.name] = _row_column(ctx, f, k, self.form(f))
                k += len(f.keys)
            return out, np.ones(ctx.n, np.int64)
        return _blocks(ctx, self.spec, self.form)

    def form(self, f: Feature) -> Any:
        """How feature f's strings come: "object", "bytes", or its Lookup (strings="ids")."""
        return self.strings_of.get(f.name, "object")


class Lookup:
    """strings="ids" for one feature: each string's id in `vocabulary` (a pyarrow array of
    bytes), k + 1 for vocabulary[k] and 0 for any other string."""

    def __init__(self, vocabulary: pa.Array):
        self.vocabulary = vocabulary

    def ids(self, values: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """int64 ids of strings given as (bytes, offsets)."""
        found = pc.index_in(_binary(values), value_set=self.vocabulary)
        return pc.fill_null(found, -1).to_numpy().astype(np.int64) + 1

    def id_of(self, value: bytes) -> int:
        """The id of one string."""
        return int(self.ids((np.frombuffer(value, np.uint8), np.array([0, len(value)])))[0])


def _default(f: Feature) -> Any:
    if f.default is None:
        return b"" if f.dtype == "string" else 0
    return f.default.encode() if f.dtype == "string" else f.default


def _binary(values: tuple[np.ndarray, np.ndarray]) -> pa.Array:
    """Strings given as (bytes, offsets) as an Arrow array over the same memory."""
    blob, offs = values
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offs) - 1,
        [None, pa.py_buffer(np.ascontiguousarray(offs, np.int64)),
         pa.py_buffer(np.ascontiguousarray(blob))])


def _strings(values: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """An object array of bytes, one per string. Equal strings share one object where at most
    one in 8 is distinct and they are short (a categorical column): one object per distinct
    value, found by a compiled hash pass that releases the GIL, then a NumPy take, as pandas'
    conversion from Arrow deduplicates. Otherwise one object per string, made by Arrow in C++."""
    blob, offs = values
    n = len(offs) - 1
    if n >= _DISTINCT_MIN and blob.size <= _DISTINCT_BYTES * n:
        codes, firsts, m = distinct_strings(blob, offs, n // 8)
        if m >= 0:
            ones = _binary(values).take(pa.array(firsts[:m])).to_numpy(zero_copy_only=False)
            return ones.take(codes)
    return _binary(values).to_numpy(zero_copy_only=False)


_DISTINCT_MIN = 64  # strings below which one object each costs less than finding equal ones
_DISTINCT_BYTES = 32  # mean length past which strings are text, seldom repeated: not looked for


def _leaf(f: Feature, values: Any, strings: Any) -> Any:
    if f.dtype != "string":
        return values
    if isinstance(strings, Lookup):
        return strings.ids(values)
    return Ragged(*values) if strings == "bytes" else _strings(values)


def _fixed_bytes(present: np.ndarray, width: int, values: tuple[np.ndarray, np.ndarray],
                 default: bytes, shaped: bool) -> Ragged:
    """Fixed string features as bytes: `width` strings per row, the default for absent rows."""
    blob, offs = values
    n = len(present)
    if present.all():
        elements = Ragged(blob, offs)
    else:
        grid = np.full((n, width), -1, np.int64)
        grid[present] = np.arange(int(present.sum()) * width).reshape(-1, width)
        elements = Ragged(*gather_bytes(blob, offs, grid.ravel(), default))
    return Ragged(elements, np.arange(n + 1, dtype=np.int64) * width) if shaped else elements


def _row_column(ctx: RecordIndex, f: Feature, k: int, strings: Any) -> Any:
    n = ctx.n
    if f.kind == "fixed" and not f.shape and f.dtype != "string":
        out, valid = ctx.scalar(f)
        if not valid.all():
            _check_required(ctx, f, valid)
            out[~valid] = _default(f)
        return out
    if f.kind == "ragged":
        counts, rows, values = ctx.values(f, f.keys[0], k, f.dtype)
        lcounts, lrows, lengths = ctx.values(f, f.keys[1], k + 1, "int64")
        inner = np.zeros(lengths.size + 1, np.int64)
        np.cumsum(lengths, out=inner[1:])
        if (inner[lrows[1:]] - inner[lrows[:-1]] != np.diff(rows)).any() or (lengths < 0).any():
            rec = int(np.argmax(inner[lrows[1:]] - inner[lrows[:-1]] != np.diff(rows)))
            raise ctx.error(rec, f"ragged feature {f.name!r}: row lengths do not add up to "
                                 f"its values")
        return Ragged(Ragged(_leaf(f, values, strings), inner), lrows)
    counts, rows, values = ctx.values(f, f.name, k, f.dtype)
    if f.kind == "varlen":
        return Ragged(_leaf(f, values, strings), rows)
    width = f.shape[0] if f.shape else 1
    # A scalar with an empty list reads as absent (as the other readers take it).
    present = counts >= 0 if f.shape else counts > 0
    if not present.all():
        _check_required(ctx, f, present)
    bad = present & (counts != width)
    if bad.any():
        rec = int(np.argmax(bad))
        if not f.shape:
            ctx.check(TOO_MANY, rec, int(counts[rec]), f, f.name, f.dtype)
        raise ctx.error(rec, f"feature {f.name!r} has {int(counts[rec])} values but the spec "
                             f"fixes its shape to {list(f.shape)}", schema=True)
    if f.dtype == "string" and strings == "bytes":
        return _fixed_bytes(present, width, values, _default(f), bool(f.shape))
    if present.all():  # every row has its values: they are the column (no copy)
        leaf = _leaf(f, values, strings)
        return leaf.reshape(n, width) if f.shape else leaf
    if isinstance(strings, Lookup):
        out = np.empty((n, width), np.int64)
        out[~present] = strings.id_of(_default(f))
    else:
        out = np.empty((n, width), _DTYPES[f.dtype])
        out[~present] = _default(f)
    if width:  # shape [0]: nothing to fill
        out[present] = _leaf(f, values, strings).reshape(-1, width)
    return out if f.shape else out[:, 0]


def _check_required(ctx: RecordIndex, f: Feature, present: np.ndarray) -> None:
    """A record without a required feature is an error (as tf.io.parse_example makes it),
    never a row of invented defaults."""
    if f.required:
        rec = int(np.argmin(present))
        raise ctx.error(rec, f"required feature {f.name!r} is missing (the spec has it not "
                             f"nullable and without a default); give the spec a default for "
                             f"it, or read without it", schema=True)


def _blocks(ctx: RecordIndex, spec: FeatureSpec, form: Any) -> tuple[Table, np.ndarray]:
    rows_f = list_feature(layout.ROWS_KEY, "int64")
    counts, _, sizes = ctx.values(rows_f, layout.ROWS_KEY, 0, "int64")
    where = BlockPlace(ctx.path, ctx.offset, ctx.offsets)
    if (counts != 1).any() or (sizes < 0).any():
        rec = int(np.argmax(counts != 1))
        raise where.error(rec, f"no valid {layout.ROWS_KEY!r} count: not a block record "
                               f"(written with rows_per_record > 1)")
    out: Table = {}
    k = 1
    for f in spec.features:
        keys = layout.value_keys(f)
        vcounts, _, values = ctx.values(f, keys[0], k, f.dtype)
        leaf = _leaf(f, values, form(f))
        if f.kind == "fixed":
            width = f.shape[0] if f.shape else 1
            check_counts(np.maximum(vcounts, 0), sizes * width, where, f, "values")
            rows = int(sizes.sum())
            if isinstance(leaf, Ragged):  # strings as bytes: one Ragged level per string
                out[f.name] = Ragged(leaf, np.arange(rows + 1, dtype=np.int64) * width) \
                    if f.shape else leaf
            else:
                out[f.name] = leaf.reshape(rows, *f.shape)
        else:
            lcounts, _, lengths = ctx.values(f, keys[1], k + 1, "int64")
            check_counts(np.maximum(lcounts, 0), sizes, where, f, "row lengths")
            splits = np.zeros(lengths.size + 1, np.int64)
            np.cumsum(lengths, out=splits[1:])
            if f.kind == "varlen":
                check_counts(np.maximum(vcounts, 0), _per_block(splits, sizes), where, f,
                             "values")
                out[f.name] = Ragged(leaf, splits)
            else:
                icounts, _, inner = ctx.values(f, keys[2], k + 2, "int64")
                check_counts(np.maximum(icounts, 0), _per_block(splits, sizes), where, f,
                             "inner lengths")
                inner_splits = np.zeros(inner.size + 1, np.int64)
                np.cumsum(inner, out=inner_splits[1:])
                check_counts(np.maximum(vcounts, 0), _per_block(inner_splits[splits], sizes),
                             where, f, "values")
                out[f.name] = Ragged(Ragged(leaf, inner_splits), splits)
        k += len(keys)
    return out, sizes


def _per_block(splits: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Elements per block, from per-row splits and rows per block."""
    ends = np.cumsum(sizes)
    return splits[ends] - splits[ends - sizes]
