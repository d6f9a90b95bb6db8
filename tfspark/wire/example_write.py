"""Compiled kernels that write tf.train.Example protobuf bytes for whole columns at once: the
mirror of wire.example_index / wire.example_read (which read them). arrow.encode drives them.

Wire format written (protobuf, deterministic: map entries in bytewise key order, as C++
protobuf's deterministic serialization; Python's upb protobuf puts "floats" before "float", so
compare parsed messages, not bytes, with what Python serializes):

    Example   = 0x0A len Features
    Features  = repeated (0x0A len Entry)            # map<string, Feature> feature = 1
    Entry     = 0x0A len key  0x12 len Feature       # key = 1, value = 2
    Feature   = tag len List, tag 0x0A bytes_list / 0x12 float_list / 0x1A int64_list
    BytesList = repeated (0x0A len bytes)
    FloatList = 0x0A len (float32 LE)*             # packed; nothing when empty
    Int64List = 0x0A len (varint)*                 # packed; negatives take 10 bytes

Every column is given in one canonical form: rows -> element ranges (`rows`, n+1 offsets into
the elements), a `present` flag per row (absent rows write no entry), and the elements (int64
values, float32 values, or bytes as data + offsets). Each kind has a size kernel, run first so
the output can be allocated once, and a write kernel that appends at a per-row cursor for rows
[lo, hi): the caller writes all columns one block of rows at a time so the block stays in cache.
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.jit import njit
from tfspark.wire.protobuf import (
    BYTES,
    FLOAT,
    INT,
    list_tag,
    put_varint,
    varint_bytes,
    varint_size,
)
from tfspark.wire.tfrecord import HEADER_BYTES, TRAILER_BYTES

_BYTES_TAG, _FLOAT_TAG, _INT_TAG = list_tag(BYTES), list_tag(FLOAT), list_tag(INT)
# Byte positions in the copying loops are uint64: numba checks every signed index for a
# negative one (Python's wrap-around), which took half the time of copying a scalar's entry.
_U = np.uint64


@njit
def _entry_size(key_len, list_len):
    """Bytes of `0x0A len Entry` for a Feature whose list body is list_len bytes."""
    feature = 1 + varint_size(list_len) + list_len
    entry = key_len + 1 + varint_size(feature) + feature
    return 1 + varint_size(entry) + entry


@njit
def _put_entry_head(out, pos, key, tag, list_len):
    feature = 1 + varint_size(list_len) + list_len
    entry = key.shape[0] + 1 + varint_size(feature) + feature
    out[pos] = 0x0A
    pos = put_varint(out, pos + 1, entry)
    at = _U(pos)
    for k in range(_U(key.shape[0])):
        out[at + k] = key[k]
    pos += key.shape[0]
    out[pos] = 0x12
    pos = put_varint(out, pos + 1, feature)
    out[pos] = tag
    return put_varint(out, pos + 1, list_len)


@njit
def _int_payload(values, a, b):
    s = 0
    for j in range(a, b):
        s += varint_size(values[j])
    return s


@njit
def size_ints(sizes, key, rows, present, values):
    """Add to sizes[i] the bytes of row i's Int64List entry under `key` (present rows only)."""
    for i in range(present.shape[0]):
        if present[i]:
            payload = _int_payload(values, rows[i], rows[i + 1])
            body = 0 if payload == 0 else 1 + varint_size(payload) + payload
            sizes[i] += _entry_size(key.shape[0], body)


@njit
def write_ints(out, cursor, lo, hi, key, rows, present, values):
    """Write the Int64List entries of rows [lo, hi) at their cursors, advancing them."""
    for i in range(lo, hi):
        if present[i]:
            a, b = rows[i], rows[i + 1]
            payload = _int_payload(values, a, b)
            body = 0 if payload == 0 else 1 + varint_size(payload) + payload
            pos = _put_entry_head(out, cursor[i], key, _INT_TAG, body)
            if payload:
                out[pos] = 0x0A
                pos = put_varint(out, pos + 1, payload)
                for j in range(a, b):
                    pos = put_varint(out, pos, values[j])
            cursor[i] = pos


@njit
def size_floats(sizes, key, rows, present, values_u8):
    """Add to sizes[i] the bytes of row i's FloatList entry under `key` (present rows only)."""
    for i in range(present.shape[0]):
        if present[i]:
            payload = 4 * (rows[i + 1] - rows[i])
            body = 0 if payload == 0 else 1 + varint_size(payload) + payload
            sizes[i] += _entry_size(key.shape[0], body)


@njit
def write_floats(out, cursor, lo, hi, key, rows, present, values_u8):
    """Write the FloatList entries of rows [lo, hi) at their cursors (values_u8: the float32
    values as bytes), advancing the cursors.
    """
    for i in range(lo, hi):
        if present[i]:
            a, b = 4 * rows[i], 4 * rows[i + 1]
            payload = b - a
            body = 0 if payload == 0 else 1 + varint_size(payload) + payload
            pos = _put_entry_head(out, cursor[i], key, _FLOAT_TAG, body)
            if payload:
                out[pos] = 0x0A
                pos = put_varint(out, pos + 1, payload)
                at, src = _U(pos), _U(a)
                for k in range(_U(payload)):
                    out[at + k] = values_u8[src + k]
                pos += payload
            cursor[i] = pos


@njit
def _bytes_body(offsets, a, b):
    s = 0
    for j in range(a, b):
        n = offsets[j + 1] - offsets[j]
        s += 1 + varint_size(n) + n
    return s


