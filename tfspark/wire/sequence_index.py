"""Compiled kernels that index the feature_lists of tf.train.SequenceExample records: for each
record and feature-list key, where its FeatureList is, and then where each step's list is. The
context is indexed by example_index.index_records (sequence=True); a step's list is read by
wire.example_read's kernels as if each step were a record, so values are read one way only.

Wire format read (any field order, unknown fields skipped, a later entry for a key wins)::

    SequenceExample = field 1 (len) Features, field 2 (len) FeatureLists
    FeatureLists    = repeated field 1 (len) Entry       # map<string, FeatureList>
    Entry           = field 1 (len) key, field 2 (len) FeatureList
    FeatureList     = repeated field 1 (len) Feature     # a step; an empty Feature is []

Every length is checked against its enclosing message, as in wire.example_index.
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.example_index import list_of, lookup_key
from tfspark.wire.jit import njit
from tfspark.wire.protobuf import MALFORMED, OK, map_entry, next_field


@njit
def index_lists(buf, offsets, head, tail, keys, key_offsets, table, starts, ends, unknown):
    """For record i and feature-list key k: starts/ends[i, k] = the byte range of its
    FeatureList (starts left at -1 when the record has no such key). unknown = (record, key
    start, key end) of the first key not in keys. Returns (code, record, byte position)."""
    for i in range(offsets.shape[0] - 1):
        pos = offsets[i] + head
        e = offsets[i + 1] - tail
        while pos < e:
            f, w, a, b = next_field(buf, pos, e)
            if f < 0:
                return MALFORMED, i, pos
            pos = b
            if f != 2 or w != 2:
                continue
            q = a
            while q < b:
                f2, w2, a2, b2 = next_field(buf, q, b)
                if f2 < 0:
                    return MALFORMED, i, q
                q = b2
                if f2 != 1 or w2 != 2:
                    continue
                bad, ks, ke, vs, ve = map_entry(buf, a2, b2)
                if bad >= 0:
                    return MALFORMED, i, bad
                k = lookup_key(buf, ks, ke, keys, key_offsets, table)
                if k < 0:
                    if unknown[0] < 0:
                        unknown[0], unknown[1], unknown[2] = i, ks, ke
                    continue
                starts[i, k] = vs
                ends[i, k] = ve
    return OK, 0, 0


@njit
def count_steps(buf, starts, ends, k, counts):
    """counts[i] = steps in record i's list of key k (-1 when absent). Returns (code, record,
    position)."""
    for i in range(starts.shape[0]):
        if starts[i, k] < 0:
            counts[i] = -1
            continue
        c = 0
        pos, e = starts[i, k], ends[i, k]
        while pos < e:
            f, w, _, q = next_field(buf, pos, e)
            if f < 0:
                return MALFORMED, i, pos
            if f == 1 and w == 2:
                c += 1
            pos = q
        counts[i] = c
    return OK, 0, 0


@njit
def index_steps(buf, starts, ends, k, row_steps, kinds, step_starts, step_ends):
    """For step s of key k (record i's steps are row_steps[i]..row_steps[i+1]): kinds[s, 0],
    step_starts / step_ends[s, 0] = its list, as index_records gives an Example's (an empty
    Feature is NONE, an empty list). Returns (code, record, position)."""
    for i in range(starts.shape[0]):
        if starts[i, k] < 0:
            continue
        s = row_steps[i]
        pos, e = starts[i, k], ends[i, k]
        while pos < e:
            f, w, p, q = next_field(buf, pos, e)
            if f == 1 and w == 2:
                kind, a, b = list_of(buf, p, q)
                if kind < 0:
                    return MALFORMED, i, a
                kinds[s, 0] = kind
                step_starts[s, 0] = a
                step_ends[s, 0] = b
                s += 1
            pos = q
    return OK, 0, 0


def list_index(n: int, nkeys: int) -> tuple[np.ndarray, np.ndarray]:
    """Empty (starts, ends) for index_lists: every key absent."""
    return np.full((n, nkeys), -1, np.int64), np.zeros((n, nkeys), np.int64)
