"""The Example writer's two ways of writing a record: framed records go out by 8-byte words (each
store may run up to 7 bytes past what it means to write, always written again after), plain ones a
byte at a time. Both must give the same records, for every length of key, string and varint."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tfspark.arrow.encode import BatchEncoder
from tfspark.spec import infer_spec
from tfspark.wire.example_py import decode_example
from tfspark.wire.protobuf import put_varint, put_varint_word, varint_bytes, varint_size
from tfspark.wire.tfrecord import HEADER_BYTES, TRAILER_BYTES, frame_record

EDGES = [0, 1, 127, 128, 16383, 16384, 2**21, 2**28, 2**35, 2**42, 2**49, 2**56 - 1, 2**56,
         2**63 - 1, -1, -2, -(2**62), -(2**63)]


def _varint(v: int) -> bytes:
    return varint_bytes(v % 2**64)


@pytest.mark.parametrize("v", EDGES)
def test_a_varint_by_word_is_the_varint_by_bytes(v: int) -> None:
    want = _varint(v)
    assert varint_size(v) == len(want)
    by_bytes = np.full(32, 0xEE, np.uint8)
    assert put_varint(by_bytes, 3, v) == 3 + len(want)
    by_word = np.full(32, 0xEE, np.uint8)
    assert put_varint_word(by_word, 3, v, len(want)) == 3 + len(want)
    assert bytes(by_bytes[3:3 + len(want)]) == want
    assert bytes(by_word[3:3 + len(want)]) == want
    assert (by_word[:3] == 0xEE).all()  # nothing before it is touched


def _table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ints = rng.choice(np.array(EDGES, dtype=np.int64), n)
    lengths = rng.integers(0, 200, n)  # across the heads kept in a table (under 64) and 128
    text = [None if i % 9 == 4 else "é" * (int(k) // 2) + "x" * (int(k) % 2)
            for i, k in enumerate(lengths)]
    long_key = "k" * 140  # an entry head whose key length takes two bytes
    return pa.table({
        "i": pa.array(ints),
        "maybe_i": pa.array([None if i % 5 == 0 else int(v) for i, v in enumerate(ints)],
                            pa.int64()),
        "f": pa.array(rng.normal(size=n).astype(np.float32)),
        "maybe_f": pa.array([None if i % 3 == 0 else float(v)
                             for i, v in enumerate(rng.normal(size=n))], pa.float32()),
        "s": pa.array(text),
        "category": pa.array(rng.choice(["a", "bb", "ccccccc", "dddddddd", "eeeeeeeee"], n)),
        long_key: pa.array(rng.integers(-5, 5, n)),
        "int_lists": pa.array([[int(x) for x in rng.choice(np.array(EDGES, np.int64), i % 6)]
                               for i in range(n)], pa.list_(pa.int64())),
        "float_lists": pa.array([None if i % 7 == 0 else
                                 [float(x) for x in rng.normal(size=i % 11)] for i in range(n)],
                                pa.list_(pa.float32())),
        "byte_lists": pa.array([[bytes(rng.integers(0, 256, (i + j) % 70).astype(np.uint8))
                                 for j in range(i % 4)] for i in range(n)],
                               pa.list_(pa.binary())),
    })


@pytest.mark.parametrize("n, seed", [(1, 0), (7, 1), (300, 2), (5000, 3)])
def test_framed_records_are_the_plain_records_framed(n: int, seed: int) -> None:
    table = _table(n, seed)
    spec = infer_spec(table.schema)
    for batch in (table.to_batches()[0], table.to_batches()[0].slice(n // 2)):
        framed, framed_at = BatchEncoder(spec).encode(batch, framed=True)
        plain, plain_at = BatchEncoder(spec).encode(batch, framed=False)
        plain = bytes(plain)
        want = b"".join(frame_record(plain[plain_at[i]:plain_at[i + 1]])
                        for i in range(batch.num_rows))
        assert bytes(framed) == want
        assert framed_at[-1] == len(want)
        _same_rows(bytes(framed), framed_at, batch)


def _same_rows(framed: bytes, at: np.ndarray, batch: pa.RecordBatch) -> None:
    """Each record, read by the pure-Python reference decoder, holds its row's values."""
    rows = batch.to_pylist()
    for i, row in enumerate(rows):
        got = decode_example(framed[at[i] + HEADER_BYTES:at[i + 1] - TRAILER_BYTES])
        for name, value in row.items():
            if value is None:
                assert name not in got, (i, name)
                continue
            values = value if isinstance(value, list) else [value]
            if isinstance(values[0] if values else None, str):
                values = [v.encode() for v in values]
            elif isinstance(values[0] if values else None, float):
                values = [float(np.float32(v)) for v in values]
            assert got[name] == values, (i, name)


def test_a_reused_encoder_leaves_nothing_of_a_longer_batch_behind() -> None:
    """The buffer is reused: a second, shorter batch's records are its own only."""
    table = _table(400, 5)
    spec = infer_spec(table.schema)
    encoder = BatchEncoder(spec)
    encoder.encode(table.to_batches()[0], framed=True)
    small = table.to_batches()[0].slice(100, 9)
    framed, _ = encoder.encode(small, framed=True)
    plain, at = BatchEncoder(spec).encode(small, framed=False)
    plain = bytes(plain)
    assert bytes(framed) == b"".join(frame_record(plain[at[i]:at[i + 1]]) for i in range(9))
