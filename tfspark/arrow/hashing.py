"""64-bit hashes of Arrow values, the same in every process and run: what splits rows by a key
(write_dataset's split_key) and what counts distinct values (the statistics' HyperLogLog) hash.

Integers are hashed by splitmix64's finalizer (`splitmix`; `mix` of an array); strings and
bytes by 64-bit FNV-1a over their bytes (`fnv`), compiled. A change here moves rows between
splits of data sets already written, so these functions stay as they are.

And equal strings found by hashing (`distinct_strings`): each string numbered by the first
occurrence of its value, in one compiled pass, where a column repeats few values (a category):
what the NumPy reader makes one string object per value from, and the statistics count from.
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.jit import njit
from tfspark.wire.words import load_u64


@njit
def splitmix(x):  # pragma: no cover - compiled
    """splitmix64's finalizer of one uint64: every input bit moves every output bit."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit
def _mix_each(x):  # pragma: no cover - compiled
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = splitmix(x[i])
    return out


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix of each value of a 1-d uint64 array."""
    return _mix_each(np.ascontiguousarray(x, np.uint64))


@njit
def fnv(data, offsets):  # pragma: no cover - compiled
    """64-bit FNV-1a of each value data[offsets[i]:offsets[i + 1]]."""
    n = offsets.shape[0] - 1
    out = np.empty(n, np.uint64)
    for i in range(n):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = h
    return out


@njit
def distinct_strings(blob, offs, cap):
    """Strings given as (bytes, offsets), numbered by first occurrence: (codes, firsts, m) with
    codes[i] the number of string i and firsts[k] the index of the k-th distinct string's first
    occurrence, m of them; m = -1 as soon as more than `cap` are distinct, or more than 3 in 4
    of the first 2,048 (a column of mostly distinct values, given up early). A linear-probing
    table, doubled as it fills, whose slots hold a string's first 8 bytes as one word, its
    length and its number: only strings longer than 8 bytes are compared byte by byte."""
    n = offs.size - 1
    bits = 6
    slots = np.full(2 << bits, -1, np.int64)  # (head, length << 32 | number); -1: empty
    firsts = np.empty(max(cap, 1), np.int64)
    hashes = np.empty(max(cap, 1), np.uint64)
    codes = np.empty(n, np.int32)
    m = 0
    end = blob.size
    for i in range(n):
        if i == _EARLY and 4 * m > 3 * _EARLY:
            return codes, firsts, -1
        a = np.int64(offs[i])
        length = np.int64(offs[i + 1]) - a
        if a + 8 <= end:  # the word at a, its bytes past the string masked off
            w = load_u64(blob, a) & _HEAD_MASK[min(length, 8)]
        else:
            w = np.uint64(0)
            for k in range(min(length, 8)):
                w |= np.uint64(blob[a + k]) << np.uint64(8 * k)
        h = w ^ (np.uint64(length) * np.uint64(0xC2B2AE3D27D4EB4F))
        for k in range(8, length):
            h = (h ^ np.uint64(blob[a + k])) * np.uint64(0x100000001B3)
        h *= np.uint64(0x9E3779B97F4A7C15)
        head = np.int64(w)
        slot = np.int64(h >> np.uint64(64 - bits))
        while True:
            held = slots[2 * slot + 1]
            if held < 0:
                if m == cap:
                    return codes, firsts, -1
                slots[2 * slot] = head
                slots[2 * slot + 1] = (length << 32) | m
                firsts[m] = i
                hashes[m] = h
                codes[i] = m
                m += 1
                if 2 * m > (1 << bits):  # over half full: twice the slots
                    bits += 1
                    slots = _rehashed(slots, bits, hashes)
                break
            if slots[2 * slot] == head and (held >> 32) == length:
                c = np.int32(held & 0xFFFFFFFF)
                same = True
                if length > 8:
                    j = offs[firsts[c]]
                    for k in range(8, length):
                        if blob[j + k] != blob[a + k]:
                            same = False
                            break
                if same:
                    codes[i] = c
                    break
            slot = (slot + 1) & ((1 << bits) - 1)
    return codes, firsts, m


@njit
def _rehashed(slots, bits, hashes):
    """The slots of a distinct_strings table moved into a table of 2**bits slots."""
    out = np.full(2 << bits, -1, np.int64)
    mask = (1 << bits) - 1
    for s in range(slots.size // 2):
        held = slots[2 * s + 1]
        if held >= 0:
            t = np.int64(hashes[held & 0xFFFFFFFF] >> np.uint64(64 - bits))
            while out[2 * t + 1] >= 0:
                t = (t + 1) & mask
            out[2 * t] = slots[2 * s]
            out[2 * t + 1] = held
    return out


_EARLY = 2048  # strings after which a column of mostly distinct ones is given up
_HEAD_MASK = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], np.uint64)
