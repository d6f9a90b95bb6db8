"""Arrow columns -> the canonical columns the Example kernels write (see wire.example_write):
one per Example key, with its row offsets, present rows and values. Shared by the row encoder
(arrow.encode, its SequenceExample part too), the block encoder (arrow.encode_block) and the
write tasks' statistics sketches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tfspark.arrow import values
from tfspark.arrow.values import ROW, BadRow, bytes_buffers, wrong_type
from tfspark.errors import EncodeError
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.wire import example_write
from tfspark.wire.protobuf import BYTES, FLOAT, INT

# Rows written per block: all columns of a block are written while it is still in cache.
BLOCK_ROWS = 4096


@dataclass
class Column:
    """One Example key's values in canonical form (see wire.example_write)."""

    key: str
    kind: int  # INT | FLOAT | BYTES (wire.protobuf)
    rows: np.ndarray  # int64, n+1 element offsets per row
    present: np.ndarray  # bool, n
    values: np.ndarray  # int64 | float32 | uint8 data (bytes)
    offsets: np.ndarray | None = None  # int64 element offsets into data (bytes only)
    scalar: bool = False  # one value per row (rows == arange): the kernels' fast path


def size_column(c: Column, sizes: np.ndarray, key: np.ndarray) -> None:
    """Add each row's entry bytes for column c to sizes."""
    if c.kind == INT:
        if c.scalar:
            example_write.size_int_scalars(sizes, key, c.present, c.values)
        else:
            example_write.size_ints(sizes, key, c.rows, c.present, c.values)
    elif c.kind == FLOAT:
        if c.scalar:
            example_write.size_float_scalars(sizes, key, c.present, c.values.view(np.uint8))
        else:
            example_write.size_floats(sizes, key, c.rows, c.present, c.values.view(np.uint8))
    elif c.scalar:
        example_write.size_bytes_scalars(sizes, key, c.present, c.offsets)
    else:
        example_write.size_bytes(sizes, key, c.rows, c.present, c.values, c.offsets)


def write_column(c: Column, out: np.ndarray, cursor: np.ndarray, lo: int, hi: int,
                 key: np.ndarray, wide: bool = False) -> None:
    """Write column c's entries of rows [lo, hi) at the rows' cursors; wide: by words, into
    framed records (see wire.example_write)."""
    if c.kind == INT:
        if c.scalar:
            example_write.write_int_scalars(out, cursor, lo, hi, key, c.present, c.values, wide)
        else:
            example_write.write_ints(out, cursor, lo, hi, key, c.rows, c.present, c.values,
                                     wide)
    elif c.kind == FLOAT:
        if c.scalar:
            example_write.write_float_scalars(out, cursor, lo, hi, key, c.present,
                                              c.values.view(np.uint8), wide)
        else:
            example_write.write_floats(out, cursor, lo, hi, key, c.rows, c.present,
                                       c.values.view(np.uint8), wide)
    elif c.scalar:
        example_write.write_bytes_scalars(out, cursor, lo, hi, key, c.present, c.values,
                                          c.offsets, wide)
    else:
        example_write.write_bytes(out, cursor, lo, hi, key, c.rows, c.present, c.values,
                                  c.offsets, wide)


def check_columns(batch: pa.RecordBatch, spec: FeatureSpec) -> None:
    """EncodeError unless the batch has exactly the spec's top-level columns, once each."""
    wanted = list(dict.fromkeys(f.path[0] for f in spec.features))
    have = batch.schema.names
    missing = [c for c in wanted if c not in have]
    extra = [c for c in have if c not in wanted]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing column(s) {missing}")
        if extra:
            parts.append(f"column(s) {extra} not in the spec")
        raise EncodeError(f"batch does not match the feature spec: {'; '.join(parts)}. Select "
                          f"exactly the spec's columns {wanted} or infer the spec from this "
                          f"schema")
    if len(set(have)) != len(have):
        raise EncodeError(f"batch has duplicate column names {have}; rename them")