@njit
def size_bytes(sizes, key, rows, present, data, offsets):
    """Add to sizes[i] the bytes of row i's BytesList entry (string j: data[offsets[j]:...])."""
    for i in range(present.shape[0]):
        if present[i]:
            sizes[i] += _entry_size(key.shape[0], _bytes_body(offsets, rows[i], rows[i + 1]))


@njit
def write_bytes(out, cursor, lo, hi, key, rows, present, data, offsets):
    """Write the BytesList entries of rows [lo, hi) at their cursors, advancing them."""
    for i in range(lo, hi):
        if present[i]:
            a, b = rows[i], rows[i + 1]
            pos = _put_entry_head(out, cursor[i], key, _BYTES_TAG, _bytes_body(offsets, a, b))
            for j in range(a, b):
                s, e = offsets[j], offsets[j + 1]
                out[pos] = 0x0A
                pos = put_varint(out, pos + 1, e - s)
                at, src = _U(pos), _U(s)
                for k in range(_U(e - s)):  # strings are short; a loop beats slice setup
                    out[at + k] = data[src + k]
                pos += e - s
            cursor[i] = pos


@njit
def layout(sizes, frame):
    """Record offsets (n+1) and per-row cursors where the first entry goes.

    sizes[i] is the byte count of row i's entries; the record adds the Example header, and
    framing (when frame is True) adds its header before and its trailer after each record.
    """
    n = sizes.shape[0]
    offsets = np.empty(n + 1, np.int64)
    cursor = np.empty(n, np.int64)
    head = HEADER_BYTES if frame else 0
    tail = TRAILER_BYTES if frame else 0
    pos = 0
    for i in range(n):
        offsets[i] = pos
        cursor[i] = pos + head + 1 + varint_size(sizes[i])
        pos += head + 1 + varint_size(sizes[i]) + sizes[i] + tail
    offsets[n] = pos
    return offsets, cursor


@njit
def write_heads(out, offsets, sizes, frame, lo, hi):
    """Write the Example header (0x0A + varint length) of records [lo, hi), after the framing
    header when frame is True.
    """
    head = HEADER_BYTES if frame else 0
    for i in range(lo, hi):
        p = offsets[i] + head
        out[p] = 0x0A
        put_varint(out, p + 1, sizes[i])


@njit
def _scalar_head(key, tag, payload):
    """The bytes of an entry up to its values, for one scalar value of `payload` bytes."""
    body = 1 + 1 + payload  # 0x0A len values: payload is at most 10 bytes
    feature = 1 + 1 + body
    entry = key.shape[0] + 1 + 1 + feature
    head = np.empty(1 + varint_size(entry) + entry - payload, np.uint8)
    pos = _put_entry_head(head, 0, key, tag, body)
    head[pos] = 0x0A
    head[pos + 1] = payload
    return head


@njit
def size_float_scalars(sizes, key, present, values_u8):
    """size_floats for a scalar column: every present row holds one float32."""
    n = _scalar_head(key, _FLOAT_TAG, 4).shape[0] + 4
    for i in range(present.shape[0]):
        if present[i]:
            sizes[i] += n


@njit
def write_float_scalars(out, cursor, lo, hi, key, present, values_u8):
    """Scalar floats: every entry is the same head followed by the value's 4 bytes."""
    head = _scalar_head(key, _FLOAT_TAG, 4)
    h = _U(head.shape[0])
    for i in range(lo, hi):
        if present[i]:
            pos = _U(cursor[i])
            for k in range(h):
                out[pos + k] = head[k]
            pos += h
            src = _U(4 * i)
            for k in range(_U(4)):
                out[pos + k] = values_u8[src + k]
            cursor[i] = pos + _U(4)


@njit
def size_int_scalars(sizes, key, present, values):
    """size_ints for a scalar column: one int64 per present row (values[i])."""
    lengths = np.empty(11, np.int64)  # entry bytes by the value's varint size
    for p in range(1, 11):
        lengths[p] = _scalar_head(key, _INT_TAG, p).shape[0] + p
    for i in range(present.shape[0]):
        if present[i]:
            sizes[i] += lengths[varint_size(values[i])]


@njit
def write_int_scalars(out, cursor, lo, hi, key, present, values):
    """write_ints for a scalar column: a precomputed head per varint size, then the value."""
    heads = [_scalar_head(key, _INT_TAG, p) for p in range(1, 11)]
    for i in range(lo, hi):
        if present[i]:
            v = values[i]
            head = heads[varint_size(v) - 1]
            pos = _U(cursor[i])
            for k in range(_U(head.shape[0])):
                out[pos + k] = head[k]
            cursor[i] = put_varint(out, cursor[i] + head.shape[0], v)


@njit
def densify_vectors(kind, size, idx_rows, indices, val_rows, values, present):
    """ml Vector structs (type 0 sparse: size/indices/values; 1 dense: values) -> dense rows."""
    n = kind.shape[0]
    rows = np.zeros(n + 1, np.int64)
    for i in range(n):
        length = 0
        if present[i]:
            length = (val_rows[i + 1] - val_rows[i]) if kind[i] == 1 else size[i]
        rows[i + 1] = rows[i] + length
    out = np.zeros(rows[n], np.float64)
    for i in range(n):
        if present[i]:
            if kind[i] == 1:
                out[rows[i]:rows[i + 1]] = values[val_rows[i]:val_rows[i + 1]]
            else:
                for k in range(idx_rows[i + 1] - idx_rows[i]):
                    out[rows[i] + indices[idx_rows[i] + k]] = values[val_rows[i] + k]
    return rows, out


def key_header(key: str) -> np.ndarray:
    """`0x0A len key`: the map-entry key field, the same for every row of a column."""
    raw = key.encode("utf-8")
    return np.frombuffer(b"\x0a" + varint_bytes(len(raw)) + raw, dtype=np.uint8)
