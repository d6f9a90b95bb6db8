"""Serialized tf.train.Example (or SequenceExample) -> Python values, one record at a time, in
pure Python.

The reference decoder: for inspecting records (`tfspark inspect`), schema inference
(spark.infer), and as the oracle the compiled decoder (arrow.decode) is fuzzed against. It
is written independently of the kernels on purpose (its own varint and field walking), so the
two can check each other. No protobuf, no TensorFlow. Wire format: see wire.example_index;
unknown fields are skipped, as protobuf parsers do, and a later entry for the same key wins.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tfspark.errors import CorruptRecordError, SchemaError
from tfspark.spec.model import Feature, FeatureSpec

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_STRING_TYPES = ("string", "char", "varchar")


def decode_example(data: bytes | bytearray | memoryview) -> dict[str, list]:
    """{key: list of int | float | bytes} for one serialized tf.train.Example.

    Raises CorruptRecordError for malformed bytes or a key that is not UTF-8."""
    return _text_keys(_raw_example(data))


def decode_sequence_example(data: bytes | bytearray | memoryview
                            ) -> tuple[dict[str, list], dict[str, list[list]]]:
    """({context key: values}, {feature list key: [values of each step]}) for one serialized
    tf.train.SequenceExample (an Example reads as its context alone).

    Raises CorruptRecordError for malformed bytes or a key that is not UTF-8."""
    context, lists = _raw_record(data, sequence=True)
    return _text_keys(context), _text_keys(lists)


def _text_keys(raw: dict[tuple[bytes, int], Any]) -> dict[str, Any]:
    out = {}
    for (key, pos), values in raw.items():
        try:
            out[key.decode("utf-8")] = values
        except UnicodeDecodeError:
            raise CorruptRecordError(f"feature key at byte {pos} is not UTF-8: {key!r}",
                                     offset=pos) from None
    return out


def record_keys(data: bytes | bytearray | memoryview) -> set[str]:
    """The keys of an Example's features, or of a SequenceExample's context and feature lists
    (undecodable keys as escaped text)."""
    features, lists = _raw_record(data, sequence=True)
    return {k.decode("utf-8", "backslashreplace") for k, _ in (*features, *lists)}


def _raw_example(data: bytes | bytearray | memoryview) -> dict[tuple[bytes, int], list]:
    """{(raw key, entry position): values}; a later entry for a key replaces an earlier one."""
    return _raw_record(data, sequence=False)[0]


def _raw_record(data: bytes | bytearray | memoryview, sequence: bool
                ) -> tuple[dict[tuple[bytes, int], list], dict[tuple[bytes, int], list]]:
    """(context or Example features, feature lists) as {(raw key, entry position): values};
    without sequence, feature lists are refused."""
    buf = memoryview(data).cast("B")
    by_key: dict[bytes, tuple[int, list]] = {}
    lists: dict[bytes, tuple[int, list]] = {}
    for field, wire, pos, end in _fields(buf, 0, len(buf)):
        if field == 2 and wire == _LEN:
            if not sequence:
                raise SchemaError(f"the record is a tf.train.SequenceExample (feature_lists at "
                                  f"byte {pos}), not a tf.train.Example: read it as one "
                                  f"(recordType=SequenceExample)")
            for f2, w2, p2, e2 in _fields(buf, pos, end):
                if f2 == 1 and w2 == _LEN:
                    key, steps = _list_entry(buf, p2, e2)
                    lists[key] = (p2, steps)
        if field == 1 and wire == _LEN:
            for f2, w2, p2, e2 in _fields(buf, pos, end):
                if f2 == 1 and w2 == _LEN:
                    key, values = _entry(buf, p2, e2)
                    by_key[key] = (p2, values)
    return ({(k, pos): v for k, (pos, v) in by_key.items()},
            {(k, pos): v for k, (pos, v) in lists.items()})


def decode_with_spec(data: bytes | bytearray | memoryview, spec: FeatureSpec, *,
                     fill_defaults: bool = True) -> dict[str, Any]:
    """{feature name: value} in spec order, with the source's shapes rebuilt.

    Fixed shape [] -> a scalar, [n] -> a list, varlen -> a list, ragged and a SequenceExample's
    feature lists -> a list of lists.
    An absent feature (a null) is None, or the spec's default for a nullable fixed feature when
    fill_defaults is true (what tf.io.parse_example fills in). As the compiled decoder
    (arrow.decode) reads them: an empty list for a fixed scalar is absent too, and int64
    lists are read as float32 where the spec has floats and float32 holds their values
    exactly (refused otherwise). Strings from string columns come
    back as str, binary as bytes, booleans as bool; dates and timestamps stay ints (days and
    microseconds since the epoch).
    """
    # Keys are matched as bytes: a key that is not UTF-8 is no spec key, so it is skipped.
    context, lists = _raw_record(data, sequence=spec.is_sequence)
    raw = {key.decode("utf-8", "replace"): v for (key, _), v in context.items()
           if _is_utf8(key)}
    steps = {key.decode("utf-8", "replace"): v for (key, _), v in lists.items()
             if _is_utf8(key)}
    return {f.name: ([_convert(f, s) for s in steps[f.name]] if f.name in steps else None)
            if f.kind == "sequence" else _value(f, raw, fill_defaults) for f in spec.features}


def _is_utf8(key: bytes) -> bool:
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


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
    values = _convert(f, raw.get(f.name, []))
    if f.name not in raw or (f.kind == "fixed" and not f.shape and not values):
        if f.kind == "fixed" and fill_defaults and f.default is not None:
            fill = _convert(f, [f.default.encode() if isinstance(f.default, str)
                                else f.default])[0]
            return [fill] * f.shape[0] if f.shape else fill
        return None
    if f.kind == "fixed":
        want = f.shape[0] if f.shape else 1
        if len(values) != want:
            raise CorruptRecordError(f"feature {f.name!r} has {len(values)} values but the spec "
                                     f"fixes its shape to {list(f.shape)}")
        return values if f.shape else values[0]
    return values


def _convert(f: Feature, values: list) -> list:
    kinds: dict[str, type | tuple[type, ...]] = {"int64": int, "float32": (float, int),
                                                 "string": bytes}
    bad = [v for v in values if not isinstance(v, kinds[f.dtype])]
    if bad:
        raise CorruptRecordError(f"feature {f.name!r} should hold {f.dtype} values but holds "
                                 f"{type(bad[0]).__name__}")
    if f.dtype == "float32":  # an Int64List where floats are wanted: converted to float32,
        # where float32 holds the value exactly
        out = [float(np.float32(v)) if isinstance(v, int) else v for v in values]
        for v, x in zip(values, out):
            if isinstance(v, int) and x != v:
                raise CorruptRecordError(f"feature {f.name!r} holds the int64 value {v}, "
                                         f"which float32 cannot hold exactly")
        return out
    if f.encoding == "bool":
        return [bool(v) for v in values]
    if f.encoding == "decimal_string":  # a decimal's exact text: show it as text
        return [bytes(v).decode("ascii", "replace") for v in values]
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

def _entry(buf: memoryview, pos: int, end: int) -> tuple[bytes, list]:
    key = b""
    values: list = []
    for field, wire, p, e in _fields(buf, pos, end):
        if field == 1 and wire == _LEN:
            key = bytes(buf[p:e])
        elif field == 2 and wire == _LEN:
            values = _feature(buf, p, e)
    return key, values


def _list_entry(buf: memoryview, pos: int, end: int) -> tuple[bytes, list[list]]:
    """A FeatureLists entry: (key, each step's values); an empty Feature is an empty step."""
    key = b""
    steps: list[list] = []
    for field, wire, p, e in _fields(buf, pos, end):
        if field == 1 and wire == _LEN:
            key = bytes(buf[p:e])
        elif field == 2 and wire == _LEN:
            steps = [_feature(buf, p2, e2) for f2, w2, p2, e2 in _fields(buf, p, e)
                     if f2 == 1 and w2 == _LEN]
    return key, steps


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
        if field == 0 or tag > 0xFFFFFFFF:  # (a tag is 32 bits: field numbers end at 2**29 - 1)
            raise CorruptRecordError(f"invalid field number {field} at byte {start}",
                                     offset=start)
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