def columns_of(f: Feature, arr: pa.Array, policy: str) -> list[Column]:
    """The canonical column(s) of feature f (two for a 2-D ragged one); `policy` for null
    elements inside arrays: "error" or "drop"."""
    n = len(arr)
    present = present_rows(f, arr)
    if f.kind == "fixed" and f.shape == (0,):
        # TF treats an empty default as "required": write null rows as (equal) empty lists.
        present = np.ones(n, dtype=bool)
    if f.encoding == "vector":
        rows, dense = vector_rows(f, arr, present)
        check_fixed(f, rows, present)
        return [Column(f.name, FLOAT, rows, present, values.to_float32(f, dense, rows))]
    if f.kind == "ragged":
        outer, inner = list_parts(f, arr, present, policy, what="a null array")
        owner = np.repeat(np.arange(n), np.diff(outer))
        inner_rows, leaf = list_parts(f, inner, present[owner], policy, row_of=owner)
        lengths = np.diff(inner_rows).astype(np.int64)
        values_key, lengths_key = f.keys
        return [leaf_column(f, values_key, inner_rows[outer], present, leaf),
                Column(lengths_key, INT, outer, present, lengths)]
    if f.kind == "varlen" or f.shape:
        rows, leaf = list_parts(f, arr, present, policy)
        check_fixed(f, rows, present)
        return [leaf_column(f, f.name, rows, present, leaf)]
    if is_list(arr.type):
        raise EncodeError(f"column {f.name!r} holds Arrow {arr.type} but the spec has a scalar "
                          f"({f.source_type}); re-infer the spec from this data")
    col = leaf_column(f, f.name, np.arange(n + 1, dtype=np.int64), present, arr)
    col.scalar = True
    return [col]


def present_rows(f: Feature, arr: pa.Array) -> np.ndarray:
    """Which rows hold a value; BadRow for a null in a column the spec has not nullable."""
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    present = arr.is_valid().to_numpy(zero_copy_only=False)
    if not f.nullable:
        raise BadRow(f"column {f.name!r} is not nullable in the spec but row {ROW} is null; "
                     f"fill the nulls (fillna/coalesce) or infer the spec from a nullable "
                     f"schema", int(np.argmin(present)))
    return present


def is_list(t: pa.DataType) -> bool:
    """Whether an Arrow type is a list (plain, large or fixed size)."""
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def list_parts(f: Feature, arr: pa.Array, present: np.ndarray, policy: str,
                what: str = "a null element",
                row_of: np.ndarray | None = None) -> tuple[np.ndarray, pa.Array]:
    """(n+1 element offsets from 0, elements) of a list column, nulls in elements handled.

    present: which lists count (elements of absent lists are never checked); row_of maps a
    list's index to the row named in errors, for the inner lists of a 2-D column.
    """
    if not is_list(arr.type):
        raise EncodeError(f"column {f.name!r} should be an array ({f.source_type}) but holds "
                          f"Arrow {arr.type}; re-infer the spec from this data")
    if pa.types.is_fixed_size_list(arr.type):
        arr = arr.cast(pa.list_(arr.type.value_type))
    rows = arr.offsets.to_numpy().astype(np.int64)
    child = arr.values.slice(rows[0], rows[-1] - rows[0])
    rows = rows - rows[0]
    if child.null_count:
        owner = np.repeat(np.arange(len(arr)), np.diff(rows))
        bad = child.is_null().to_numpy(zero_copy_only=False) & present[owner]
        if bad.any():
            if policy == "error":
                first = int(owner[np.argmax(bad)])
                row = int(row_of[first]) if row_of is not None else first
                raise BadRow(f"column {f.name!r} has {what} inside an array at row {ROW}; fill "
                             f"or filter it, or pass null_elements='drop' to leave such "
                             f"elements out", row)
            keep = ~bad
            kept = np.concatenate([[0], np.cumsum(keep)]).astype(np.int64)
            rows = kept[rows]
            child = child.filter(pa.array(keep))
    return rows, child


