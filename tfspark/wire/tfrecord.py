"""TFRecord framing: one record on disk is::

    uint64 length (little endian) | uint32 masked_crc32c(the 8 length bytes) | data
    | uint32 masked_crc32c(data)

masked_crc(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 mod 2**32 where c is the CRC-32C
(Castagnoli) of x; both CRCs are stored little endian, so framing adds OVERHEAD = 16 bytes per
record. A GZIP file is the whole framed stream gzip-compressed, which is what
``tf.data.TFRecordDataset(path, compression_type="GZIP")`` reads.

This module defines the sizes and the CRC once (the compression names: wire.compression, free of
numba, which the driver's planning imports); the kernels frame whole
buffers of records (writing) and walk them checking both CRCs (reading). Streams are in
wire.stream.
"""

from __future__ import annotations

import functools
import struct

import numpy as np

from tfspark.errors import CorruptRecordError
from tfspark.wire.crc import crc32c_lib, masked, masked_crc
from tfspark.wire.crc_hw import AVAILABLE as CRC_INSTRUCTION
from tfspark.wire.crc_hw import LANE, crc_length, crc_three, frame_crc
from tfspark.wire.jit import njit
from tfspark.wire.words import unsigned as _U

HEADER_BYTES = 12  # uint64 length + uint32 masked crc of the length
TRAILER_BYTES = 4  # uint32 masked crc of the data
OVERHEAD = HEADER_BYTES + TRAILER_BYTES
MAX_RECORD = 1 << 31  # protobuf messages are < 2 GiB; a bigger length is corruption
# Where the scan cannot use the CPU's crc32 instruction (wire.crc_hw), data CRCs of records this
# long or longer are checked by the crc32c package after it, not by its tables (1.7 GB/s): a
# Python call per record costs about what 4 KB of the compiled CRC does.
BIG_RECORD = 16384

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
FIX = "the file is corrupt or was not fully written; rewrite it or drop it from the manifest"

# scan_frames stops: the buffer ends exactly, the record limit is hit, an incomplete record
# starts at pos (more bytes needed), or a record is corrupt.
END, LIMIT, PARTIAL, LENGTH_CRC, DATA_CRC, BAD_LENGTH = 0, 1, 2, 3, 4, 5
_STOPS = {LENGTH_CRC: "length CRC mismatch (length field reads {n})",
          DATA_CRC: "data CRC mismatch (record length {n})",
          BAD_LENGTH: "implausible record length {n}",
          PARTIAL: "truncated record: the data ends inside it"}


# ---------------------------------------------------------------- CRC-32C (wire.crc)

@njit
def _u32(buf, p):
    return (np.int64(buf[_U(p)]) | (np.int64(buf[_U(p + 1)]) << 8)
            | (np.int64(buf[_U(p + 2)]) << 16) | (np.int64(buf[_U(p + 3)]) << 24))


# ---------------------------------------------------------------- writing: frame records

def frame_record(data: bytes) -> bytes:
    """One framed record: header, data, trailer."""
    length = _LENGTH.pack(len(data))
    return b"".join(
        (length, _CRC.pack(masked_crc(length)), data, _CRC.pack(masked_crc(data)))
    )


@njit
def _put_masked(out, pos, c):
    m = masked(c)
    for k in range(4):
        out[pos + k] = (m >> (8 * k)) & 0xFF


@njit
def _frame_slot(out, p, n):
    """Write header and trailer around the n data bytes at out[p+HEADER:p+HEADER+n]."""
    for k in range(8):
        out[p + k] = (n >> (8 * k)) & 0xFF
    _put_masked(out, p + 8, frame_crc(out, p, p + 8))
    _put_masked(out, p + HEADER_BYTES + n, frame_crc(out, p + HEADER_BYTES, p + HEADER_BYTES + n))


@njit
def _frame_by_tables(out, offsets):
    for i in range(offsets.shape[0] - 1):
        _frame_slot(out, offsets[i], offsets[i + 1] - offsets[i] - OVERHEAD)


