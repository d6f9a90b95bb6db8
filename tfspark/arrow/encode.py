"""Arrow RecordBatch + FeatureSpec -> serialized tf.train.Example bytes, whole columns at a time.

The mirror of decode.py. Each spec feature becomes one or two canonical columns (see
wire/example_write.py); compiled kernels size every row, the output is allocated once, and each
column writes its entries in Example key order. No protobuf objects, no TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tfspark.arrow import values
from tfspark.arrow.values import ROW, BadRow, bytes_buffers, wrong_type
from tfspark.errors import EncodeError
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.wire import example_write as pw
from tfspark.wire.protobuf import BYTES, FLOAT, INT
from tfspark.wire.tfrecord import frame_into

NULL_ELEMENT_POLICIES = ("error", "drop")
# Rows written per block: all columns of a block are written while it is still in cache.
_BLOCK_ROWS = 4096


@dataclass
class _Col:
    """One Example key's values in canonical form (see wire/example_write.py)."""

    key: str
    kind: int  # INT | FLOAT | BYTES (wire/protobuf.py)
    rows: np.ndarray  # int64, n+1 element offsets per row
    present: np.ndarray  # bool, n
    values: np.ndarray  # int64 | float32 | uint8 data (bytes)
    offsets: np.ndarray | None = None  # int64 element offsets into data (bytes only)
    scalar: bool = False  # one value per row (rows == arange): the kernels' fast path


def encode_batch(batch: pa.RecordBatch | pa.Table, spec: FeatureSpec, *,
                 null_elements: str = "error") -> list[bytes]:
    """One serialized tf.train.Example per row, in row order.

    null_elements: "error" (default) refuses a null inside an array, naming column and row;
    "drop" leaves such elements out. Raises EncodeError for a missing column, a type that does
    not fit the spec or a refused null.
    """
    if not isinstance(batch, (pa.RecordBatch, pa.Table)):
        raise EncodeError(f"encode_batch needs a pyarrow RecordBatch or Table, got "
                          f"{type(batch).__name__}; build one with pa.RecordBatch.from_pydict "
                          f"or pa.Table.from_pandas")
    if not isinstance(spec, FeatureSpec):
        raise EncodeError(f"encode_batch needs a tfspark.FeatureSpec, got "
                          f"{type(spec).__name__}; see tfspark.infer_spec")
    buf, offsets = BatchEncoder(spec, null_elements=null_elements).encode(batch)
    raw = buf.tobytes()
    offs = offsets.tolist()
    return [raw[a:b] for a, b in zip(offs, offs[1:])]


def encode_records(batch: pa.RecordBatch | pa.Table, spec: FeatureSpec, *, framed: bool = False,
                   null_elements: str = "error") -> tuple[np.ndarray, np.ndarray]:
    """All rows' Examples in one new uint8 buffer, with n+1 record offsets.

    framed=True returns TFRecord-framed records ready to write to a file (the offsets then
    delimit framed records).
    """
    buf, offsets = BatchEncoder(spec, null_elements=null_elements).encode(batch, framed=framed)
    return buf.copy(), offsets


