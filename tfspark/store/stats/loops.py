"""The per-value work of the write tasks' statistics sketches, compiled: the moments and NaN
counts of numbers, the HyperLogLog's register updates, the longest string. The sketches
(tfspark.store.stats.sketch) import this where a task folds values in, so the driver, which
only merges them, loads no compiler.
"""

from __future__ import annotations

import numpy as np

from tfspark.arrow.hashing import splitmix
from tfspark.wire.jit import njit
from tfspark.wire.words import leading_zeros


@njit
def fold_numbers(x, nonfinite, out):  # pragma: no cover - compiled
    """One pass over x (int64 or float64): NaN and infinities counted (where nonfinite), the
    finite values copied to out as float64 with their count, sum, min and max; a second over
    those for the squared deviations from their mean (two passes: exact where one would
    cancel). Returns (nan, +inf, -inf, finite count, mean, M2, min, max)."""
    nan = pos_inf = neg_inf = n = 0
    total = 0.0
    lo, hi = np.inf, -np.inf
    for i in range(x.shape[0]):
        v = np.float64(x[i])
        if nonfinite:
            if v != v:
                nan += 1
                continue
            if v == np.inf:
                pos_inf += 1
                continue
            if v == -np.inf:
                neg_inf += 1
                continue
        out[n] = v
        n += 1
        total += v
        lo = min(lo, v)
        hi = max(hi, v)
    mean = total / n if n else 0.0
    m2 = 0.0
    for i in range(n):
        d = out[i] - mean
        m2 += d * d
    return nan, pos_inf, neg_inf, n, mean, m2, lo, hi


@njit
def hll_add(registers, keys, lg_k):  # pragma: no cover - compiled
    """Each 64-bit key (an integer's bits, or a string's FNV-1a) into a HyperLogLog of
    2**lg_k registers: splitmix64's finalizer (as split keys are hashed) mixes it, its top
    lg_k bits pick a register, and the register keeps the largest rank (leading zeros + 1 of
    the other bits, 64 - lg_k + 1 when they are all zero) seen. The rank is one instruction on
    the other bits shifted to the top, a 1 below them ending the count where they end."""
    lg = np.uint64(lg_k)
    low_bits = np.uint64(64) - lg
    stop = np.uint64(1) << (lg - np.uint64(1))
    for i in range(keys.shape[0]):
        x = splitmix(keys[i])
        index = x >> low_bits
        rank = np.uint8(leading_zeros((x << lg) | stop) + np.uint64(1))
        registers[index] = max(registers[index], rank)


@njit
def max_chars(data, offsets, at_least):  # pragma: no cover - compiled
    """The most characters (code points) of a UTF-8 value (value i: data[offsets[i]:
    offsets[i + 1]]), or at_least: only values of more bytes than that are counted."""
    best = at_least
    for i in range(offsets.shape[0] - 1):
        a, b = offsets[i], offsets[i + 1]
        if b - a > best:
            chars = 0
            for j in range(a, b):
                chars += (data[j] & 0xC0) != 0x80  # not a continuation byte
            best = max(best, chars)
    return best