@njit
def _frame_by_instruction(out, offsets):
    """_frame_slot's bytes, three small records at a time (crc_hw.crc_three); a record of
    3 * LANE bytes or more on its own (its CRC runs three lanes of its own)."""
    n = offsets.shape[0] - 1
    i = 0
    while i + 3 <= n:
        a, b, c = offsets[i], offsets[i + 1], offsets[i + 2]
        na, nb, nc = b - a - OVERHEAD, c - b - OVERHEAD, offsets[i + 3] - c - OVERHEAD
        if max(na, nb, nc) >= 3 * LANE:
            _frame_slot(out, a, na)
            i += 1
            continue
        ca, cb, cc = crc_three(out, a + HEADER_BYTES, na, b + HEADER_BYTES, nb,
                               c + HEADER_BYTES, nc)
        _put_frame(out, a, na, ca)
        _put_frame(out, b, nb, cb)
        _put_frame(out, c, nc, cc)
        i += 3
    for j in range(i, n):
        _frame_slot(out, offsets[j], offsets[j + 1] - offsets[j] - OVERHEAD)


@njit
def _put_frame(out, p, n, data_crc):
    """The header and trailer of the record of n data bytes at out[p + HEADER_BYTES:], whose
    data's CRC is data_crc."""
    for k in range(8):
        out[p + k] = (n >> (8 * k)) & 0xFF
    _put_masked(out, p + 8, crc_length(n))
    _put_masked(out, p + HEADER_BYTES + n, data_crc)


_frame_into_kernel = _frame_by_instruction if CRC_INSTRUCTION else _frame_by_tables


@njit
def _frame_copy_kernel(buf, offsets, out):
    """Copy record i = buf[offsets[i]:offsets[i+1]] into its slot and frame it (still in L1)."""
    pos = 0
    for i in range(offsets.shape[0] - 1):
        s = offsets[i]
        n = offsets[i + 1] - s
        dst = out[pos + HEADER_BYTES:pos + HEADER_BYTES + n]
        src = buf[s:s + n]
        for k in range(n):
            dst[k] = src[k]
        _frame_slot(out, pos, n)
        pos += n + OVERHEAD


def checked_offsets(offsets, limit: int, min_size: int, what: str) -> np.ndarray:
    """int64 offsets inside [0, limit] whose steps are >= min_size: kernels do not bounds-check."""
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    if off.ndim != 1 or off.size == 0:
        raise ValueError(f"offsets must be a 1-d array of n+1 positions, got shape {off.shape}")
    if off[0] < 0 or off[-1] > limit:
        raise ValueError(f"offsets run from {off[0]} to {off[-1]}, outside the {limit} bytes "
                         f"of the {what}")
    sizes = np.diff(off)
    if sizes.size and sizes.min() < min_size:
        bad = int(np.argmin(sizes))
        raise ValueError(f"offsets must not decrease and each {what} slot needs at least "
                         f"{min_size} bytes; slot {bad} has {int(sizes[bad])}")
    return off


def as_bytes(buf) -> np.ndarray:
    """Any buffer (bytes, memoryview, numpy array) as a flat contiguous uint8 array."""
    data = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8)


