"""TFRecord framing without TensorFlow: CRCs, vectorized framing, writer, reader, corruption."""

from __future__ import annotations

import gzip
import io
import struct

import crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfspark.errors import CorruptRecordError, OptionError
from tfspark.wire import tfrecord as framing
from tfspark.wire.compression import file_suffix, normalize_compression
from tfspark.wire.stream import RecordWriter, count_records, read_records, stream_framed
from tfspark.wire.tfrecord import (
    frame_buffer,
    frame_into,
    frame_record,
    masked_crc,
)


def _pack(records: list[bytes], lead: bytes = b"") -> tuple[np.ndarray, np.ndarray]:
    """records back to back after `lead` junk bytes, with their offsets."""
    buf = np.frombuffer(lead + b"".join(records), dtype=np.uint8)
    sizes = np.array([len(r) for r in records], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64) + len(lead)
    return buf, offsets


def _random_records(rng: np.random.Generator, n: int, max_len: int = 3000) -> list[bytes]:
    sizes = rng.integers(0, max_len + 1, n)
    sizes[:: 7] = 0  # plenty of empty records
    return [rng.integers(0, 256, s, dtype=np.uint8).tobytes() for s in sizes]


def _write(path, records, compression=None) -> None:
    with open(path, "wb") as f, RecordWriter(f, compression=compression) as w:
        for r in records:
            w.write(r)


# ---------------------------------------------------------------- CRC and single records

def test_masked_crc_known_values():
    assert masked_crc(b"") == 0xA282EAD8  # crc32c("") == 0, only the mask delta is left
    c = 0xE3069283  # CRC-32C check value of "123456789"
    assert masked_crc(b"123456789") == ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) % 2**32
    assert masked_crc(memoryview(b"123456789")) == masked_crc(b"123456789")


def test_numba_crc_matches_library_at_every_alignment():
    from tfspark.wire.crc import TABLES
    from tfspark.wire.crc import crc32c as tables_crc
    from tfspark.wire.crc_hw import frame_crc

    rng = np.random.default_rng(1)
    buf = rng.integers(0, 256, 4000, dtype=np.uint8)
    check = np.frombuffer(b"123456789", np.uint8)  # CRC-32C's check value
    assert tables_crc(check, 0, 9, TABLES) == frame_crc(check, 0, 9) == 0xE3069283
    for start in range(9):
        for length in (0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 255, 3000):
            got = tables_crc(buf, start, start + length, TABLES)
            assert got == crc32c.crc32c(buf[start:start + length].tobytes()), (start, length)


def test_frame_record_layout():
    data = b"hello tfrecord"
    framed = frame_record(data)
    assert len(framed) == len(data) + 16
    (length,) = struct.unpack_from("<Q", framed)
    assert length == len(data)
    assert struct.unpack_from("<I", framed, 8)[0] == masked_crc(framed[:8])
    assert framed[12:-4] == data
    assert struct.unpack_from("<I", framed, len(framed) - 4)[0] == masked_crc(data)


def test_round_trip_path_and_file_object(tmp_path):
    records = [b"", b"a", b"abc" * 100, bytes(range(256))]
    path = tmp_path / "x.tfrecord"
    _write(path, records)
    assert list(read_records(path)) == records
    assert list(read_records(str(path))) == records
    with open(path, "rb") as f:
        assert list(read_records(f)) == records
    assert list(read_records(io.BytesIO(path.read_bytes()), path="mem")) == records
    assert count_records(path) == len(records)


def test_empty_file_has_no_records(tmp_path):
    path = tmp_path / "empty.tfrecord"
    path.write_bytes(b"")
    assert list(read_records(path)) == []
    assert count_records(path) == 0


# ---------------------------------------------------------------- vectorized framing

def test_frame_buffer_matches_frame_record_on_random_records():
    rng = np.random.default_rng(7)
    records = _random_records(rng, 300)
    buf, offsets = _pack(records, lead=b"xyz")  # unaligned, non-zero first offset
    out = frame_buffer(buf, offsets)
    assert out.dtype == np.uint8
    assert out.tobytes() == b"".join(frame_record(r) for r in records)
    assert list(read_records(io.BytesIO(out.tobytes()))) == records


