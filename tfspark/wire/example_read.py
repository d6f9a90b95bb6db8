"""Compiled kernels that read one key's lists out of records indexed by
example_index.index_records: count the values per record (so each column is allocated once),
then fill them in; int64 lists in one pass, into room for the most values their bytes can hold.

A list body is what index_records points at: BytesList, FloatList or Int64List fields
(packed or not, repeated or not). Bodies were not checked when indexed, so the count pass (or
the one pass of int64 lists) validates each one and the fill passes only read what it
accepted. The layouts every writer uses (one packed field, short strings, one value for
scalars) are parsed inline: numba does not inline calls to kernels this size, and a call
costs more than a field.
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.jit import njit
from tfspark.wire.protobuf import (
    BAD_FLOATS,
    BYTES,
    FLOAT,
    INEXACT,
    INT,
    MALFORMED,
    OK,
    TOO_MANY,
    WRONG_TYPE,
    get_varint,
    get_varints,
    next_field,
)
from tfspark.wire.words import copy_bytes
from tfspark.wire.words import unsigned as _U


@njit
def count_list(buf, kind, a, b):
    """(number of values, bytes of string data, error code, error position)."""
    count = 0
    nbytes = 0
    pos = a
    while pos < b:
        if kind == BYTES and buf[_U(pos)] == 0x0A and pos + 1 < b and buf[_U(pos + 1)] < 0x80:
            q = pos + 2 + np.int64(buf[_U(pos + 1)])  # a short string, inline
            if q > b:
                return 0, 0, MALFORMED, pos
            count += 1
            nbytes += q - pos - 2
            pos = q
            continue
        f, w, p, q = next_field(buf, pos, b)
        if f < 0:
            return 0, 0, MALFORMED, pos
        if f == 1:
            if kind == BYTES and w == 2:
                count += 1
                nbytes += q - p
            elif kind == FLOAT and w == 5:
                count += 1
            elif kind == FLOAT and w == 2:
                if (q - p) % 4:
                    return 0, 0, BAD_FLOATS, p
                count += (q - p) // 4
            elif kind == INT and w == 0:
                count += 1
            elif kind == INT and w == 2 and q > p:
                run = 0  # packed varints: count last bytes; no varint over 10 bytes,
                for r in range(p, q):  # nor a 10th byte over 1 (past 64 bits: get_varint)
                    if buf[_U(r)] < 0x80:
                        if run == 9 and buf[_U(r)] > 1:
                            return 0, 0, MALFORMED, p
                        count += 1
                        run = 0
                    else:
                        run += 1
                        if run >= 10:
                            return 0, 0, MALFORMED, p
                if buf[_U(q - 1)] >= 0x80:
                    return 0, 0, MALFORMED, p
        pos = q
    return count, nbytes, OK, 0


@njit
def count_values(buf, kinds, starts, ends, k, want, counts):
    """counts[i] = values of key k in record i (-1 when absent). want is the spec's kind: a
    non-empty list of another kind is WRONG_TYPE, except ints where floats are wanted (each
    value then converted only where float32 holds it exactly: fill_floats).
    Returns (code, record, position or kind, string bytes in all)."""
    nbytes = 0
    for i in range(kinds.shape[0]):
        kind = kinds[i, k]
        if kind < 0:
            counts[i] = -1
            continue
        a, b = starts[i, k], ends[i, k]
        if kind == BYTES and want == BYTES and b - a >= 2 and buf[_U(a)] == 0x0A and \
                buf[_U(a + 1)] < 0x80 and a + 2 + np.int64(buf[_U(a + 1)]) == b:  # one short string
            counts[i] = 1
            nbytes += np.int64(buf[_U(a + 1)])
            continue
        c, nb, code, p = count_list(buf, kind, a, b)
        if code != OK:
            return code, i, p, 0
        if c > 0 and kind != want and not (want == FLOAT and kind == INT):
            return WRONG_TYPE, i, kind, 0
        counts[i] = c
        nbytes += nb
    return OK, 0, 0, nbytes


@njit
def _put_ints(buf, a, b, out, j):
    """Int64List body buf[a:b] -> out[j:] (int64, or float32: converted); the next j, or -1
    where the body is malformed (a field, or a varint past 64 bits or past its field)."""
    pos = a
    while pos < b:
        f, w, p, q = next_field(buf, pos, b)
        if f < 0:
            return -1
        if f == 1 and w == 0:
            v, _ = get_varint(buf, p, q)
            out[j] = v
            j += 1
        elif f == 1 and w == 2:
            j = get_varints(buf, p, q, out, j)
            if j < 0:
                return -1
        pos = q
    return j


@njit
def _put_ints_exactly(buf, a, b, out, j):
    """Int64List body buf[a:b] -> float32 out[j:], as _put_ints; (the next j, -1), or (j, the
    value) at the first value that float32 cannot hold exactly (which would read as another
    number: 2**24 + 1 as 2**24; -1, float32's exactly, never is one)."""
    pos = a
    while pos < b:
        f, w, p, q = next_field(buf, pos, b)
        if f == 1 and (w == 0 or w == 2):
            r = p
            while r < q:
                v, r = get_varint(buf, r, q)
                out[j] = v
                x = out[j]
                # (int64's range as floats: -2**63 is exact, 2**63 is past the end)
                if not (-9223372036854775808.0 <= x < 9223372036854775808.0) or \
                        np.int64(x) != v:
                    return j, v
                j += 1
                if w == 0:
                    break
        pos = q
    return j, np.int64(-1)


@njit
def _put_floats(buf, a, b, out_u8, j):
    """FloatList body buf[a:b] -> the float32 bytes of out[j:]; the next j."""
    pos = a
    while pos < b:
        f, w, p, q = next_field(buf, pos, b)
        if f == 1 and (w == 5 or w == 2):
            dst = out_u8[4 * j:4 * j + (q - p)]
            src = buf[p:q]
            for m in range(q - p):
                dst[m] = src[m]
            j += (q - p) // 4
        pos = q
    return j


@njit
def read_ints(buf, kinds, starts, ends, k, counts, rows, out):
    """Counting and filling in one pass over the bodies, where the spec wants int64:
    counts[i] = values of key k in record i (-1 when absent), rows[i + 1] = rows[i] + them,
    and the values into out[rows[i]:rows[i + 1]]. out holds at least the body bytes of every
    record whose list is an Int64List (a value takes a byte or more). Validates as
    count_values does; returns (code, record, kind) with its codes."""
    j = 0
    rows[0] = 0
    for i in range(kinds.shape[0]):
        kind = kinds[i, k]
        a, b = starts[i, k], ends[i, k]
        if kind < 0:
            counts[i] = -1
        elif kind != INT:  # an error unless its list is empty
            c, _, code, _ = count_list(buf, kind, a, b)
            if code != OK:
                return code, i, 0
            if c > 0:
                return WRONG_TYPE, i, kind
            counts[i] = 0
        else:
            at = _put_ints(buf, a, b, out, j)
            if at < 0:
                return MALFORMED, i, 0
            counts[i] = at - j
            j = at
        rows[i + 1] = j
    return OK, 0, 0


@njit
def fill_floats(buf, kinds, starts, ends, k, rows, out, out_u8):
    """Floats as their 4 bytes into out_u8 (a uint8 view of out); Int64Lists converted where
    float32 holds their values exactly. Returns (OK, 0, 0), or (INEXACT, record, value)."""
    for i in range(kinds.shape[0]):
        kind = kinds[i, k]
        if kind == FLOAT:
            _put_floats(buf, starts[i, k], ends[i, k], out_u8, rows[i])
        elif kind == INT:
            _, v = _put_ints_exactly(buf, starts[i, k], ends[i, k], out, rows[i])
            if v != -1:
                return INEXACT, i, v
    return OK, 0, np.int64(0)


@njit
def fill_bytes(buf, kinds, starts, ends, k, rows, data, data_offsets):
    """Each string into data; data_offsets[rows[i] + m] = where value m of record i starts.
    data ends in words.SLACK bytes past the strings' own: they are copied 8 bytes at a time where
    the buffer has 8 bytes past them, and the last word of a string may reach past its end."""
    pos_out = 0
    data_offsets[0] = 0
    for i in range(kinds.shape[0]):
        if kinds[i, k] != BYTES:
            continue
        j = rows[i]
        pos = starts[i, k]
        b = ends[i, k]
        while pos < b:
            if buf[_U(pos)] == 0x0A and pos + 1 < b and buf[_U(pos + 1)] < 0x80:  # a short string
                f, w, p, q = 1, 2, pos + 2, pos + 2 + np.int64(buf[_U(pos + 1)])
            else:
                f, w, p, q = next_field(buf, pos, b)
            if f == 1 and w == 2:
                pos_out = copy_bytes(data, pos_out, buf, p, q - p, True)
                j += 1
                data_offsets[j] = pos_out
            pos = q


@njit
def gather_spans(buf, spans, data):
    """The byte ranges spans[i] = (start, end) of buf, back to back into data."""
    pos_out = 0
    for i in range(spans.shape[0]):
        a, b = spans[i, 0], spans[i, 1]
        for m in range(b - a):
            data[pos_out + m] = buf[a + m]
        pos_out += b - a


@njit
def scalars_many(buf, kinds, starts, ends, ks, want, out, out_u8, valid):
    """The scalars of several features of one type that indexing did not read
    (example_index.index_records reads the one packed value every writer makes): for each
    record i and feature row j whose valid[j, i] is False, out[j, i] = feature ks[j]'s value
    and valid[j, i] = whether record i holds exactly one; out is (features, records) int64
    or float32, out_u8 its bytes per row. Returns (code, record, kind or count, j), j the
    feature's row: WRONG_TYPE, MALFORMED, BAD_FLOATS, TOO_MANY when a record holds several
    values, or INEXACT (with the value) for an int that float32 cannot hold exactly."""
    for i in range(kinds.shape[0]):
        for j in range(ks.shape[0]):
            if valid[j, i]:
                continue
            k = ks[j]
            kind = kinds[i, k]
            if kind < 0:
                continue
            a, b = starts[i, k], ends[i, k]
            c, _, code, p = count_list(buf, kind, a, b)
            if code != OK:
                return code, i, p, j
            if c == 0:
                continue
            if kind != want and not (want == FLOAT and kind == INT):
                return WRONG_TYPE, i, kind, j
            if c > 1:
                return TOO_MANY, i, c, j
            row = out[j]
            if kind == INT and want == FLOAT:
                _, v = _put_ints_exactly(buf, a, b, row, i)
                if v != -1:
                    return INEXACT, i, v, j
            elif kind == INT:
                _put_ints(buf, a, b, row, i)
            else:
                _put_floats(buf, a, b, out_u8[j], i)
            valid[j, i] = True
    return OK, 0, 0, 0
