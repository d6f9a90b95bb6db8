"""The framing kernels' CRC-32C (crc_hw.frame_crc): the crc32 instruction's three lanes and
the tables both give the crc32c package's value for every length around the lanes' bounds,
from every alignment, and the byte tables that join the lanes are the advance over LANE zero
bytes."""

from __future__ import annotations

import crc32c
import numpy as np
import pytest

from tfspark.wire import crc_hw
from tfspark.wire.crc_hw import LANE

SIZES = [0, 1, 7, 8, 9, 100, 3 * LANE - 1, 3 * LANE, 3 * LANE + 1, 3 * LANE + 8, 6 * LANE,
         6 * LANE + 13, 100_003]
KINDS = ["tables", pytest.param("instruction", marks=pytest.mark.skipif(
    not crc_hw.AVAILABLE, reason="this CPU has no crc32 instruction (SSE4.2)"))]


@pytest.mark.parametrize("kind", KINDS)
def test_every_length_and_alignment(kind):
    crc = crc_hw._crc_instruction if kind == "instruction" else crc_hw._crc_tables
    rng = np.random.default_rng(7)
    for n in SIZES:
        buf = rng.integers(0, 256, n + 16, dtype=np.uint8)
        for start in range(9):
            want = crc32c.crc32c(buf[start:start + n].tobytes())
            assert crc(buf, start, start + n) == want, (kind, n, start)
    assert crc(np.zeros(3 * LANE, np.uint8), 0, 3 * LANE) == crc32c.crc32c(bytes(3 * LANE))


def test_join_tables_advance_over_lane_zero_bytes():
    # advancing the raw register over LANE zero bytes one byte at a time (the tables' rule)
    rng = np.random.default_rng(3)
    t0 = crc_hw.TABLES[0]
    for reg in [1, 0x80000000, *rng.integers(0, 2**32, 5).tolist()]:
        r = int(reg)
        for _ in range(LANE):
            r = int(t0[r & 0xFF]) ^ (r >> 8)
        s = crc_hw.SHIFT
        joined = int(s[0, reg & 0xFF] ^ s[1, (reg >> 8) & 0xFF] ^ s[2, (reg >> 16) & 0xFF]
                     ^ s[3, reg >> 24])
        assert joined == r
