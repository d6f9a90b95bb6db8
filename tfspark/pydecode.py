"""Serialized tf.train.Example -> Python values, one record at a time, in pure Python.

For inspecting records (`tfspark inspect`), schema inference (infer.py) and tests; no protobuf,
no TensorFlow. The Spark reader uses the vectorized decoder in decode.py, which re-exports
these functions. Wire format: see unwire.py; unknown fields are skipped, as protobuf parsers
do, and a later entry for the same key wins.
"""

from __future__ import annotations

import struct
from typing import Any

from tfspark.errors import CorruptRecordError
from tfspark.spec import Feature, FeatureSpec

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_STRING_TYPES = ("string", "char", "varchar")


def decode_example(data: bytes | bytearray | memoryview) -> dict[str, list]:
    """{key: list of int | float | bytes} for one serialized tf.train.Example."""
    buf = memoryview(data).cast("B")
    out: dict[str, list] = {}
    for field, wire, pos, end in _fields(buf, 0, len(buf)):
        if field == 1 and wire == _LEN:
            for f2, w2, p2, e2 in _fields(buf, pos, end):
                if f2 == 1 and w2 == _LEN:
                    key, values = _entry(buf, p2, e2)
                    out[key] = values
    return out


def decode_with_spec(data: bytes | bytearray | memoryview, spec: FeatureSpec, *,
                     fill_defaults: bool = True) -> dict[str, Any]:
    """{feature name: value} in spec order, with the source's shapes rebuilt.

    Fixed shape [] -> a scalar, [n] -> a list, varlen -> a list, ragged -> a list of lists.
    An absent feature (a null) is None, or the spec's default for a nullable fixed feature when
    fill_defaults is true (what tf.io.parse_example fills in). Strings from string columns come
    back as str, binary as bytes, booleans as bool; dates and timestamps stay ints (days and
    microseconds since the epoch).
    """
    raw = decode_example(data)
    return {f.name: _value(f, raw, fill_defaults) for f in spec.features}


# ---------------------------------------------------------------- spec-aware values

def _value(f: Feature, raw: dict[str, list], fill_defaults: bool) -> Any:
    if f.kind == "ragged":
        values_key, lengths_key = f.keys
        if values_key not in raw and lengths_key not in raw:
            return None
        values = _convert(f, raw.get(values_key, []))
        lengths = raw.get(lengths_key, [])
        if any(n < 0 for n in lengths) or sum(lengths) != len(values):
            raise CorruptRecordError(f"feature {f.name!r}: row lengths {lengths} do not add up "
                                     f"to its {len(values)} values")
        out, start = [], 0
        for n in lengths:
            out.append(values[start:start + n])
            start += n
        return out
    if f.name not in raw:
        if f.kind == "fixed" and fill_defaults and f.default is not None:
            fill = _convert(f, [f.default.encode() if isinstance(f.default, str)
                                else f.default])[0]
            return [fill] * f.shape[0] if f.shape else fill
        return None
    values = _convert(f, raw[f.name])
    if f.kind == "fixed":
        want = f.shape[0] if f.shape else 1
        if len(values) != want:
            raise CorruptRecordError(f"feature {f.name!r} has {len(values)} values but the spec "
                                     f"fixes its shape to {list(f.shape)}")
        return values if f.shape else values[0]
    return values


def _convert(f: Feature, values: list) -> list:
    kinds = {"int64": int, "float32": float, "string": bytes}
    bad = [v for v in values if not isinstance(v, kinds[f.dtype])]
    if bad:
        raise CorruptRecordError(f"feature {f.name!r} should hold {f.dtype} values but holds "
                                 f"{type(bad[0]).__name__}")
    if f.encoding == "bool":
        return [bool(v) for v in values]
    if f.dtype == "string" and _leaf_type(f.source_type).startswith(_STRING_TYPES):
        try:
            return [bytes(v).decode("utf-8") for v in values]
        except UnicodeDecodeError:
            return values  # not UTF-8 after all: show the bytes rather than fail
    return values


def _leaf_type(source_type: str) -> str:
    while source_type.startswith("array<"):
        source_type = source_type[len("array<"):-1]
    return source_type


# ---------------------------------------------------------------- wire format

def _entry(buf: memoryview, pos: int, end: int) -> tuple[str, list]:
    key = b""
    values: list = []
    for field, wire, p, e in _fields(buf, pos, end):
        if field == 1 and wire == _LEN:
            key = bytes(buf[p:e])
        elif field == 2 and wire == _LEN:
            values = _feature(buf, p, e)
    try:
        return key.decode("utf-8"), values
    except UnicodeDecodeError:
        raise CorruptRecordError(f"feature key at byte {pos} is not UTF-8: {key!r}",
                                 offset=pos) from None


def _feature(buf: memoryview, pos: int, end: int) -> list:
    values: list = []
    for field, wire, p, e in _fields(buf, pos, end):
        if wire != _LEN or field not in (1, 2, 3):
            continue
        values = []  # a later list replaces an earlier one (last one of a oneof wins)
        for f2, w2, p2, e2 in _fields(buf, p, e):
            if f2 != 1:
                continue
            if field == 1 and w2 == _LEN:
                values.append(bytes(buf[p2:e2]))
            elif field == 2:
                values.extend(_floats(buf, w2, p2, e2))
            elif field == 3:
                values.extend(_ints(buf, w2, p2, e2))
    return values


def _floats(buf: memoryview, wire: int, pos: int, end: int) -> list[float]:
    if wire == _I32:
        return [struct.unpack_from("<f", buf, pos)[0]]
    if wire != _LEN or (end - pos) % 4:
        raise CorruptRecordError(f"malformed float list at byte {pos}", offset=pos)
    return list(struct.unpack_from(f"<{(end - pos) // 4}f", buf, pos))


def _ints(buf: memoryview, wire: int, pos: int, end: int) -> list[int]:
    if wire == _VARINT:
        return [_signed(_varint_at(buf, pos, end))]
    if wire != _LEN:
        raise CorruptRecordError(f"malformed int64 list at byte {pos}", offset=pos)
    out = []
    while pos < end:
        v, pos = _varint(buf, pos, end)
        out.append(_signed(v))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _fields(buf: memoryview, pos: int, end: int):
    """Yield (field number, wire type, start, end) of each field's payload in buf[pos:end].

    For varint and fixed-width fields the payload range covers the value's bytes.
    """
    while pos < end:
        start = pos
        tag, pos = _varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise CorruptRecordError(f"invalid field number 0 at byte {start}", offset=start)
        if wire == _VARINT:
            _, after = _varint(buf, pos, end)
        elif wire == _I64:
            after = pos + 8
        elif wire == _I32:
            after = pos + 4
        elif wire == _LEN:
            n, pos = _varint(buf, pos, end)
            after = pos + n
        else:
            raise CorruptRecordError(f"unsupported wire type {wire} at byte {start}",
                                     offset=start)
        if after > end:
            raise CorruptRecordError(f"field {field} at byte {start} runs past the end of its "
                                     f"message (byte {end}): truncated or corrupt record",
                                     offset=start)
        yield field, wire, pos, after
        pos = after


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    start = pos
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if shift >= 63 and result >= 1 << 64:
                break
            return result, pos
        shift += 7
        if shift >= 70:
            break
    raise CorruptRecordError(f"malformed or truncated varint at byte {start}", offset=start)


def _varint_at(buf: memoryview, pos: int, end: int) -> int:
    return _varint(buf, pos, end)[0]
