"""Compiled kernels that list every Feature entry of tf.train.Example records (and of
SequenceExamples: their context, and every step of their feature lists) without knowing their
keys in advance: for schema inference on files without a manifest.

For each entry of each record: the record, the key's byte range, the list's kind, its number
of values, and (for bytes lists) whether every value is valid UTF-8. Lengths are checked as in
wire.example_index; a malformed record stops the scan with its index.
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.example_index import list_of
from tfspark.wire.example_read import count_list
from tfspark.wire.jit import njit
from tfspark.wire.protobuf import (
    BYTES,
    FEATURE_LISTS,
    MALFORMED,
    NONE,
    OK,
    map_entry,
    next_field,
)


@njit
def _entries_of(buf, s, e, out, n, fill, rec, keys, kinds, counts, utf8, steps, sequence):
    """Walk one record buf[s:e]; count its entries into n, writing them when fill. Returns
    (code, n). sequence: a SequenceExample, whose feature lists give one entry per step
    (steps[n] = True; an empty list one entry of kind NONE); otherwise feature_lists stop the
    walk with FEATURE_LISTS."""
    pos = s
    while pos < e:
        f, w, a, b = next_field(buf, pos, e)
        if f < 0:
            return MALFORMED, n
        if f == 2 and w == 2:
            if not sequence:
                return FEATURE_LISTS, n
            code, n = _lists_of(buf, a, b, out, n, fill, rec, keys, kinds, counts, utf8, steps)
            if code != OK:
                return code, n
        pos = b
        if f != 1 or w != 2:
            continue
        q = a
        while q < b:
            f2, w2, a2, b2 = next_field(buf, q, b)
            if f2 < 0:
                return MALFORMED, n
            q = b2
            if f2 != 1 or w2 != 2:
                continue
            bad, ks, ke, vs, ve = map_entry(buf, a2, b2)
            if bad >= 0:
                return MALFORMED, n
            kind, la, lb = list_of(buf, vs, ve)  # the last list field of the Feature wins
            if kind < 0:
                return MALFORMED, n
            if fill:
                code = _put(buf, out, n, rec, keys, kinds, counts, utf8, ks, ke, kind, la, lb)
                if code != OK:
                    return code, n
                steps[n] = False
            n += 1
    return OK, n


@njit
def _put(buf, out, n, rec, keys, kinds, counts, utf8, ks, ke, kind, la, lb):
    """Write entry n: record, key range, list kind, values, UTF-8 or not."""
    c, _, code, _ = count_list(buf, kind, la, lb)
    if code != OK:
        return MALFORMED
    rec[n] = out
    keys[n, 0] = ks
    keys[n, 1] = ke
    kinds[n] = kind
    counts[n] = c
    utf8[n] = kind != BYTES or _utf8_list(buf, la, lb)
    return OK


@njit
def _lists_of(buf, a, b, out, n, fill, rec, keys, kinds, counts, utf8, steps):
    """The FeatureLists message buf[a:b]: an entry per step of each list. Returns (code, n)."""
    q = a
    while q < b:
        f2, w2, a2, b2 = next_field(buf, q, b)
        if f2 < 0:
            return MALFORMED, n
        q = b2
        if f2 != 1 or w2 != 2:
            continue
        bad, ks, ke, vs, ve = map_entry(buf, a2, b2)
        if bad >= 0:
            return MALFORMED, n
        t = vs
        first = n
        while t < ve:
            f4, w4, a4, b4 = next_field(buf, t, ve)
            if f4 < 0:
                return MALFORMED, n
            t = b4
            if f4 != 1 or w4 != 2:
                continue
            kind, la, lb = list_of(buf, a4, b4)
            if kind < 0:
                return MALFORMED, n
            if fill:
                if _put(buf, out, n, rec, keys, kinds, counts, utf8, ks, ke, kind, la,
                        lb) != OK:
                    return MALFORMED, n
                steps[n] = True
            n += 1
        if n == first:  # no steps: the key is still seen
            if fill:
                _put(buf, out, n, rec, keys, kinds, counts, utf8, ks, ke, NONE, vs, vs)
                steps[n] = True
            n += 1
    return OK, n


@njit
def scan_entries(buf, offsets, head, tail, fill, rec, keys, kinds, counts, utf8, steps,
                 sequence):
    """Count (fill=False) or list (fill=True) the entries of the records between offsets.
    Returns (code, record, entries): code MALFORMED or FEATURE_LISTS names the record."""
    n = 0
    for i in range(offsets.shape[0] - 1):
        code, n = _entries_of(buf, offsets[i] + head, offsets[i + 1] - tail, i, n, fill, rec,
                              keys, kinds, counts, utf8, steps, sequence)
        if code != OK:
            return code, i, n
    return OK, 0, n


@njit
def _utf8_list(buf, a, b):
    """Whether every value of a BytesList body is valid UTF-8."""
    pos = a
    while pos < b:
        f, w, p, q = next_field(buf, pos, b)
        if f == 1 and w == 2 and not _utf8(buf, p, q):
            return False
        pos = q
    return True


@njit
def _utf8(buf, a, b):
    """Whether buf[a:b] is valid UTF-8 (no overlong forms, no surrogates, <= U+10FFFF)."""
    i = a
    while i < b:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif c == 0xE0:
            need, lo, hi = 2, 0xA0, 0xBF
        elif 0xE1 <= c <= 0xEC or 0xEE <= c <= 0xEF:
            need, lo, hi = 2, 0x80, 0xBF
        elif c == 0xED:
            need, lo, hi = 2, 0x80, 0x9F
        elif c == 0xF0:
            need, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= c <= 0xF3:
            need, lo, hi = 3, 0x80, 0xBF
        elif c == 0xF4:
            need, lo, hi = 3, 0x80, 0x8F
        else:
            return False
        if i + need >= b:  # the sequence runs past the value
            return False
        if not lo <= buf[i + 1] <= hi:
            return False
        for k in range(2, need + 1):
            if not 0x80 <= buf[i + k] <= 0xBF:
                return False
        i += need + 1
    return True


def entries(buf: np.ndarray, offsets: np.ndarray, head: int, tail: int,
            sequence: bool = False) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray,
                                              np.ndarray, np.ndarray, np.ndarray]:
    """(code, bad record, rec, keys [n, 2], kinds, counts, utf8, steps) of every entry; steps:
    the entry is a step of a SequenceExample's feature list (only when sequence)."""
    empty = np.zeros(0, np.int64)
    none = np.zeros(0, np.bool_)
    code, bad, n = scan_entries(buf, offsets, head, tail, False, empty, np.zeros((0, 2),
                                np.int64), np.zeros(0, np.int8), empty, none, none, sequence)
    rec = np.empty(n, np.int64)
    keys = np.empty((n, 2), np.int64)
    kinds = np.empty(n, np.int8)
    counts = np.empty(n, np.int64)
    utf8 = np.empty(n, np.bool_)
    steps = np.empty(n, np.bool_)
    if code == OK:
        code, bad, _ = scan_entries(buf, offsets, head, tail, True, rec, keys, kinds, counts,
                                    utf8, steps, sequence)
    return code, bad, rec, keys, kinds, counts, utf8, steps