def check_fixed(f: Feature, rows: np.ndarray, present: np.ndarray) -> None:
    """BadRow for a present row of a fixed [n] feature without n values."""
    if f.kind != "fixed" or not f.shape:
        return
    counts = np.diff(rows)
    bad = present & (counts != f.shape[0])
    if bad.any():
        row = int(np.argmax(bad))
        raise BadRow(f"column {f.name!r} has {int(counts[row])} values at row {ROW} but the "
                     f"spec fixes its shape to {list(f.shape)}; fix the data or re-infer the "
                     f"spec without a fixed shape (variable length)", row)


def leaf_column(f: Feature, key: str, rows: np.ndarray, present: np.ndarray,
                arr: pa.Array) -> Column:
    """The canonical column of key `key` from leaf values `arr` (one per element)."""
    t = arr.type
    enc = f.encoding
    if enc == "bytes":
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t) or pa.types.is_string_view(t)
                or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t)):
            wrong_type(f, t)
        data, offsets = bytes_buffers(arr)
        return Column(key, BYTES, rows, present, data, offsets)
    if enc == "decimal_string":
        if not pa.types.is_decimal(t):
            wrong_type(f, t)
        data, offsets = bytes_buffers(values.fill(arr, 0).cast(pa.string()))
        return Column(key, BYTES, rows, present, data, offsets)
    if enc in ("int", "bool", "date", "timestamp"):
        return Column(key, INT, rows, present, values.to_int64(f, arr))
    if enc in ("float", "decimal"):
        if not (pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_integer(t)):
            wrong_type(f, t)
        raw = values.fill(arr, 0).cast(pa.float64()).to_numpy(zero_copy_only=False)
        f32 = values.to_float32(f, raw, rows)
        if pa.types.is_decimal(t):
            values.check_decimals(f, arr, f32, rows)
        return Column(key, FLOAT, rows, present, f32)
    raise EncodeError(f"feature {f.name!r} has unknown encoding {enc!r}")  # pragma: no cover


def vector_rows(f: Feature, arr: pa.Array, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ml Vector column (its Arrow struct form, or a plain list) -> dense float64 rows."""
    if is_list(arr.type):
        rows, child = list_parts(f, arr, present, "error")
        return rows, values.fill(child, 0).cast(pa.float64()).to_numpy(zero_copy_only=False)
    names = {arr.type.field(i).name for i in range(arr.type.num_fields)} \
        if pa.types.is_struct(arr.type) else set()
    if names != {"type", "size", "indices", "values"}:
        raise EncodeError(f"column {f.name!r} should be an ml Vector (struct of type, size, "
                          f"indices, values) but holds Arrow {arr.type}")
    parts = dict(zip([arr.type.field(i).name for i in range(4)], arr.flatten()))
    kind = values.fill(parts["type"], 1).cast(pa.int8()).to_numpy(zero_copy_only=False)
    size = values.fill(parts["size"], 0).cast(pa.int64()).to_numpy(zero_copy_only=False)
    idx_rows, idx = list_parts(f, parts["indices"], present, "error")
    val_rows, val = list_parts(f, parts["values"], present, "error")
    indices = values.fill(idx, 0).cast(pa.int64()).to_numpy(zero_copy_only=False)
    vals = values.fill(val, 0).cast(pa.float64()).to_numpy(zero_copy_only=False)
    sparse = present & (kind == 0)
    owner = np.repeat(np.arange(len(arr)), np.diff(idx_rows))
    bad = sparse[owner] & ((indices < 0) | (indices >= size[owner]))
    if bad.any() or (sparse & (np.diff(idx_rows) != np.diff(val_rows))).any():
        row = int(owner[np.argmax(bad)]) if bad.any() else int(np.argmax(
            sparse & (np.diff(idx_rows) != np.diff(val_rows))))
        raise BadRow(f"column {f.name!r} has a malformed sparse vector at row {ROW} "
                     f"(indices outside its size, or indices and values of different "
                     f"lengths); rebuild it with Vectors.sparse", row)
    return example_write.densify_vectors(kind, size, idx_rows, indices, val_rows, vals, present)
