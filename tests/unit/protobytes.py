"""Hand-built protobuf bytes for the decoder tests: tf.train.Example pieces written field by
field, so tests can make records no writer would (unpacked lists, unknown fields, any order)."""

from __future__ import annotations

import struct

import numpy as np


def varint(v: int) -> bytes:
    """The varint of v (negatives as 64-bit two's complement, 10 bytes)."""
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def entry(key: bytes, feature: bytes, value_first: bool = False) -> bytes:
    """One map entry of Features (key = 1, value = 2), in either order."""
    parts = [ld(1, key), ld(2, feature)]
    return ld(1, b"".join(parts[::-1] if value_first else parts))


def example(*entries: bytes, extra: bytes = b"") -> bytes:
    """An Example holding these entries, then `extra` raw bytes (e.g. an unknown field)."""
    return ld(1, b"".join(entries)) + extra


def ints_unpacked(*vs: int) -> bytes:
    """A Feature whose Int64List holds vs as unpacked varint fields."""
    return ld(3, b"".join(b"\x08" + varint(v) for v in vs))


def ints_packed(*vs: int) -> bytes:
    """A Feature whose Int64List holds vs packed."""
    return ld(3, ld(1, b"".join(varint(v) for v in vs)))


def floats_unpacked(*vs: float) -> bytes:
    """A Feature whose FloatList holds vs as unpacked fixed32 fields."""
    return ld(2, b"".join(b"\x0d" + struct.pack("<f", v) for v in vs))


def byte_list(*vs: bytes) -> bytes:
    """A Feature whose BytesList holds vs."""
    return ld(1, b"".join(ld(1, v) for v in vs))


def records(*recs: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The records back to back, with their n+1 offsets (what decode_records takes)."""
    offsets = np.cumsum([0] + [len(r) for r in recs]).astype(np.int64)
    return np.frombuffer(b"".join(recs) or b"\0", np.uint8), offsets