def test_frame_buffer_accepts_bytes_and_subsets():
    records = [b"one", b"", b"three"]
    buf, offsets = _pack(records)
    assert frame_buffer(buf.tobytes(), offsets).tobytes() == b"".join(map(frame_record, records))
    assert frame_buffer(buf, offsets[1:]).tobytes() == b"".join(map(frame_record, records[1:]))
    assert frame_buffer(buf, np.array([0], dtype=np.int64)).size == 0


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(max_size=3000), max_size=25),
    lead=st.binary(max_size=9),
)
def test_frame_buffer_property(records, lead):
    buf, offsets = _pack(records, lead)
    assert frame_buffer(buf, offsets).tobytes() == b"".join(frame_record(r) for r in records)


def test_frame_buffer_rejects_bad_offsets():
    buf = np.zeros(10, dtype=np.uint8)
    with pytest.raises(ValueError, match="must not decrease"):
        frame_buffer(buf, np.array([0, 5, 3], dtype=np.int64))
    with pytest.raises(ValueError, match="outside"):
        frame_buffer(buf, np.array([0, 11], dtype=np.int64))
    with pytest.raises(ValueError, match="1-d"):
        frame_buffer(buf, np.array([], dtype=np.int64))


@pytest.mark.parametrize("sizes", ["small", "mixed"])
def test_frame_into_fills_header_and_trailer_in_place(sizes):
    rng = np.random.default_rng(3)
    records = _random_records(rng, 50, max_len=600)
    if sizes == "mixed":  # records framed three at a time, and large ones on their own
        records = [bytes(rng.integers(0, 256, n, dtype=np.uint8))
                   for n in (0, 1, 7, 8, 9, 40_000, 3, 15, 100_000, 20, 20, 12_287, 12_288, 5)]
    start = 5  # slots need not start at 0, and the array may have spare room after them
    framed_offsets = start + np.concatenate([[0], np.cumsum([len(r) + 16 for r in records])])
    out = rng.integers(0, 256, int(framed_offsets[-1]) + 7, dtype=np.uint8)  # junk everywhere
    spare = out.copy()
    for r, p in zip(records, framed_offsets[:-1]):
        out[p + 12:p + 12 + len(r)] = np.frombuffer(r, dtype=np.uint8)
    frame_into(out, framed_offsets)
    expected = b"".join(frame_record(r) for r in records)
    assert out[start:framed_offsets[-1]].tobytes() == expected
    assert (out[:start] == spare[:start]).all() and (out[framed_offsets[-1]:] == spare[-7:]).all()


def test_frame_into_rejects_bad_input():
    out = np.zeros(40, dtype=np.uint8)
    with pytest.raises(ValueError, match="at least 16"):
        frame_into(out, np.array([0, 16, 30], dtype=np.int64))
    with pytest.raises(ValueError, match="uint8"):
        frame_into(np.zeros(40, dtype=np.int32), np.array([0, 16]))
    with pytest.raises(ValueError, match="outside"):
        frame_into(out, np.array([0, 41]))


# ---------------------------------------------------------------- writer

def test_record_writer_counts_and_does_not_close_file(tmp_path):
    records = [b"a" * n for n in (0, 1, 100)]
    path = tmp_path / "w.tfrecord"
    with open(path, "wb") as f:
        w = RecordWriter(f)
        for r in records:
            w.write(r)
        buf, offsets = _pack(records)
        w.write_framed(frame_buffer(buf, offsets))
        w.write_framed(b"".join(map(frame_record, records)))
        w.write_framed(memoryview(frame_record(b"z")))
        w.write_framed(frame_record(b"q") * 2, count=2)
        w.close()
        w.close()  # idempotent
        assert not f.closed
        with pytest.raises(ValueError, match="closed"):
            w.write(b"late")
    assert w.records == 3 * 3 + 1 + 2
    assert w.bytes_written == path.stat().st_size
    assert list(read_records(path)) == records * 3 + [b"z", b"q", b"q"]


