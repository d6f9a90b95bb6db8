"""CRC-32C in the framing kernels (the scan that reads records back, and the framing of records
written): the x86 crc32 instruction (SSE4.2) through llvmlite intrinsics where the CPU has it,
else wire.crc's tables (tfrecord.scan_frames then checks records of BIG_RECORD bytes or more with
the crc32c package after the scan).

With the instruction, the scan checks every record's data CRC itself, with the GIL released,
instead of leaving records of BIG_RECORD bytes or more to a Python loop over the crc32c package
(which held the GIL for each: 30% of the GIL's time in read_batches on 180 KB blocks).
Three lanes of LANE bytes run at once (the instruction's latency is 3 cycles, its throughput 1
a cycle) and are joined with SHIFT, the register's advance over LANE zero bytes as 4 byte
tables: 15-20 GB/s on one core here (as the crc32c package), against 6 GB/s for one lane and
1.5 GB/s for the tables (bench/bench_crc.py). The encoders gain too (bench_encode.py,
bench_sequence.py: 1.1-1.4x), where the tables were a fifth of the SequenceExample encoder's time.
"""

from __future__ import annotations

import platform
from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils, config
from numba.extending import intrinsic

from tfspark.wire.crc import TABLES, crc32c
from tfspark.wire.jit import njit
from tfspark.wire.words import load_u64


