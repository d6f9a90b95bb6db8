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
    put_varint_word,
    varint_bytes,
    varint_size,
)
from tfspark.wire.tfrecord import HEADER_BYTES, TRAILER_BYTES
from tfspark.wire.words import copy_bytes, load_u64, store_u64
from tfspark.wire.words import unsigned as _U

_BYTES_TAG, _FLOAT_TAG, _INT_TAG = list_tag(BYTES), list_tag(FLOAT), list_tag(INT)


@njit
def _entry_size(key_len, list_len):
    """Bytes of `0x0A len Entry` for a Feature whose list body is list_len bytes."""
    feature = 1 + varint_size(list_len) + list_len
    entry = key_len + 1 + varint_size(feature) + feature
    return 1 + varint_size(entry) + entry


@njit
def _put_entry_head(out, pos, key, tag, list_len, words):
    """An entry's bytes up to its list body; the key from `words` (wide) when not empty."""
    feature = 1 + varint_size(list_len) + list_len
    entry = key.shape[0] + 1 + varint_size(feature) + feature
    out[pos] = 0x0A
    pos = put_varint(out, pos + 1, entry)
    if words.shape[0]:
        _put_words(out, pos, words)
    else:
        at = _U(pos)
        for k in range(_U(key.shape[0])):
            out[at + k] = key[k]
    pos += key.shape[0]
    out[pos] = 0x12
    pos = put_varint(out, pos + 1, feature)
    out[pos] = tag
    return put_varint(out, pos + 1, list_len)


# ---------------------------------------------------------------- wide: words, not bytes
#
# A buffer of framed records is written `wide`: heads, keys and values go out 8 bytes at a
# store (wire.words), and each store may overwrite up to 7 bytes past what it means to write.
# Those bytes are always written again after: an entry is 8 bytes or more and the entries of a
# row are written in order, so the next entry of the row covers them; the last entry's are
# the record's trailer and the next record's length, which framing writes after the entries
# (both 16 bytes, more than the 7). The buffer holds words.SLACK bytes past its last record.
# Records without framing lie back to back, and are written a byte at a time.