def frame_buffer(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Frame n records stored back to back (record i is buf[offsets[i]:offsets[i+1]]).

    Returns one uint8 array holding the n framed records back to back.
    """
    data = as_bytes(buf)
    off = checked_offsets(offsets, data.size, 0, "buffer")
    out = np.empty(int(off[-1] - off[0]) + OVERHEAD * (off.size - 1), dtype=np.uint8)
    _frame_copy_kernel(data, off, out)
    return out


def frame_into(out: np.ndarray, offsets: np.ndarray) -> None:
    """Frame records in place: record i's data is at out[offsets[i]+12 : offsets[i+1]-4].

    The 12 header bytes before and the 4 trailer bytes after each record are overwritten.
    """
    if not (isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.ndim == 1
            and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError("out must be a writeable, contiguous 1-d uint8 numpy array")
    _frame_into_kernel(out, checked_offsets(offsets, out.size, OVERHEAD, "output array"))


# ---------------------------------------------------------------- reading: walk records

def scan_frames(buf, start, limit, verify, offsets):
    """Walk framed records from buf[start:], at most `limit` of them, checking both CRCs of
    each when verify.

    offsets[0..count] receive the framed records' boundaries (offsets[0] = start). Returns
    (count, stop, pos, info): stop is END, LIMIT, PARTIAL (an incomplete record starts at pos and
    needs info bytes in all), or LENGTH_CRC / DATA_CRC / BAD_LENGTH (record at pos, info = its
    length). Nothing past pos was accepted.
    """
    big = MAX_RECORD if CRC_INSTRUCTION else BIG_RECORD
    count, stop, pos, info = _scan_kernel(buf, start, limit, verify, big, offsets)
    if verify and not CRC_INSTRUCTION and count and \
            offsets[count] - offsets[0] >= BIG_RECORD + OVERHEAD:
        bad = _first_bad_big(buf, offsets[:count + 1])
        if bad >= 0:
            at = int(offsets[bad])
            return bad, DATA_CRC, at, int(offsets[bad + 1]) - at - OVERHEAD
    return count, stop, pos, info


def _first_bad_big(buf, offsets) -> int:
    """The first of these framed records of BIG_RECORD bytes or more whose data CRC fails, or
    -1 (the compiled scan checked the others)."""
    sizes = np.diff(offsets) - OVERHEAD
    crc = functools.partial(crc32c_lib().crc32c, gil_release_mode=0)  # (µs each: keep the GIL)
    view = buf.data
    for i in np.flatnonzero(sizes >= BIG_RECORD).tolist():
        data, n = int(offsets[i]) + HEADER_BYTES, int(sizes[i])
        c = crc(view[data:data + n])
        stored = int.from_bytes(view[data + n:data + n + TRAILER_BYTES], "little")
        if masked(c) != stored:
            return i
    return -1


@njit
def _scan_kernel(buf, start, limit, verify, big, offsets):
    """scan_frames' walk; data CRCs of records of `big` bytes or more are left unchecked."""
    size = buf.shape[0]
    pos = start
    count = 0
    offsets[0] = start
    while True:
        if pos == size:
            return count, END, pos, 0
        if count == limit:
            return count, LIMIT, pos, 0
        if size - pos < HEADER_BYTES:
            return count, PARTIAL, pos, HEADER_BYTES
        n = _u32(buf, pos) | (_u32(buf, pos + 4) << 32)
        if verify and masked(frame_crc(buf, pos, pos + 8)) != _u32(buf, pos + 8):
            return count, LENGTH_CRC, pos, n
        if n < 0 or n >= MAX_RECORD:
            return count, BAD_LENGTH, pos, n
        if size - pos < n + OVERHEAD:
            return count, PARTIAL, pos, n + OVERHEAD
        data = pos + HEADER_BYTES
        if verify and n < big and masked(frame_crc(buf, data, data + n)) != _u32(buf, data + n):
            return count, DATA_CRC, pos, n
        pos += n + OVERHEAD
        count += 1
        offsets[count] = pos


@njit
def count_framed(buf):
    """Number of records in a framed buffer by walking lengths; -1 if they do not tile it."""
    size = buf.shape[0]
    pos = 0
    count = 0
    while pos + HEADER_BYTES <= size:
        if buf[pos + 7] != 0 or buf[pos + 6] != 0:  # >= 2**48 bytes: not a real length
            return -1
        n = np.int64(0)
        for k in range(6):
            n |= np.int64(buf[pos + k]) << (8 * k)
        pos += n + OVERHEAD
        count += 1
    return count if pos == size else -1


@njit
def gather_records(buf, offsets, head, tail, data, data_offsets):
    """Copy each record's bytes (framing stripped) back to back: a binary column's buffers."""
    pos = 0
    data_offsets[0] = 0
    for i in range(offsets.shape[0] - 1):
        s = offsets[i] + head
        n = offsets[i + 1] - tail - s
        src = buf[s:s + n]
        dst = data[pos:pos + n]
        for k in range(n):
            dst[k] = src[k]
        pos += n
        data_offsets[i + 1] = pos


def frame_error(stop: int, path: str | None, offset: int, length: int,
                where: str = "") -> CorruptRecordError:
    """The error for a scan_frames stop; where: e.g. " of the uncompressed stream"."""
    what = _STOPS[stop].format(n=length)
    name = path or "<buffer>"
    return CorruptRecordError(f"{name}: {what} in the record at byte offset {offset}{where}; "
                              f"{FIX}", path=name, offset=offset)


def frame_offsets(buf: np.ndarray, *, path: str | None = None, verify: bool = True,
                  offset: int = 0) -> np.ndarray:
    """Boundaries (n+1 int64) of the framed TFRecords that tile buf, both CRCs checked.

    CorruptRecordError names `path` and the byte offset (offset = where buf starts in the file).
    """
    data = as_bytes(buf)
    out = np.empty(data.size // OVERHEAD + 1, np.int64)
    count, stop, pos, info = scan_frames(data, 0, out.size, verify, out)
    if stop not in (END, LIMIT):
        raise frame_error(stop, path, offset + pos, info)
    return out[:count + 1].copy()