def _has_instruction() -> bool:
    """Whether numba compiles for an x86 CPU with SSE4.2: the host's, unless NUMBA_CPU_NAME or
    NUMBA_CPU_FEATURES name another (portable caches use "generic", which has none)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    name, chosen = getattr(config, "CPU_NAME", None), getattr(config, "CPU_FEATURES", None)
    if name is not None or chosen is not None:
        features = chosen or ""
    else:
        import llvmlite.binding as ll

        features = ll.get_host_cpu_features().flatten()
    return "+sse4.2" in features.split(",")


AVAILABLE = _has_instruction()
LANE = 4096  # bytes per lane: records of 3 * LANE bytes or more run on three lanes


def _zeros_tables(nbytes: int) -> np.ndarray:
    """(4, 256) uint32: row k, byte b -> the raw register b << 8k advanced over nbytes zero
    bytes (the advance is linear, so a register's is the XOR of its 4 bytes')."""
    bit = np.uint32(1) << np.arange(32, dtype=np.uint32)
    one = TABLES[0][bit & 0xFF] ^ (bit >> 8)  # each bit's register after one zero byte

    def apply(op: np.ndarray, x: np.ndarray) -> np.ndarray:  # op's columns, x's bits
        on = (x[:, None] >> np.arange(32, dtype=np.uint32)) & 1
        return np.bitwise_xor.reduce(np.where(on == 1, op[None, :], np.uint32(0)), axis=1)

    result, power, n = bit.copy(), one, nbytes  # identity, then by squaring
    while n:
        if n & 1:
            result = apply(power, result)
        power, n = apply(power, power), n >> 1
    byte = np.arange(256, dtype=np.uint32)
    return np.stack([apply(result, byte << np.uint32(8 * k)) for k in range(4)]).astype(np.uint32)


SHIFT = _zeros_tables(LANE)


def _crc_step(reg: int, word: int) -> Any:
    """An intrinsic: the crc32 instruction on a `reg`-bit register and a `word`-bit word."""
    name = f"llvm.x86.sse42.crc32.{reg}.{word}"
    sig = getattr(types, f"uint{reg}")(getattr(types, f"uint{reg}"), getattr(types, f"uint{word}"))

    def typer(typingctx, crc, data):
        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir.IntType(reg), [ir.IntType(reg), ir.IntType(word)])
            return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), args)
        return sig, codegen
    typer.__name__ = f"crc32_{reg}_{word}"  # (numba names the intrinsic after it)
    return intrinsic(typer)


_crc_u64 = _crc_step(64, 64)  # 8 bytes at a time
_crc_u32 = _crc_step(32, 32)  # the last few
_crc_u16 = _crc_step(32, 16)
_crc_u8 = _crc_step(32, 8)


@njit
def _advance(c, s):
    """The raw register c advanced over LANE zero bytes (s: SHIFT)."""
    x = np.int64(c)  # (uint64 with int64 literals would become float64)
    return np.uint64(s[0, x & 0xFF] ^ s[1, (x >> 8) & 0xFF] ^ s[2, (x >> 16) & 0xFF]
                     ^ s[3, (x >> 24) & 0xFF])


@njit
def _crc_instruction(buf, start, end):
    """CRC-32C of buf[start:end] (a uint8 array) by the crc32 instruction, as an int64."""
    c = np.uint64(0xFFFFFFFF)
    p = start
    s = SHIFT
    while end - p >= 3 * LANE:  # three lanes at once, joined: c(A B C) = adv(adv(a) ^ b) ^ c
        b = np.uint64(0)
        d = np.uint64(0)
        for k in range(p, p + LANE, 8):
            c = _crc_u64(c, load_u64(buf, k))
            b = _crc_u64(b, load_u64(buf, k + LANE))
            d = _crc_u64(d, load_u64(buf, k + 2 * LANE))
        c = _advance(_advance(c, s) ^ b, s) ^ d
        p += 3 * LANE
    while end - p >= 8:
        c = _crc_u64(c, load_u64(buf, p))
        p += 8
    r = np.uint32(c)
    while p < end:
        r = _crc_u8(r, buf[p])
        p += 1
    return np.int64(r) ^ 0xFFFFFFFF


@njit
def _crc_rest(c, buf, p, end):
    """The raw register c (uint64) over buf[p:end], 8 bytes at a step, then 4, 2 and 1: three
    steps at most where a byte a step would take up to seven, each behind the one before."""
    while end - p >= 8:
        c = _crc_u64(c, load_u64(buf, p))
        p += 8
    r = np.uint32(c)
    if end - p >= 4:
        r = _crc_u32(r, np.uint32(buf[p]) | (np.uint32(buf[p + 1]) << np.uint32(8))
                     | (np.uint32(buf[p + 2]) << np.uint32(16))
                     | (np.uint32(buf[p + 3]) << np.uint32(24)))
        p += 4
    if end - p >= 2:
        r = _crc_u16(r, np.uint16(buf[p]) | (np.uint16(buf[p + 1]) << np.uint16(8)))
        p += 2
    if end - p:
        r = _crc_u8(r, buf[p])
    return r


@njit
def crc_three(buf, a, na, b, nb, c, nc):
    """CRC-32C of buf[a:a + na], buf[b:b + nb] and buf[c:c + nc] (int64s), their words taken in
    turn while all three have some: the instruction takes 3 cycles and starts one a cycle, so
    three chains run in the time of one (the framing of many small records)."""
    ra = rb = rc = np.uint64(0xFFFFFFFF)
    m = min(na, nb, nc) // 8 * 8
    for k in range(0, m, 8):
        ra = _crc_u64(ra, load_u64(buf, a + k))
        rb = _crc_u64(rb, load_u64(buf, b + k))
        rc = _crc_u64(rc, load_u64(buf, c + k))
    return (np.int64(_crc_rest(ra, buf, a + m, a + na)) ^ 0xFFFFFFFF,
            np.int64(_crc_rest(rb, buf, b + m, b + nb)) ^ 0xFFFFFFFF,
            np.int64(_crc_rest(rc, buf, c + m, c + nc)) ^ 0xFFFFFFFF)


@njit
def crc_length(n):
    """CRC-32C of int64 n's 8 bytes, little-endian (a record's length field)."""
    return np.int64(np.uint32(_crc_u64(np.uint64(0xFFFFFFFF), np.uint64(n)))) ^ 0xFFFFFFFF


@njit
def _crc_tables(buf, start, end):
    """CRC-32C of buf[start:end] (a uint8 array) by the tables, as an int64."""
    return crc32c(buf, start, end, TABLES)


# the framing kernels' CRC: only the chosen one is ever compiled (the intrinsics exist on x86 only)
frame_crc = _crc_instruction if AVAILABLE else _crc_tables