@njit
def _words(head):
    """A head's bytes as little-endian words, zero-padded to a whole word."""
    out = np.zeros((head.shape[0] + 7) // 8 * 8, np.uint8)
    out[:head.shape[0]] = head
    return out.view(np.uint64)


@njit
def _put_words(out, pos, words):
    """words' bytes at out[pos:], whole words (past the head they pad: see above)."""
    for k in range(words.shape[0]):
        store_u64(out, pos + 8 * k, words[k])


@njit
def _no_words():
    return np.zeros(0, np.uint64)


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
def write_ints(out, cursor, lo, hi, key, rows, present, values, wide):
    """Write the Int64List entries of rows [lo, hi) at their cursors, advancing them."""
    words = _words(key) if wide else _no_words()
    for i in range(lo, hi):
        if present[i]:
            a, b = rows[i], rows[i + 1]
            payload = _int_payload(values, a, b)
            body = 0 if payload == 0 else 1 + varint_size(payload) + payload
            pos = _put_entry_head(out, cursor[i], key, _INT_TAG, body, words)
            if payload:
                out[pos] = 0x0A
                pos = put_varint(out, pos + 1, payload)
                for j in range(a, b):
                    if wide:
                        pos = put_varint_word(out, pos, values[j], varint_size(values[j]))
                    else:
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
def write_floats(out, cursor, lo, hi, key, rows, present, values_u8, wide):
    """Write the FloatList entries of rows [lo, hi) at their cursors (values_u8: the float32
    values as bytes), advancing the cursors.
    """
    words = _words(key) if wide else _no_words()
    for i in range(lo, hi):
        if present[i]:
            a, b = 4 * rows[i], 4 * rows[i + 1]
            payload = b - a
            body = 0 if payload == 0 else 1 + varint_size(payload) + payload
            pos = _put_entry_head(out, cursor[i], key, _FLOAT_TAG, body, words)
            if payload:
                out[pos] = 0x0A
                pos = put_varint(out, pos + 1, payload)
                pos = copy_bytes(out, pos, values_u8, a, payload, wide)
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
def write_bytes(out, cursor, lo, hi, key, rows, present, data, offsets, wide):
    """Write the BytesList entries of rows [lo, hi) at their cursors, advancing them."""
    words = _words(key) if wide else _no_words()
    for i in range(lo, hi):
        if present[i]:
            a, b = rows[i], rows[i + 1]
            pos = _put_entry_head(out, cursor[i], key, _BYTES_TAG, _bytes_body(offsets, a, b),
                                  words)
            for j in range(a, b):
                s, e = offsets[j], offsets[j + 1]
                out[pos] = 0x0A
                pos = put_varint(out, pos + 1, e - s)
                pos = copy_bytes(out, pos, data, s, e - s, wide)
            cursor[i] = pos


@njit
def write_bytes_scalars(out, cursor, lo, hi, key, present, data, offsets, wide):
    """write_bytes for a scalar column (string j is row j's): each entry's head up to the
    string's bytes depends on its length only, so the heads of strings under SHORT bytes are
    made once, as words (wide), and copied."""
    if not wide:
        write_bytes(out, cursor, lo, hi, key, np.arange(present.shape[0] + 1), present, data,
                    offsets, wide)
        return
    width = (_short_head(key, SHORT - 1).shape[0] + 7) // 8
    words = np.zeros((SHORT, width), np.uint64)
    sizes = np.zeros(SHORT, np.int64)
    for n in range(SHORT):
        head = _short_head(key, n)
        w = _words(head)
        words[n, :w.shape[0]] = w
        sizes[n] = head.shape[0]
    key_words = _words(key)
    last = data.shape[0] - 8
    for i in range(lo, hi):
        if present[i]:
            s, e = offsets[i], offsets[i + 1]
            n = e - s
            pos = cursor[i]
            if n < SHORT:
                for k in range((sizes[n] + 7) // 8):
                    store_u64(out, pos + 8 * k, words[n, k])
                pos += sizes[n]
            else:
                pos = _put_entry_head(out, pos, key, _BYTES_TAG, 1 + varint_size(n) + n,
                                      key_words)
                out[pos] = 0x0A
                pos = put_varint(out, pos + 1, n)
            if n <= 8 and s <= last:  # (most strings of a category: one word)
                store_u64(out, pos, load_u64(data, s))
                cursor[i] = pos + n
            else:
                cursor[i] = copy_bytes(out, pos, data, s, n, wide)


SHORT = 64  # bytes under which a scalar string's entry head comes from a table


@njit
def size_bytes_scalars(sizes, key, present, offsets):
    """size_bytes for a scalar column: the entry bytes of strings under SHORT bytes from a
    table by length."""
    table = np.zeros(SHORT, np.int64)
    for n in range(SHORT):
        table[n] = _short_head(key, n).shape[0] + n
    for i in range(present.shape[0]):
        if present[i]:
            n = offsets[i + 1] - offsets[i]
            if n < SHORT:
                sizes[i] += table[n]
            else:
                sizes[i] += _entry_size(key.shape[0], 1 + varint_size(n) + n)


@njit
def _short_head(key, n):
    """The bytes of a one-string BytesList entry under `key` up to the string's n bytes."""
    body = 1 + varint_size(n) + n
    feature = 1 + varint_size(body) + body
    entry = key.shape[0] + 1 + varint_size(feature) + feature
    head = np.empty(1 + varint_size(entry) + entry - n, np.uint8)
    pos = _put_entry_head(head, 0, key, _BYTES_TAG, body, _no_words())
    head[pos] = 0x0A
    put_varint(head, pos + 1, n)
    return head


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
    pos = _put_entry_head(head, 0, key, tag, body, _no_words())
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
def write_float_scalars(out, cursor, lo, hi, key, present, values_u8, wide):
    """Scalar floats: every entry is the same head followed by the value's 4 bytes."""
    head = _scalar_head(key, _FLOAT_TAG, 4)
    if wide:
        words = _words(head)
        n = head.shape[0]
        bits = values_u8.view(np.uint32)
        for i in range(lo, hi):
            if present[i]:
                pos = cursor[i]
                _put_words(out, pos, words)
                store_u64(out, pos + n, np.uint64(bits[i]))
                cursor[i] = pos + n + 4
        return
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
def write_int_scalars(out, cursor, lo, hi, key, present, values, wide):
    """write_ints for a scalar column: a precomputed head per varint size, then the value."""
    heads = [_scalar_head(key, _INT_TAG, p) for p in range(1, 11)]
    if wide:
        width = (heads[9].shape[0] + 7) // 8  # (the longest head: of 10 bytes)
        words = np.zeros((11, width), np.uint64)
        sizes = np.zeros(11, np.int64)
        for p in range(1, 11):
            w = _words(heads[p - 1])
            words[p, :w.shape[0]] = w
            sizes[p] = heads[p - 1].shape[0]
        for i in range(lo, hi):
            if present[i]:
                v = values[i]
                p = varint_size(v)
                pos = cursor[i]
                for k in range((sizes[p] + 7) // 8):
                    store_u64(out, pos + 8 * k, words[p, k])
                cursor[i] = put_varint_word(out, pos + sizes[p], v, p)
        return
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
