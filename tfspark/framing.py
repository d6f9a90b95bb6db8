"""TFRecord framing: frame records for writing, read and verify them back.

Wire format, one record after another with nothing in between::

    uint64 length (little endian) | uint32 masked_crc32c(the 8 length bytes) | data
    | uint32 masked_crc32c(data)

masked_crc(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 mod 2**32 where c is the CRC-32C
(Castagnoli) of x; both CRCs are stored little endian, so framing adds 16 bytes per record.
A GZIP file is the whole framed stream gzip-compressed, which is what
``tf.data.TFRecordDataset(path, compression_type="GZIP")`` reads.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from collections.abc import Iterator
from contextlib import nullcontext
from typing import IO

import crc32c as _crc32c_lib
import numpy as np

from tfspark._jit import njit
from tfspark.errors import CorruptRecordError, OptionError

HEADER_BYTES = 12  # uint64 length + uint32 masked crc of the length
TRAILER_BYTES = 4  # uint32 masked crc of the data
OVERHEAD = HEADER_BYTES + TRAILER_BYTES

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_READ_CHUNK = 1 << 24  # never ask a stream for more than this at once: a bad length is no OOM
_FIX = "the file is corrupt or was not fully written; rewrite it or drop it from the manifest"


# ---------------------------------------------------------------- compression option

def normalize_compression(value: str | None) -> str | None:
    """None, "", "none" (any case) -> None; "gzip" (any case) -> "gzip"; else OptionError."""
    if value is None:
        return None
    if isinstance(value, str):
        low = value.lower()
        if low in ("", "none"):
            return None
        if low == "gzip":
            return "gzip"
    raise OptionError(
        f"option 'compression' got {value!r}; allowed values are None, '', 'none' "
        "(no compression) and 'gzip' (any case)"
    )


def file_suffix(compression: str | None) -> str:
    """The file name suffix for a compression setting: ".tfrecord" or ".tfrecord.gz"."""
    return ".tfrecord.gz" if normalize_compression(compression) == "gzip" else ".tfrecord"


# ---------------------------------------------------------------- pure Python framing

def masked_crc(data: bytes | memoryview) -> int:
    """Masked CRC-32C of data, as TFRecord stores it."""
    c = _crc32c_lib.crc32c(data)
    return ((((c >> 15) | (c << 17)) & _U32) + _MASK_DELTA) & _U32


def frame_record(data: bytes) -> bytes:
    """One framed record: header, data, trailer."""
    length = _LENGTH.pack(len(data))
    return b"".join(
        (length, _CRC.pack(masked_crc(length)), data, _CRC.pack(masked_crc(data)))
    )


# ---------------------------------------------------------------- numba kernels

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


_TABLES = _crc_tables()

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
def _crc32c(buf, start, end, t):
    """CRC-32C of buf[start:end]."""
    v = buf[start:end]
    c = np.int64(0xFFFFFFFF)
    m = (end - start) >> 3
    for j in range(m):
        k = j * 8
        c = _step8(c, v[k], v[k + 1], v[k + 2], v[k + 3], v[k + 4], v[k + 5], v[k + 6], v[k + 7], t)
    for k in range(m * 8, end - start):
        c = np.int64(t[0, (c ^ np.int64(v[k])) & 0xFF]) ^ (c >> 8)
    return c ^ 0xFFFFFFFF


@njit
def _put_masked(out, pos, c):
    m = ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    for k in range(4):
        out[pos + k] = (m >> (8 * k)) & 0xFF


@njit
def _frame_slot(out, p, n, t):
    """Write header and trailer around the n data bytes at out[p+12:p+12+n]."""
    for k in range(8):
        out[p + k] = (n >> (8 * k)) & 0xFF
    _put_masked(out, p + 8, _crc32c(out, p, p + 8, t))
    _put_masked(out, p + 12 + n, _crc32c(out, p + 12, p + 12 + n, t))


@njit
def _frame_into_kernel(out, offsets, t):
    for i in range(offsets.shape[0] - 1):
        _frame_slot(out, offsets[i], offsets[i + 1] - offsets[i] - 16, t)


@njit
def _frame_copy_kernel(buf, offsets, out, t):
    """Copy record i = buf[offsets[i]:offsets[i+1]] into its slot and frame it (still in L1)."""
    pos = 0
    for i in range(offsets.shape[0] - 1):
        s = offsets[i]
        n = offsets[i + 1] - s
        dst = out[pos + 12:pos + 12 + n]
        src = buf[s:s + n]
        for k in range(n):
            dst[k] = src[k]
        _frame_slot(out, pos, n, t)
        pos += n + 16


@njit
def _count_framed(buf):
    """Number of records in a framed buffer by walking lengths; -1 if they do not tile it."""
    size = buf.shape[0]
    pos = 0
    count = 0
    while pos + 12 <= size:
        if buf[pos + 7] != 0 or buf[pos + 6] != 0:  # >= 2**48 bytes: not a real length
            return -1
        n = np.int64(0)
        for k in range(6):
            n |= np.int64(buf[pos + k]) << (8 * k)
        pos += n + 16
        count += 1
    return count if pos == size else -1


# ---------------------------------------------------------------- vectorized framing

def _checked_offsets(offsets, limit: int, min_size: int, what: str) -> np.ndarray:
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


def frame_buffer(buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Frame n records stored back to back (record i is buf[offsets[i]:offsets[i+1]]).

    Returns one uint8 array holding the n framed records back to back.
    """
    data = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    off = _checked_offsets(offsets, data.size, 0, "buffer")
    out = np.empty(int(off[-1] - off[0]) + OVERHEAD * (off.size - 1), dtype=np.uint8)
    _frame_copy_kernel(data, off, out, _TABLES)
    return out


