"""Protobuf wire primitives shared by the Example writer and readers: the kind of a Feature's
list, varints and field walking. Kernels are numba-compiled; plain ints stand for the kinds so
they are compile-time constants inside kernels.

    Feature = one of 1 BytesList / 2 FloatList / 3 Int64List, as a length-delimited field
    tag     = (field number << 3) | wire type       wire types: 0 varint, 1 fixed64,
                                                    2 length-delimited, 5 fixed32
"""

from __future__ import annotations

import numpy as np

from tfspark.wire.jit import njit
from tfspark.wire.words import leading_zeros, load_u64, store_u64, trailing_zeros
from tfspark.wire.words import unsigned as _U

# The kind of a Feature's list is its field number in the Feature message; NONE: no list.
NONE, BYTES, FLOAT, INT = 0, 1, 2, 3
KIND_NAMES = {BYTES: "bytes", FLOAT: "float", INT: "int64"}
KIND_OF_DTYPE = {"int64": INT, "float32": FLOAT, "string": BYTES}
LEN = 2  # wire type of length-delimited fields
# Error codes of the reading kernels (0 = fine); arrow.decode turns them into messages.
# FEATURE_LISTS: a record with field 2 at the top, a SequenceExample's feature_lists.
# INEXACT: an Int64List value read where float32 is wanted that float32 cannot hold exactly.
OK, MALFORMED, WRONG_TYPE, BAD_FLOATS, TOO_MANY, FEATURE_LISTS, INEXACT = 0, 1, 2, 3, 4, 5, 6


def list_tag(kind: int) -> int:
    """The tag byte of a Feature's list field of this kind (0x0A, 0x12 or 0x1A)."""
    return (kind << 3) | LEN


@njit
def varint_size(v):
    """Bytes of the protobuf varint of int64 v (10 for negatives: two's complement fills all
    64 bits), from its significant bits without a branch: a column of random sizes made the
    branches' guesses a third of the int64 writer's time."""
    return (np.int64(70) - np.int64(leading_zeros(np.uint64(v) | np.uint64(1)))) // 7


@njit
def put_varint(out, pos, v):
    """Write the varint of v at out[pos]; returns the position after it."""
    u = np.uint64(v)
    at = np.uint64(pos)  # (an unsigned index: no check for a negative one)
    while u >= np.uint64(0x80):
        out[at] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        at += np.uint64(1)
    out[at] = np.uint8(u)
    return pos + int(at - np.uint64(pos)) + 1


@njit
def put_varint_word(out, pos, v, n):
    """put_varint for v of n = varint_size(v) bytes, its first 8 bytes stored as one word: the
    7-bit groups spread to bytes with shifts and masks (varint_of_length's packing, reversed),
    the continuation bits or-ed in. Overwrites out[pos + n:pos + 8] too (up to 7 bytes after
    the varint, which the caller writes after), so out must have room for 8 bytes at pos."""
    u = np.uint64(v)
    x = u & np.uint64(0x00FFFFFFFFFFFFFF)
    x = (x & _HALVES[0]) | ((x & np.uint64(0x00FFFFFFF0000000)) << np.uint64(4))
    x = (x & _QUADS[0]) | ((x & np.uint64(0x0FFFC0000FFFC000)) << np.uint64(2))
    x = (x & _PAIRS[0]) | ((x & np.uint64(0x3F803F803F803F80)) << np.uint64(1))
    # bytes 9 and 10 (negatives take 10) as a word at pos + 8, or, for a shorter varint, at pos
    # to be overwritten by the first word: a store either way, not a branch
    rest = u >> np.uint64(56)
    tenth = np.uint64(n == 10) << np.uint64(7)  # the 9th byte's continuation bit
    last = (rest & np.uint64(0x7F)) | tenth | ((rest >> np.uint64(7)) << np.uint64(8))
    store_u64(out, pos + 8 * np.int64(n > 8), last)
    store_u64(out, pos, x | _CONT[n])
    return pos + n


@njit
def get_varint(buf, pos, end):
    """(value as int64 two's complement, position after it); position -1 if malformed (an
    11th byte, or a 10th byte over 1: a value past 64 bits, as the reference decoder has it)."""
    result = np.int64(0)
    shift = 0
    while pos < end:
        b = np.int64(buf[_U(pos)])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if shift == 63 and b > 1:
                return np.int64(0), -1
            return result, pos
        shift += 7
        if shift > 63:  # an 11th byte: not a varint
            return np.int64(0), -1
    return np.int64(0), -1


# varint_of_length's constants: per length n (1..10) of a varint, the continuation bits of
# its first 8 bytes, and which of those 8 bytes are its own
_ALL80 = np.uint64(0x8080808080808080)
_ALL7F = np.uint64(0x7F7F7F7F7F7F7F7F)
_PAIRS = (np.uint64(0x007F007F007F007F), np.uint64(0x7F007F007F007F00))
_QUADS = (np.uint64(0x00003FFF00003FFF), np.uint64(0x3FFF00003FFF0000))
_HALVES = (np.uint64(0x000000000FFFFFFF), np.uint64(0x0FFFFFFF00000000))
_CONT = np.array([sum(0x80 << (8 * m) for m in range(min(n - 1, 8))) if n else 0
                  for n in range(11)], np.uint64)