def test_record_writer_rejects_partial_framed_buffer():
    w = RecordWriter(io.BytesIO())
    with pytest.raises(ValueError, match="not whole framed records"):
        w.write_framed(frame_record(b"abc")[:-1])
    assert w.records == 0 and w.bytes_written == 0


def test_record_writer_close_file_option():
    f = io.BytesIO()
    with RecordWriter(f, close_file=True) as w:
        w.write(b"x")
    assert f.closed


def test_gzip_round_trip(tmp_path):
    rng = np.random.default_rng(5)
    records = _random_records(rng, 200, max_len=500)
    path = tmp_path / ("g" + file_suffix("gzip"))
    with open(path, "wb") as f:
        with RecordWriter(f, compression="GZIP", gzip_level=9) as w:
            w.write(records[0])
            buf, offsets = _pack(records[1:])
            w.write_framed(frame_buffer(buf, offsets))
    assert w.records == len(records)
    assert w.bytes_written == path.stat().st_size
    raw = path.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw) == b"".join(map(frame_record, records))
    assert list(read_records(path, compression="gzip")) == records
    with open(path, "rb") as f:
        assert list(read_records(f, compression="GZIP")) == records
        assert not f.closed
    assert count_records(path, "gzip") == len(records)


def test_gzip_level_is_checked():
    with pytest.raises(OptionError, match="gzip_level"):
        RecordWriter(io.BytesIO(), compression="gzip", gzip_level=11)
    with pytest.raises(OptionError, match="gzip_level"):
        RecordWriter(io.BytesIO(), compression="gzip", gzip_level=6.0)


# ---------------------------------------------------------------- corruption

RECORDS = [b"first record", b"the second record, a bit longer", b"third"]
SECOND = 16 + len(RECORDS[0])  # byte offset where the second record starts
SECOND_LEN = len(RECORDS[1])


def _corrupt_file(tmp_path, edit) -> str:
    data = bytearray(b"".join(map(frame_record, RECORDS)))
    data = edit(data)
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    return str(path)


def _flip(pos):
    def edit(data):
        data[pos] ^= 0x40
        return data
    return edit


def _cut(pos):
    return lambda data: data[:pos]


@pytest.mark.parametrize(
    "edit, what",
    [
        (_flip(SECOND + 8), "length CRC mismatch"),  # stored length CRC
        (_flip(SECOND + 2), "length CRC mismatch"),  # the length itself
        (_flip(SECOND + 12 + 3), "data CRC mismatch"),
        (_flip(SECOND + 12 + SECOND_LEN + 1), "data CRC mismatch"),  # stored data CRC
        (_cut(SECOND + 5), "inside the 12-byte header"),
        (_cut(SECOND + 12 + 4), "inside the data"),
        (_cut(SECOND + 12 + SECOND_LEN + 2), "inside the 4-byte data CRC trailer"),
    ],
)
def test_corrupt_record_names_file_and_offset(tmp_path, edit, what):
    path = _corrupt_file(tmp_path, edit)
    got = []
    with pytest.raises(CorruptRecordError) as info:
        for r in read_records(path):
            got.append(r)
    err = info.value
    assert got == RECORDS[:1]  # the good record before the bad one still comes out
    assert err.offset == SECOND and err.path == path
    msg = str(err)
    assert what in msg and path in msg and f"byte offset {SECOND}" in msg
    assert "rewrite it or drop it from the manifest" in msg
    assert isinstance(err, IOError)
    with pytest.raises(CorruptRecordError):
        count_records(path)


def test_corrupt_file_object_uses_given_path_name(tmp_path):
    data = bytearray(b"".join(map(frame_record, RECORDS)))
    data[SECOND + 12] ^= 1
    with pytest.raises(CorruptRecordError, match="s3://bucket/part-0.tfrecord") as info:
        list(read_records(io.BytesIO(bytes(data)), path="s3://bucket/part-0.tfrecord"))
    assert info.value.path == "s3://bucket/part-0.tfrecord"