def frame_into(out: np.ndarray, offsets: np.ndarray) -> None:
    """Frame records in place: record i's data is at out[offsets[i]+12 : offsets[i+1]-4].

    The 12 header bytes before and the 4 trailer bytes after each record are overwritten.
    """
    if not (isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.ndim == 1
            and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError("out must be a writeable, contiguous 1-d uint8 numpy array")
    # 16 = 12 header + 4 trailer bytes around the data.
    _frame_into_kernel(out, _checked_offsets(offsets, out.size, OVERHEAD, "output array"), _TABLES)


# ---------------------------------------------------------------- writing

class RecordWriter:
    """Write TFRecords to an open binary file object, optionally gzip-compressed.

    The caller opens the file (so any filesystem works); close() finishes the gzip stream
    and closes the file object only if close_file=True.
    """

    def __init__(self, fileobj: IO[bytes], compression: str | None = None,
                 gzip_level: int = 6, close_file: bool = False):
        self.compression = normalize_compression(compression)
        level_ok = isinstance(gzip_level, int) and 0 <= gzip_level <= 9
        if self.compression == "gzip" and not level_ok:
            raise OptionError(f"option 'gzip_level' got {gzip_level!r}; use an int from 0 to 9")
        self._file = fileobj
        self._close_file = close_file
        # wbits=31: gzip header and trailer, streamed with bounded memory.
        self._zip = (zlib.compressobj(gzip_level, zlib.DEFLATED, 31)
                     if self.compression == "gzip" else None)
        self._closed = False
        self.records = 0
        self.bytes_written = 0

    def write(self, record: bytes) -> None:
        """Frame and write one record."""
        self._emit(frame_record(record))
        self.records += 1

    def write_framed(self, framed: bytes | np.ndarray | memoryview,
                     count: int | None = None) -> None:
        """Write already framed records (e.g. from frame_buffer); count is found if None."""
        if isinstance(framed, np.ndarray):
            arr = np.ascontiguousarray(framed).reshape(-1).view(np.uint8)
        else:
            arr = np.frombuffer(framed, dtype=np.uint8)
        if count is None:
            count = int(_count_framed(arr))
            if count < 0:
                raise ValueError(f"write_framed got {arr.size} bytes that are not whole "
                                 "framed records (from frame_record or frame_buffer)")
        self._emit(arr.data)
        self.records += count

    def _emit(self, data) -> None:
        if self._closed:
            raise ValueError("RecordWriter is closed")
        self._put(self._zip.compress(data) if self._zip is not None else data)

    def _put(self, data) -> None:
        view = memoryview(data).cast("B")
        while view.nbytes:
            n = self._file.write(view)
            # Raw (unbuffered) streams may take less than offered; others return None.
            n = view.nbytes if n is None else n
            view = view[n:]
            self.bytes_written += n

    def close(self) -> None:
        """Finish the gzip stream, flush; close the file only if close_file=True."""
        if self._closed:
            return
        if self._zip is not None:
            self._put(self._zip.flush(zlib.Z_FINISH))
        self._closed = True
        if hasattr(self._file, "flush"):
            self._file.flush()
        if self._close_file:
            self._file.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------- reading

def _read_exact(f, n: int) -> bytes:
    """Up to n bytes, fewer only at end of stream; reads in bounded chunks."""
    parts = []
    got = 0
    while got < n:
        chunk = f.read(min(n - got, _READ_CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _Bad(Exception):
    """What is wrong with one record; _records adds the file name and offset."""


def _next_record(f, verify: bool) -> bytes | None:
    """The next record's data, None at a clean end of stream, or _Bad."""
    header = _read_exact(f, HEADER_BYTES)
    if not header:
        return None
    if len(header) < HEADER_BYTES:
        raise _Bad(f"truncated record: the stream ends inside the 12-byte header "
                   f"(only {len(header)} bytes of it are there)")
    (length,) = _LENGTH.unpack_from(header)
    if verify and masked_crc(header[:8]) != _CRC.unpack_from(header, 8)[0]:
        raise _Bad(f"length CRC mismatch (length field reads {length})")
    body = _read_exact(f, length + TRAILER_BYTES)
    if len(body) < length + TRAILER_BYTES:
        part = "data" if len(body) < length else "4-byte data CRC trailer"
        raise _Bad(f"truncated record: the stream ends inside the {part} (record length "
                   f"{length}, only {len(body)} bytes follow the header)")
    data = body[:length]
    if verify and masked_crc(data) != _CRC.unpack_from(body, length)[0]:
        raise _Bad(f"data CRC mismatch (record length {length})")
    return data


def _records(source, gz: bool, verify: bool, path: str | None) -> Iterator[bytes]:
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as raw:  # opened on first next(), closed when done
            yield from _records(raw, gz, verify, path or os.fspath(source))
        return
    name = path or str(getattr(source, "name", None) or "<stream>")
    where = " of the uncompressed stream" if gz else ""
    offset = 0
    # Closing the GzipFile leaves source open: the caller owns it.
    with gzip.GzipFile(fileobj=source, mode="rb") if gz else nullcontext(source) as f:
        while True:
            try:
                data = _next_record(f, verify)
            except (_Bad, EOFError, zlib.error, gzip.BadGzipFile) as exc:
                bad = isinstance(exc, _Bad)
                what = str(exc) if bad else f"bad or truncated gzip data ({exc})"
                raise CorruptRecordError(
                    f"{name}: {what} in the record at byte offset {offset}{where}; {_FIX}",
                    path=name, offset=offset,
                ) from (None if bad else exc)
            if data is None:
                return
            yield data
            offset += len(data) + OVERHEAD


def read_records(source, compression: str | None = None, verify: bool = True,
                 path: str | None = None) -> Iterator[bytes]:
    """Yield each record's data from a path or an open binary file object, streaming.

    path names a file object in error messages. With verify, both CRCs are checked; a bad
    CRC or a truncated record raises CorruptRecordError naming the file and byte offset.
    """
    # Validate now, not on the first next(); the file itself is opened lazily.
    return _records(source, normalize_compression(compression) == "gzip", verify, path)


def count_records(source, compression: str | None = None) -> int:
    """Number of records in a file or stream, verifying every CRC on the way."""
    return sum(1 for _ in read_records(source, compression=compression, verify=True))
