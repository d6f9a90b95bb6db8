"""64-bit hashes of Arrow values, the same in every process and run: what splits rows by a key
(write_dataset's split_key) and what counts distinct values (the statistics' HyperLogLog) hash.

Integers are hashed by splitmix64's finalizer (`splitmix`; `mix` of an array); strings and
bytes by 64-bit FNV-1a over their bytes (`fnv`), compiled. A change here moves rows between
splits of data sets already written, so these functions stay as they are.
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.jit import njit


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
