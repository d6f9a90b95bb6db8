"""CRC-32C (Castagnoli), which TFRecord framing checks twice per record, and its mask.

Slicing-by-8 tables, compiled (about 1.7 GB/s on one core): the framing kernels' CRC where the
CPU has no crc32 instruction (wire.crc_hw has the instruction and the choice). In a module of
its own, apart from the framing kernels that call it: measured with bench/bench_sequence.py,
the same code compiled in wire.tfrecord made the SequenceExample encoder ~15% slower (24.5x vs
29.3x the per-row protos).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tfspark.wire.jit import njit


@njit
def masked(c):
    """TFRecord's mask of a CRC-32C value c (an int64 holding 32 bits)."""
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc(data: bytes | memoryview) -> int:
    """Masked CRC-32C of data, as TFRecord stores it."""
    return int(masked(crc32c_lib().crc32c(data)))


@functools.cache
def crc32c_lib() -> Any:
    """The crc32c package, imported at first use: its import looks its own version up in the
    installed distributions, 0.03-0.2 s that a write task (whose kernels frame and check the
    records) never needs."""
    import crc32c

    return crc32c


def _crc_tables() -> np.ndarray:
    """Slicing-by-8 tables for reflected CRC-32C: row k maps a byte followed by k zeros."""
    poly = np.uint32(0x82F63B78)
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ poly, t >> 1).astype(np.uint32)
    tables = np.empty((8, 256), dtype=np.uint32)
    tables[0] = t
    for k in range(1, 8):
        prev = tables[k - 1]
        tables[k] = (prev >> 8) ^ t[prev & 0xFF]
    return tables


TABLES = _crc_tables()

# All kernel arithmetic is int64: numba widens uint32 to uint64, and uint64 mixed with
# int64 literals becomes float64, which would silently break the CRC. Loops index sub-views
# with range() counters: numba then can drop its negative-index wraparound code, which makes
# the CRC ~25% and the copy ~5x faster than indexing the whole buffer with computed offsets.


@njit
def _step8(c, b0, b1, b2, b3, b4, b5, b6, b7, t):
    """One slicing-by-8 step: the CRC state after eight more bytes."""
    c ^= np.int64(b0) | (np.int64(b1) << 8) | (np.int64(b2) << 16) | (np.int64(b3) << 24)
    return (np.int64(t[7, c & 0xFF]) ^ np.int64(t[6, (c >> 8) & 0xFF])
            ^ np.int64(t[5, (c >> 16) & 0xFF]) ^ np.int64(t[4, c >> 24])
            ^ np.int64(t[3, b4]) ^ np.int64(t[2, b5]) ^ np.int64(t[1, b6]) ^ np.int64(t[0, b7]))


@njit
def crc32c(buf, start, end, t):
    """CRC-32C of buf[start:end] (t: TABLES)."""
    v = buf[start:end]
    c = np.int64(0xFFFFFFFF)
    m = (end - start) >> 3
    for j in range(m):
        k = j * 8
        c = _step8(c, v[k], v[k + 1], v[k + 2], v[k + 3], v[k + 4], v[k + 5], v[k + 6], v[k + 7], t)
    for k in range(m * 8, end - start):
        c = np.int64(t[0, (c ^ np.int64(v[k])) & 0xFF]) ^ (c >> 8)
    return c ^ 0xFFFFFFFF