_OWN = np.array([(1 << (8 * min(n, 8))) - 1 for n in range(11)], np.uint64)


@njit
def varint_of_length(buf, pos, n):
    """(value, whether buf[pos:pos + n] is exactly one varint) for n in 1..10, as get_varint
    reads it, without a branch per byte (whose count a run of random-length varints makes
    unpredictable): the 7-bit groups of the first 8 bytes are packed with shifts and masks.
    buf[pos:pos + 10] must all be readable."""
    w = load_u64(buf, pos)
    last = load_u64(buf, pos + 2) >> np.uint64(48)  # bytes 8 and 9
    b8 = last & np.uint64(0xFF)
    b9 = last >> np.uint64(8)
    x = w & _OWN[_U(n)]
    ok = (x & _ALL80) == _CONT[_U(n)]  # every byte but the last continues (of the first 8)
    x = _pack7(x)
    past8 = np.uint64(n > 8)
    past9 = np.uint64(n > 9)
    x |= ((b8 & np.uint64(0x7F)) << np.uint64(56)) * past8
    x |= ((b9 & np.uint64(1)) << np.uint64(63)) * past9
    # (bitwise, not `and`: a branch on the length is what this avoids) the 9th byte continues
    # only where there is a 10th, which holds one bit at most
    ok = ok & ((n <= 8) | ((b8 >> np.uint64(7)) == past9)) & ((n < 10) | (b9 <= np.uint64(1)))
    return np.int64(x), ok


@njit
def get_varints(buf, p, q, out, j):
    """The packed varints of buf[p:q] into out[j:] (as get_varint reads each); the next j, or
    -1 where one is malformed or they do not end exactly at q. Where 10 bytes can be read, a
    varint's length comes from its first word (the first byte without a continuation bit,
    found by counting trailing zeros) and its 7-bit groups are packed with shifts and masks:
    no branch per byte; per value, only whether it takes more than 8 bytes (and then 9 or 10)."""
    r = p
    fast = min(q, buf.shape[0] - 10)  # (before it, buf[r:r + 10] is readable)
    while r < fast:
        w = load_u64(buf, r)
        stops = ~w & _ALL80
        if stops != np.uint64(0):
            n = np.int64(trailing_zeros(stops) >> np.uint64(3)) + 1
            x = _pack7(w & _OWN[_U(n)])
        else:  # 9 or 10 bytes (a negative number takes 10)
            last = load_u64(buf, r + 2) >> np.uint64(48)  # bytes 8 and 9
            b8, b9 = last & np.uint64(0xFF), last >> np.uint64(8)
            x = _pack7(w) | ((b8 & np.uint64(0x7F)) << np.uint64(56))
            n = 9
            if b8 >= np.uint64(0x80):
                if b9 > np.uint64(1):  # an 11th byte, or a value past 64 bits
                    return -1
                x |= b9 << np.uint64(63)
                n = 10
        out[_U(j)] = np.int64(x)
        j += 1
        r += n
    while r < q:
        v, r = get_varint(buf, r, q)
        if r < 0:
            return -1
        out[j] = v
        j += 1
    return j if r == q else -1


@njit
def _pack7(w):
    """The 7-bit groups of the 8 bytes of w packed into 56 bits (the first byte lowest)."""
    x = w & _ALL7F
    x = (x & _PAIRS[0]) | ((x & _PAIRS[1]) >> np.uint64(1))
    x = (x & _QUADS[0]) | ((x & _QUADS[1]) >> np.uint64(2))
    return (x & _HALVES[0]) | ((x & _HALVES[1]) >> np.uint64(4))


@njit
def next_field(buf, pos, end):
    """(field number, wire type, payload start, payload end) of the field at pos; field -1 if
    malformed. For a varint the payload is its bytes; for len fields the bytes after the length."""
    tag, p = get_varint(buf, pos, end)
    if p < 0 or tag <= 7 or tag > 0xFFFFFFFF:  # field 0, or a tag over 32 bits
        return -1, 0, 0, 0
    field = tag >> 3
    wire = tag & 7
    if wire == LEN:
        n, q = get_varint(buf, p, end)
        if q < 0 or n < 0 or n > end - q:
            return -1, 0, 0, 0
        return field, wire, q, q + n
    if wire == 0:
        _, q = get_varint(buf, p, end)
        if q < 0:
            return -1, 0, 0, 0
        return field, wire, p, q
    if wire == 1 and end - p >= 8:
        return field, wire, p, p + 8
    if wire == 5 and end - p >= 4:
        return field, wire, p, p + 4
    return -1, 0, 0, 0  # groups (3, 4), wire types 6 and 7, or a short fixed field


def varint_bytes(n: int) -> bytes:
    """The varint of a non-negative Python int (for headers built once, outside kernels)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@njit
def map_entry(buf, a, b):
    """A map entry buf[a:b] (key: field 1, value: field 2, both length-delimited, any order,
    the last of each wins): (position of a malformed field or -1, key start, key end, value
    start, value end). A missing key is "", a missing value empty."""
    ks = ke = vs = ve = a
    r = a
    while r < b:
        f, w, p, q = next_field(buf, r, b)
        if f < 0:
            return r, ks, ke, vs, ve
        if f == 1 and w == 2:
            ks, ke = p, q
        elif f == 2 and w == 2:
            vs, ve = p, q
        r = q
    return -1, ks, ke, vs, ve
