"""Compiled kernels that write tf.train.SequenceExample bytes for whole columns at once: the
record layout and the feature lists. The context is a Features map like an Example's, written
by wire.example_write's kernels at the context cursors; the encoder drives both.

Wire format written (keys of each map in bytewise order, as wire.example_write):

    SequenceExample = 0x0A len Features (context)  0x12 len FeatureLists
    FeatureLists    = repeated (0x0A len Entry)           # map<string, FeatureList>
    Entry           = 0x0A len key  0x12 len FeatureList
    FeatureList     = repeated (0x0A len Feature)         # one Feature per step
    Feature         = tag len List                         # as in an Example

A feature-list column is given as: rows -> steps (`row_steps`, n+1 offsets), steps -> elements
(`step_rows`, S+1 offsets), a `present` flag per row (absent rows write no entry) and the
elements. A step kernel measures it once: `inner[s]`, the bytes of step s's values (packed
numbers, or the BytesList's strings), and `body[i]`, the bytes of row i's FeatureList; the
size and write passes take both rather than measure again.
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.jit import njit
from tfspark.wire.protobuf import BYTES, FLOAT, INT, list_tag, put_varint, varint_size
from tfspark.wire.tfrecord import HEADER_BYTES, TRAILER_BYTES

_BYTES_TAG, _FLOAT_TAG, _INT_TAG = list_tag(BYTES), list_tag(FLOAT), list_tag(INT)


@njit
def _wrap(body):
    """Bytes of a length-delimited field (one-byte tag) whose content is body bytes."""
    return 1 + varint_size(body) + body


@njit
def _packed(payload):
    """Bytes of a packed list body (0x0A len values); nothing when there are no values."""
    return 0 if payload == 0 else _wrap(payload)


@njit
def _feature(inner, packed):
    """Bytes of a step's Feature: tag len List, where the List is `inner` bytes of packed
    values (0x0A len values, nothing when empty) or, for bytes, inner bytes of strings."""
    return _wrap(_packed(inner) if packed else inner)


@njit
def _varint_bytes(v):
    """varint_size without branches (sizes of ids vary: branches mispredict)."""
    if v < 0:
        return 10
    return (1 + (v >= 1 << 7) + (v >= 1 << 14) + (v >= 1 << 21) + (v >= 1 << 28)
            + (v >= 1 << 35) + (v >= 1 << 42) + (v >= 1 << 49) + (v >= 1 << 56))


@njit
def _bodies(row_steps, inner, packed):
    """Bytes of each row's FeatureList: each step's Feature as a field."""
    n = row_steps.shape[0] - 1
    body = np.zeros(n, np.int64)
    for i in range(n):
        b = 0
        for s in range(row_steps[i], row_steps[i + 1]):
            b += _wrap(_feature(inner[s], packed))
        body[i] = b
    return body


@njit
def int_steps(row_steps, step_rows, values):
    """(inner[s]: packed varint bytes of step s, body[i]: bytes of row i's FeatureList)."""
    n = step_rows.shape[0] - 1
    inner = np.zeros(n, np.int64)
    for s in range(n):
        b = 0
        for j in range(step_rows[s], step_rows[s + 1]):
            b += _varint_bytes(values[j])
        inner[s] = b
    return inner, _bodies(row_steps, inner, True)


@njit
def float_steps(row_steps, step_rows):
    """(inner[s]: float32 bytes of step s, body[i]: bytes of row i's FeatureList)."""
    inner = 4 * (step_rows[1:] - step_rows[:-1])
    return inner, _bodies(row_steps, inner, True)


@njit
def bytes_steps(row_steps, step_rows, offsets):
    """(inner[s]: BytesList bytes of step s, body[i]: bytes of row i's FeatureList)."""
    n = step_rows.shape[0] - 1
    inner = np.zeros(n, np.int64)
    for s in range(n):
        b = 0
        for j in range(step_rows[s], step_rows[s + 1]):
            m = offsets[j + 1] - offsets[j]
            b += 1 + varint_size(m) + m
        inner[s] = b
    return inner, _bodies(row_steps, inner, False)


@njit
def size_lists(sizes, key, present, body):
    """Add to sizes[i] the bytes of row i's FeatureLists entry under `key` (present rows)."""
    for i in range(present.shape[0]):
        if present[i]:
            sizes[i] += _wrap(key.shape[0] + _wrap(body[i]))


@njit
def _put_head(out, pos, key, body):
    """`0x0A len Entry` up to the FeatureList's first step; the position after it."""
    out[pos] = 0x0A
    pos = put_varint(out, pos + 1, key.shape[0] + _wrap(body))
    for k in range(key.shape[0]):
        out[pos + k] = key[k]
    pos += key.shape[0]
    out[pos] = 0x12
    return put_varint(out, pos + 1, body)


@njit
def _put_step(out, pos, tag, inner, packed):
    """`0x0A len Feature` and the list's head: up to the step's first value. The writers
    inline the usual case (every length one byte): a call per step costs more than it."""
    out[pos] = 0x0A
    pos = put_varint(out, pos + 1, _feature(inner, packed))
    out[pos] = tag
    if not packed:
        return put_varint(out, pos + 1, inner)
    if inner == 0:
        out[pos + 1] = 0
        return pos + 2
    pos = put_varint(out, pos + 1, _packed(inner))
    out[pos] = 0x0A
    return put_varint(out, pos + 1, inner)


@njit
def write_int_lists(out, cursor, lo, hi, key, row_steps, present, body, inner, step_rows,
                    values):
    """Write the Int64List feature lists of rows [lo, hi) at their cursors, advancing them.

    The usual step head is written inline here and in write_float_lists: numba does not
    inline a helper for it, and the call per step cost ~20% of the encoder's throughput
    (bench/bench_sequence.py: 24x against 29x the per-row protos)."""
    tag = _INT_TAG
    for i in range(lo, hi):
        if present[i]:
            pos = _put_head(out, cursor[i], key, body[i])
            for s in range(row_steps[i], row_steps[i + 1]):
                m = inner[s]
                if 0 < m < 124:
                    out[pos] = 0x0A
                    out[pos + 1] = m + 4
                    out[pos + 2] = tag
                    out[pos + 3] = m + 2
                    out[pos + 4] = 0x0A
                    out[pos + 5] = m
                    pos += 6
                else:
                    pos = _put_step(out, pos, tag, m, True)
                for j in range(step_rows[s], step_rows[s + 1]):
                    pos = put_varint(out, pos, values[j])
            cursor[i] = pos


@njit
def write_float_lists(out, cursor, lo, hi, key, row_steps, present, body, inner, step_rows,
                      values_u8):
    """Write the FloatList feature lists of rows [lo, hi) (values_u8: float32 values as
    bytes) at their cursors, advancing them."""
    tag = _FLOAT_TAG
    for i in range(lo, hi):
        if present[i]:
            pos = _put_head(out, cursor[i], key, body[i])
            for s in range(row_steps[i], row_steps[i + 1]):
                m = inner[s]
                if 0 < m < 124:
                    out[pos] = 0x0A
                    out[pos + 1] = m + 4
                    out[pos + 2] = tag
                    out[pos + 3] = m + 2
                    out[pos + 4] = 0x0A
                    out[pos + 5] = m
                    pos += 6
                else:
                    pos = _put_step(out, pos, tag, m, True)
                a = 4 * step_rows[s]
                for k in range(m):
                    out[pos + k] = values_u8[a + k]
                pos += m
            cursor[i] = pos


@njit
def write_bytes_lists(out, cursor, lo, hi, key, row_steps, present, body, inner, step_rows,
                      data, offsets):
    """Write the BytesList feature lists of rows [lo, hi) at their cursors, advancing them."""
    tag = _BYTES_TAG
    for i in range(lo, hi):
        if present[i]:
            pos = _put_head(out, cursor[i], key, body[i])
            for s in range(row_steps[i], row_steps[i + 1]):
                m = inner[s]
                if m < 126:
                    out[pos] = 0x0A
                    out[pos + 1] = m + 2
                    out[pos + 2] = tag
                    out[pos + 3] = m
                    pos += 4
                else:
                    pos = _put_step(out, pos, tag, m, False)
                for j in range(step_rows[s], step_rows[s + 1]):
                    p, e = offsets[j], offsets[j + 1]
                    out[pos] = 0x0A
                    if e - p < 0x80:
                        out[pos + 1] = e - p
                        pos += 2
                    else:
                        pos = put_varint(out, pos + 1, e - p)
                    for k in range(e - p):
                        out[pos + k] = data[p + k]
                    pos += e - p
            cursor[i] = pos


@njit
def layout(ctx_sizes, list_sizes, frame):
    """(record offsets n+1, context cursors, feature-list cursors): where each record starts
    and where its first context entry and first feature-list entry go. A section is written
    only when the record has entries in it, as protobuf leaves out a submessage never set.
    """
    n = ctx_sizes.shape[0]
    offsets = np.empty(n + 1, np.int64)
    ctx_cursor = np.empty(n, np.int64)
    list_cursor = np.empty(n, np.int64)
    head = HEADER_BYTES if frame else 0
    tail = TRAILER_BYTES if frame else 0
    pos = 0
    for i in range(n):
        offsets[i] = pos
        p = pos + head
        if ctx_sizes[i]:
            p += 1 + varint_size(ctx_sizes[i])
        ctx_cursor[i] = p
        p += ctx_sizes[i]
        if list_sizes[i]:
            p += 1 + varint_size(list_sizes[i])
        list_cursor[i] = p
        p += list_sizes[i]
        pos = p + tail
    offsets[n] = pos
    return offsets, ctx_cursor, list_cursor


@njit
def write_heads(out, offsets, ctx_sizes, list_sizes, frame, lo, hi):
    """The context and feature_lists field heads of records [lo, hi) (after the framing
    header when frame is True); an empty section has none."""
    head = HEADER_BYTES if frame else 0
    for i in range(lo, hi):
        p = offsets[i] + head
        if ctx_sizes[i]:
            out[p] = 0x0A
            p = put_varint(out, p + 1, ctx_sizes[i]) + ctx_sizes[i]
        if list_sizes[i]:
            out[p] = 0x12
            put_varint(out, p + 1, list_sizes[i])