class _Dropped(io.RawIOBase):
    """A stream whose server stops answering after `good` bytes (a store's connection)."""

    def __init__(self, data: bytes, good: int):
        self.data, self.good, self.pos = data, good, 0

    def readable(self):
        return True

    def readinto(self, b):
        if self.pos >= self.good:
            raise OSError("AWS Error NETWORK_CONNECTION during GetObject operation: "
                          "curlCode: 7, Couldn't connect to server")
        n = min(len(b), self.good - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


@pytest.mark.parametrize("reader", ["records", "chunks"])
def test_a_read_error_names_the_file_and_offset_and_what_to_check(reader):
    """A failing file system is not damage: the error says where the read stopped, the
    client's words, and (no server answered) what to check; it was the raw OSError when
    read record by record (verify's reader)."""
    data = b"".join(map(frame_record, RECORDS))
    stream = io.BufferedReader(_Dropped(data, SECOND), buffer_size=16)
    with pytest.raises(CorruptRecordError) as info:
        if reader == "records":
            list(read_records(stream, path="s3://b/part-0.tfrecord"))
        else:
            list(stream_framed(stream, "s3://b/part-0.tfrecord", True, lambda *a: a))
    said = str(info.value)
    assert said.startswith("s3://b/part-0.tfrecord: read error "), said
    at = SECOND if reader == "records" else 0  # (chunks: after the last whole chunk)
    assert f"byte offset {at} (" in said and "Couldn't connect to server" in said, said
    assert said.endswith("the network, and that the server runs"), said
    assert isinstance(info.value.__cause__, OSError)


def test_verify_false_skips_crc_checks(tmp_path):
    path = _corrupt_file(tmp_path, _flip(SECOND + 12 + 3))
    got = list(read_records(path, verify=False))
    assert got[0] == RECORDS[0] and got[2] == RECORDS[2] and got[1] != RECORDS[1]


def test_garbage_length_without_verify_is_truncation_not_huge_read(tmp_path):
    def edit(data):
        data[SECOND:SECOND + 8] = struct.pack("<Q", 2**62)
        return data

    path = _corrupt_file(tmp_path, edit)
    with pytest.raises(CorruptRecordError, match="inside the data") as info:
        list(read_records(path, verify=False))
    assert info.value.offset == SECOND


def test_gzip_corruption_reports_uncompressed_offset(tmp_path):
    data = bytearray(b"".join(map(frame_record, RECORDS)))
    data[SECOND + 12 + 3] ^= 1
    path = tmp_path / "bad.tfrecord.gz"
    path.write_bytes(gzip.compress(bytes(data)))
    with pytest.raises(CorruptRecordError, match="uncompressed stream") as info:
        list(read_records(path, compression="gzip"))
    assert info.value.offset == SECOND and "data CRC mismatch" in str(info.value)


def test_truncated_gzip_file(tmp_path):
    records = _random_records(np.random.default_rng(2), 50, max_len=400)
    raw = gzip.compress(b"".join(map(frame_record, records)))
    path = tmp_path / "cut.tfrecord.gz"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CorruptRecordError, match="uncompressed stream") as info:
        list(read_records(path, compression="gzip"))
    assert str(path) in str(info.value)
    path.write_bytes(b"not gzip at all, just text")
    with pytest.raises(CorruptRecordError, match="byte offset 0") as info:
        list(read_records(path, compression="gzip"))
    assert info.value.offset == 0


# ---------------------------------------------------------------- compression option

@pytest.mark.parametrize(
    "value, expected",
    [(None, None), ("", None), ("none", None), ("NONE", None), ("gzip", "gzip"),
     ("GZIP", "gzip"), ("Gzip", "gzip")],
)
def test_normalize_compression(value, expected):
    assert normalize_compression(value) == expected
    assert file_suffix(value) == (".tfrecord.gz" if expected else ".tfrecord")