class BatchEncoder:
    """Encodes batch after batch into one reused buffer (fresh memory costs page faults).

    The array `encode` returns is only valid until the next call.
    """

    def __init__(self, spec: FeatureSpec, *, null_elements: str = "error"):
        if null_elements not in NULL_ELEMENT_POLICIES:
            raise EncodeError(f"null_elements must be one of {list(NULL_ELEMENT_POLICIES)}, "
                              f"got {null_elements!r}")
        self.spec = spec
        self.null_elements = null_elements
        self._keys = {k: pw.key_header(k) for f in spec.features for k in f.keys}
        self._buf = np.empty(0, np.uint8)

    def encode(self, batch: pa.RecordBatch | pa.Table, *, framed: bool = False,
               row_numbers: np.ndarray | None = None,
               where: str = "") -> tuple[np.ndarray, np.ndarray]:
        """(buffer, n+1 record offsets) of the batch's rows as serialized Examples.

        framed=True adds TFRecord framing, ready to write to a file. The buffer is reused by the
        next call. Raises EncodeError for a missing column, a wrong type or a refused null; it
        names a bad row by row_numbers[i] (default: its index in the batch) and says `where`
        rows are counted (e.g. "Spark partition 3").
        """
        if isinstance(batch, pa.Table):
            chunks = batch.combine_chunks().to_batches()
            batch = chunks[0] if chunks else pa.RecordBatch.from_pylist([], schema=batch.schema)
        _check_columns(batch, self.spec)
        from tfspark.arrow import encode_sequence  # imports this module: not at the top

        try:
            if self.spec.is_sequence:
                cols, lists = encode_sequence.columns(self, batch)
                n = batch.num_rows
            else:
                cols, n = self._columns(batch)
        except BadRow as e:
            number = int(row_numbers[e.row]) if row_numbers is not None else e.row
            raise e.renamed(number, where) from None
        if n == 0:  # checked all the same; no kernel needed (nor loaded: a driver checking a
            return self._buf[:0], np.zeros(1, np.int64)  # spec has no rows to encode)
        if self.spec.is_sequence:
            return encode_sequence.encode(self, cols, lists, n, framed)
        cols.sort(key=lambda c: c.key)
        keys = [self._key(c.key) for c in cols]
        sizes = np.zeros(n, np.int64)
        for c, key in zip(cols, keys):
            _size(c, sizes, key)
        offsets, cursor = pw.layout(sizes, framed)
        out = self._out(int(offsets[-1]))
        for lo in range(0, n, _BLOCK_ROWS):
            hi = min(lo + _BLOCK_ROWS, n)
            pw.write_heads(out, offsets, sizes, framed, lo, hi)
            for c, key in zip(cols, keys):
                _write(c, out, cursor, lo, hi, key)
            if framed:
                frame_into(out, offsets[lo:hi + 1])
        return out, offsets

    def _columns(self, batch: pa.RecordBatch) -> tuple[list[_Col], int]:
        """(the canonical columns of the records, how many records): one per row here."""
        cols: list[_Col] = []
        for feature in self.spec.features:
            cols.extend(_columns_of(feature, _column(batch, feature.path), self.null_elements))
        return cols, batch.num_rows

    def _out(self, total: int) -> np.ndarray:
        """The reused buffer's first `total` bytes, grown when too small."""
        if total > len(self._buf):
            self._buf = np.empty(max(total, len(self._buf) * 3 // 2), np.uint8)
        return self._buf[:total]

    def _key(self, key: str) -> np.ndarray:
        head = self._keys.get(key)
        if head is None:
            head = self._keys[key] = pw.key_header(key)
        return head


def _size(c: _Col, sizes: np.ndarray, key: np.ndarray) -> None:
    """Add each row's entry bytes for column c to sizes."""
    if c.kind == INT:
        if c.scalar:
            pw.size_int_scalars(sizes, key, c.present, c.values)
        else:
            pw.size_ints(sizes, key, c.rows, c.present, c.values)
    elif c.kind == FLOAT:
        if c.scalar:
            pw.size_float_scalars(sizes, key, c.present, c.values.view(np.uint8))
        else:
            pw.size_floats(sizes, key, c.rows, c.present, c.values.view(np.uint8))
    else:
        pw.size_bytes(sizes, key, c.rows, c.present, c.values, c.offsets)


def _write(c: _Col, out: np.ndarray, cursor: np.ndarray, lo: int, hi: int,
           key: np.ndarray) -> None:
    """Write column c's entries of rows [lo, hi) at the rows' cursors."""
    if c.kind == INT:
        if c.scalar:
            pw.write_int_scalars(out, cursor, lo, hi, key, c.present, c.values)
        else:
            pw.write_ints(out, cursor, lo, hi, key, c.rows, c.present, c.values)
    elif c.kind == FLOAT:
        if c.scalar:
            pw.write_float_scalars(out, cursor, lo, hi, key, c.present, c.values.view(np.uint8))
        else:
            pw.write_floats(out, cursor, lo, hi, key, c.rows, c.present,
                            c.values.view(np.uint8))
    else:
        pw.write_bytes(out, cursor, lo, hi, key, c.rows, c.present, c.values, c.offsets)


def _check_columns(batch: pa.RecordBatch, spec: FeatureSpec) -> None:
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


def _column(batch: pa.RecordBatch, path: tuple[str, ...]) -> pa.Array:
    arr = batch.column(path[0])
    for depth, name in enumerate(path[1:], start=1):
        if not pa.types.is_struct(arr.type):
            raise EncodeError(f"column {'.'.join(path[:depth])!r} should be a struct, got Arrow "
                              f"type {arr.type}")
        idx = arr.type.get_field_index(name)
        if idx < 0:
            raise EncodeError(f"struct column {'.'.join(path[:depth])!r} has no field {name!r}")
        arr = arr.flatten()[idx]  # flatten() applies the struct's own nulls to its fields
    return arr


def _columns_of(f: Feature, arr: pa.Array, policy: str) -> list[_Col]:
    n = len(arr)
    present = _present(f, arr)
    if f.kind == "fixed" and f.shape == (0,):
        # TF treats an empty default as "required": write null rows as (equal) empty lists.
        present = np.ones(n, dtype=bool)
    if f.encoding == "vector":
        rows, dense = _vector(f, arr, present)
        _check_fixed(f, rows, present)
        return [_Col(f.name, FLOAT, rows, present, values.to_float32(f, dense, rows))]
    if f.kind == "ragged":
        outer, inner = _list_parts(f, arr, present, policy, what="a null array")
        owner = np.repeat(np.arange(n), np.diff(outer))
        inner_rows, leaf = _list_parts(f, inner, present[owner], policy, row_of=owner)
        lengths = np.diff(inner_rows).astype(np.int64)
        values_key, lengths_key = f.keys
        return [_leaf(f, values_key, inner_rows[outer], present, leaf),
                _Col(lengths_key, INT, outer, present, lengths)]
    if f.kind == "varlen" or f.shape:
        rows, leaf = _list_parts(f, arr, present, policy)
        _check_fixed(f, rows, present)
        return [_leaf(f, f.name, rows, present, leaf)]
    if _is_list(arr.type):
        raise EncodeError(f"column {f.name!r} holds Arrow {arr.type} but the spec has a scalar "
                          f"({f.source_type}); re-infer the spec from this data")
    col = _leaf(f, f.name, np.arange(n + 1, dtype=np.int64), present, arr)
    col.scalar = True
    return [col]


def _present(f: Feature, arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    present = arr.is_valid().to_numpy(zero_copy_only=False)
    if not f.nullable:
        raise BadRow(f"column {f.name!r} is not nullable in the spec but row {ROW} is null; "
                     f"fill the nulls (fillna/coalesce) or infer the spec from a nullable "
                     f"schema", int(np.argmin(present)))
    return present


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _list_parts(f: Feature, arr: pa.Array, present: np.ndarray, policy: str,
                what: str = "a null element",
                row_of: np.ndarray | None = None) -> tuple[np.ndarray, pa.Array]:
    """(n+1 element offsets from 0, elements) of a list column, nulls in elements handled.

    present: which lists count (elements of absent lists are never checked); row_of maps a
    list's index to the row named in errors, for the inner lists of a 2-D column.
    """
    if not _is_list(arr.type):
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


def _check_fixed(f: Feature, rows: np.ndarray, present: np.ndarray) -> None:
    if f.kind != "fixed" or not f.shape:
        return
    counts = np.diff(rows)
    bad = present & (counts != f.shape[0])
    if bad.any():
        row = int(np.argmax(bad))
        raise BadRow(f"column {f.name!r} has {int(counts[row])} values at row {ROW} but the "
                     f"spec fixes its shape to {list(f.shape)}; fix the data or re-infer the "
                     f"spec without a fixed shape (variable length)", row)


def _leaf(f: Feature, key: str, rows: np.ndarray, present: np.ndarray, arr: pa.Array) -> _Col:
    t = arr.type
    enc = f.encoding
    if enc == "bytes":
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
                or pa.types.is_large_binary(t) or pa.types.is_string_view(t)
                or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t)):
            wrong_type(f, t)
        data, offsets = bytes_buffers(arr)
        return _Col(key, BYTES, rows, present, data, offsets)
    if enc == "decimal_string":
        if not pa.types.is_decimal(t):
            wrong_type(f, t)
        data, offsets = bytes_buffers(values.fill(arr, 0).cast(pa.string()))
        return _Col(key, BYTES, rows, present, data, offsets)
    if enc in ("int", "bool", "date", "timestamp"):
        return _Col(key, INT, rows, present, values.to_int64(f, arr))
    if enc in ("float", "decimal"):
        if not (pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_integer(t)):
            wrong_type(f, t)
        raw = values.fill(arr, 0).cast(pa.float64()).to_numpy(zero_copy_only=False)
        f32 = values.to_float32(f, raw, rows)
        if pa.types.is_decimal(t):
            values.check_decimals(f, arr, f32, rows)
        return _Col(key, FLOAT, rows, present, f32)
    raise EncodeError(f"feature {f.name!r} has unknown encoding {enc!r}")  # pragma: no cover


def _vector(f: Feature, arr: pa.Array, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ml Vector column (its Arrow struct form, or a plain list) -> dense float64 rows."""
    if _is_list(arr.type):
        rows, child = _list_parts(f, arr, present, "error")
        return rows, values.fill(child, 0).cast(pa.float64()).to_numpy(zero_copy_only=False)
    names = {arr.type.field(i).name for i in range(arr.type.num_fields)} \
        if pa.types.is_struct(arr.type) else set()
    if names != {"type", "size", "indices", "values"}:
        raise EncodeError(f"column {f.name!r} should be an ml Vector (struct of type, size, "
                          f"indices, values) but holds Arrow {arr.type}")
    parts = dict(zip([arr.type.field(i).name for i in range(4)], arr.flatten()))
    kind = values.fill(parts["type"], 1).cast(pa.int8()).to_numpy(zero_copy_only=False)
    size = values.fill(parts["size"], 0).cast(pa.int64()).to_numpy(zero_copy_only=False)
    idx_rows, idx = _list_parts(f, parts["indices"], present, "error")
    val_rows, val = _list_parts(f, parts["values"], present, "error")
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
    return pw.densify_vectors(kind, size, idx_rows, indices, val_rows, vals, present)