@pytest.mark.parametrize("value", ["zlib", "snappy", "gz", 1, True])
def test_normalize_compression_rejects(value):
    with pytest.raises(OptionError) as info:
        normalize_compression(value)
    msg = str(info.value)
    assert "compression" in msg and repr(value) in msg and "'gzip'" in msg and "None" in msg
    assert isinstance(info.value, ValueError)


def test_bad_compression_fails_before_reading_or_writing(tmp_path):
    with pytest.raises(OptionError, match="compression"):
        read_records(tmp_path / "does-not-exist", compression="zlib")
    with pytest.raises(OptionError, match="compression"):
        RecordWriter(io.BytesIO(), compression="zstd")
    with pytest.raises(OptionError):
        file_suffix("lz4")


# With the crc32 instruction the compiled scan checks every record; without it, records of
# BIG_RECORD bytes or more have their data CRC checked by the crc32c package after the scan:
# sizes on both sides of that bound and of the instruction's lanes, each damaged in turn.
BIG_SIZES = [100, framing.BIG_RECORD - 1, framing.BIG_RECORD, 3 * framing.BIG_RECORD + 5, 7]


@pytest.mark.parametrize("instruction", [True, False])
@pytest.mark.parametrize("bad", range(len(BIG_SIZES)))
@pytest.mark.parametrize("where", ["data", "stored crc"])
def test_big_and_small_records_have_their_data_crc_checked(bad, where, instruction,
                                                            monkeypatch):
    from tfspark.wire.stream import stream_framed

    if instruction and not framing.CRC_INSTRUCTION:
        pytest.skip("this CPU has no crc32 instruction (SSE4.2)")
    monkeypatch.setattr(framing, "CRC_INSTRUCTION", instruction)
    rng = np.random.default_rng(bad)
    records = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in BIG_SIZES]
    clean = b"".join(map(frame_record, records))
    assert len(framing.frame_offsets(np.frombuffer(clean, np.uint8))) == len(records) + 1
    starts = np.cumsum([0] + [n + framing.OVERHEAD for n in BIG_SIZES])
    data = bytearray(clean)
    pos = int(starts[bad]) + framing.HEADER_BYTES + (BIG_SIZES[bad] // 2 if where == "data"
                                                     else BIG_SIZES[bad] + 1)
    data[pos] ^= 0x10
    with pytest.raises(CorruptRecordError, match="data CRC mismatch") as info:
        framing.frame_offsets(np.frombuffer(bytes(data), np.uint8), path="f")
    assert info.value.offset == starts[bad]
    handed: list[int] = []
    with pytest.raises(CorruptRecordError, match=f"record length {BIG_SIZES[bad]}\\)") as info:
        for n in stream_framed(io.BytesIO(bytes(data)), "f", True,
                               lambda buf, off, base: len(off) - 1):
            handed.append(n)
    assert sum(handed) == bad and info.value.offset == starts[bad]  # the good ones came out
    assert sum(stream_framed(io.BytesIO(bytes(data)), "f", False,
                             lambda buf, off, base: len(off) - 1)) == len(records)


# Each of ten small records damaged in turn (its data, its stored CRC or its length's CRC) is
# the one named, with the records before it handed on, whatever batches the reader asks for.
SMALL_SIZES = [0, 1, 7, 8, 9, 100, 255, 3, 64, 17]


@pytest.mark.parametrize("instruction", [True, False])
@pytest.mark.parametrize("bad", range(len(SMALL_SIZES)))
@pytest.mark.parametrize("where", ["data", "stored crc", "length crc"])
def test_each_damaged_small_record_is_the_one_named(bad, where, instruction, monkeypatch):
    from tfspark.wire.stream import stream_framed

    if instruction and not framing.CRC_INSTRUCTION:
        pytest.skip("this CPU has no crc32 instruction (SSE4.2)")
    monkeypatch.setattr(framing, "CRC_INSTRUCTION", instruction)
    rng = np.random.default_rng(bad)
    records = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in SMALL_SIZES]
    starts = np.cumsum([0] + [n + framing.OVERHEAD for n in SMALL_SIZES])
    data = bytearray(b"".join(map(frame_record, records)))
    n = SMALL_SIZES[bad]
    at = {"data": framing.HEADER_BYTES + n // 2 if n else framing.HEADER_BYTES,
          "stored crc": framing.HEADER_BYTES + n + 2, "length crc": 9}[where]
    data[int(starts[bad]) + at] ^= 0x10
    what = "length CRC mismatch" if where == "length crc" else "data CRC mismatch"
    with pytest.raises(CorruptRecordError, match=what) as info:
        framing.frame_offsets(np.frombuffer(bytes(data), np.uint8), path="f")
    assert info.value.offset == starts[bad]
    for batch in (1, 2, 4, 10):
        handed: list[int] = []
        with pytest.raises(CorruptRecordError, match=what) as info:
            for got in stream_framed(io.BytesIO(bytes(data)), "f", True,
                                     lambda buf, off, base: len(off) - 1, batch_records=batch):
                handed.append(got)
        assert sum(handed) == bad and info.value.offset == starts[bad]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 300), min_size=1, max_size=60),
       chunk=st.integers(1, 700), batch=st.integers(1, 9))
def test_aligned_batches_do_not_depend_on_where_reads_end(sizes, chunk, batch):
    # first_record=0: a batch never spans a multiple of `batch` records (it may end sooner,
    # where a read does), so joining the pieces of each multiple, as make_dataset does, gives
    # the same batches however small the reads (records larger than a read included), every
    # record once, in order.
    from tfspark.wire import stream

    records = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    data = b"".join(map(frame_record, records))

    def batches() -> list[list[bytes]]:
        joined: list[list[bytes]] = []
        seen = 0
        for piece in stream.stream_framed(
                io.BytesIO(data), "f", True,
                lambda buf, off, base: [buf[a + framing.HEADER_BYTES:b - framing.TRAILER_BYTES]
                                        .tobytes() for a, b in zip(off[:-1], off[1:])],
                batch_records=batch, first_record=0):
            assert seen // batch == (seen + len(piece) - 1) // batch
            if seen % batch == 0:
                joined.append([])
            joined[-1] += piece
            seen += len(piece)
        return joined

    with pytest.MonkeyPatch.context() as m:
        m.setattr(stream, "CHUNK_BYTES", chunk)
        small = batches()
    assert small == batches()
    assert [r for b in small for r in b] == records
    assert all(len(b) == batch for b in small[:-1]) and 0 < len(small[-1]) <= batch


@settings(max_examples=40, deadline=None)
@given(first=st.lists(st.integers(0, 300), min_size=1, max_size=40),
       second=st.lists(st.integers(0, 300), max_size=40), chunk=st.integers(1, 700),
       size=st.booleans())
def test_a_buffer_reused_from_stream_to_stream_keeps_nothing_of_the_last(first, second, chunk,
                                                                         size):
    # A reading thread reads file after file into one buffer (stream_framed's buffer=): the
    # records of a shorter stream after a longer one are exactly its own, however the reads
    # fall, whether or not the stream's size is given.
    from tfspark.wire import stream

    def framed(sizes: list[int], salt: int) -> bytes:
        return b"".join(frame_record(bytes([(i + salt) % 251]) * n) for i, n in enumerate(sizes))

    def read(data: bytes, buffer: np.ndarray | None) -> list[bytes]:
        return [r for piece in stream.stream_framed(
            io.BytesIO(data), "f", True,
            lambda buf, off, base: [buf[a + framing.HEADER_BYTES:b - framing.TRAILER_BYTES]
                                    .tobytes() for a, b in zip(off[:-1], off[1:])],
            size=len(data) if size else None, buffer=buffer) for r in piece]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(stream, "CHUNK_BYTES", chunk)
        buffer = np.full(stream.CHUNK_BYTES, 0xAB, np.uint8)
        for sizes, salt in ((first, 1), (second, 2), (first, 3)):
            data = framed(sizes, salt)
            assert read(data, buffer) == read(data, None) == \
                [bytes([(i + salt) % 251]) * n for i, n in enumerate(sizes)]
