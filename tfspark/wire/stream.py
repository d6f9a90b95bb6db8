"""TFRecord streams: write framed records to any binary file object (gzip optional), and read
them back, either record by record (read_records) or in big chunks walked by the compiled
scanner (stream_framed). Both readers check both CRCs and name the file and byte offset of a
bad record. The framing itself is in wire.tfrecord.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import IO, Any

import numpy as np

from tfspark.errors import (
    AccessError,
    CorruptRecordError,
    OptionError,
    access_denied,
    store_hint,
)
from tfspark.wire.compression import GZIP_LEVELS, normalize_compression, sniff_gzip
from tfspark.wire.tfrecord import (
    _CRC,
    _LENGTH,
    END,
    FIX,
    HEADER_BYTES,
    LIMIT,
    OVERHEAD,
    PARTIAL,
    TRAILER_BYTES,
    count_framed,
    frame_error,
    frame_record,
    masked_crc,
    scan_frames,
)

_READ_CHUNK = 1 << 24  # never ask a stream for more than this at once: a bad length is no OOM
CHUNK_BYTES = 32 << 20  # stream_framed reads this much at a time; a bigger record grows it
BATCH_RECORDS = 10_000  # stream_framed hands on at most this many records at once


# ---------------------------------------------------------------- writing

class RecordWriter:
    """Write TFRecords to an open binary file object, optionally gzip-compressed.

    The caller opens the file (so any filesystem works); close() finishes the gzip stream
    and closes the file object only if close_file=True.
    """

    def __init__(self, fileobj: IO[bytes], compression: str | None = None,
                 gzip_level: int = 6, close_file: bool = False):
        self.compression = normalize_compression(compression)
        if self.compression == "gzip" and (not isinstance(gzip_level, int)
                                           or gzip_level not in GZIP_LEVELS):
            raise OptionError(f"option 'gzip_level' got {gzip_level!r}; use an int from "
                              f"{GZIP_LEVELS[0]} to {GZIP_LEVELS[-1]}")
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
            count = int(count_framed(arr))
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


# ---------------------------------------------------------------- reading, record by record

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
        raise _Bad(f"truncated record: the stream ends inside the {HEADER_BYTES}-byte header "
                   f"(only {len(header)} bytes of it are there)")
    (length,) = _LENGTH.unpack_from(header)
    if verify and masked_crc(header[:8]) != _CRC.unpack_from(header, 8)[0]:
        raise _Bad(f"length CRC mismatch (length field reads {length})")
    body = _read_exact(f, length + TRAILER_BYTES)
    if len(body) < length + TRAILER_BYTES:
        part = "data" if len(body) < length else f"{TRAILER_BYTES}-byte data CRC trailer"
        raise _Bad(f"truncated record: the stream ends inside the {part} (record length "
                   f"{length}, only {len(body)} bytes follow the header)")
    data = body[:length]
    if verify and masked_crc(data) != _CRC.unpack_from(body, length)[0]:
        raise _Bad(f"data CRC mismatch (record length {length})")
    return data


def _records(source, gz: bool | None, verify: bool, path: str | None) -> Iterator[bytes]:
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as raw:  # opened on first next(), closed when done
            yield from _records(raw, gz, verify, path or os.fspath(source))
        return
    name = path or str(getattr(source, "name", None) or "<stream>")
    if gz is None:  # no manifest says: the content decides
        gz = sniff_gzip(source)
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
                    f"{name}: {what} in the record at byte offset {offset}{where}; {FIX}",
                    path=name, offset=offset,
                ) from (None if bad else exc)
            except FileNotFoundError:
                raise  # gone mid-read: no damage to name here
            except OSError as exc:  # a failing file system, or a store's refusal (a 403)
                if access_denied(exc):
                    raise refused(name, exc) from exc
                raise CorruptRecordError(f"{name}: read error at byte offset {offset}{where} "
                                         f"({exc}){_hint(exc)}", path=name, offset=offset) from exc
            if data is None:
                return
            yield data
            offset += len(data) + OVERHEAD


def refused(name: str, error: OSError) -> AccessError:
    """The error of a file that its file system or store would not let us read."""
    return AccessError(f"{name}: access denied ({' '.join(str(error).split())}); check the "
                       f"file's permissions, or the credentials given for its store (its "
                       f"data was not read, so nothing is known to be wrong with it)", path=name)


def _hint(error: OSError) -> str:
    """What to check after a read error, when it says no server answered (a store's)."""
    hint = store_hint(error)
    return f"; {hint}" if hint else ""


def read_records(source, compression: str | None = None, verify: bool = True,
                 path: str | None = None) -> Iterator[bytes]:
    """Yield each record's data from a path or an open binary file object, streaming.

    compression: None or "gzip"; "auto" detects gzip from the first bytes (the source must be
    seekable). path names a file object in error messages. With verify, both CRCs are checked; a
    bad CRC or a truncated record raises CorruptRecordError naming the file and byte offset.
    """
    # Validate now, not on the first next(); the file itself is opened lazily.
    gz = None if compression == "auto" else normalize_compression(compression) == "gzip"
    return _records(source, gz, verify, path)


def first_damage(source, compression: str | None, path: str) -> CorruptRecordError | None:
    """The error naming the first damaged record of a stream (for gzip: its offset in the
    uncompressed stream, which a chunked reader that fails inside a chunk cannot tell), or
    None when every record reads."""
    try:
        for _ in read_records(source, compression, path=path):
            pass
    except CorruptRecordError as e:
        return e
    return None


def count_records(source, compression: str | None = None) -> int:
    """Number of records in a file or stream, verifying every CRC on the way."""
    return sum(1 for _ in read_records(source, compression=compression, verify=True))


# ---------------------------------------------------------------- reading, in chunks

def stream_framed(stream: Any, name: str, verify: bool,
                  to_batch: Callable[[np.ndarray, np.ndarray, int], Any],
                  gz: bool = False, batch_records: int | None = None, *,
                  first_record: int | None = None, base: int = 0,
                  size: int | None = None, buffer: np.ndarray | None = None) -> Iterator[Any]:
    """to_batch(buf, framed offsets, byte offset of buf[0]) for every <= batch_records records
    (default BATCH_RECORDS) of a framed stream, reading CHUNK_BYTES at a time and carrying
    partial records over; from a stream with next_span (a remote file's RangeStream), its
    ranges are framed where they were read, with the partial record put in front.

    first_record: the number of the stream's first record in its file; given, no batch spans
    a multiple of batch_records in that numbering, whatever the reads (so the same records
    group alike when a read starts mid-file; a batch may end sooner, where a read does).
    base: the stream's first byte's offset in the file (for to_batch and messages). size: the
    stream's bytes when known and small (a read buffer no bigger than that, +1 to see its
    end). buffer: uint8 memory to read into where it is large enough (one thread's, reused from
    file to file: fresh memory costs a page fault per page); to_batch must copy what it keeps."""
    batch_records = batch_records or BATCH_RECORDS
    spans = getattr(stream, "next_span", None)
    want = 0 if spans else CHUNK_BYTES if size is None else max(1, min(CHUNK_BYTES, size + 1))
    buf = view = buffer[:want] if buffer is not None and buffer.size >= want \
        else np.empty(want, np.uint8)
    offsets = np.empty(batch_records + 1, np.int64)
    filled = start = need = 0
    seen = first_record or 0  # records handed on, numbered as in the file
    where = " of the uncompressed stream" if gz else ""
    while True:
        try:
            if spans:
                span = spans(view[start:])  # (view[start:]: the partial record)
                base += start
                view, start, eof = (view[start:], 0, True) if span is None else (span, 0, False)
            else:
                filled += _read_into(stream, buf, filled)
                eof = filled < buf.size
                view = buf[:filled]
        except FileNotFoundError:
            raise  # gone (an overwrite's sweep on a store, mid-read): no damage to name here
        except OSError as e:  # bad or truncated gzip data, or a failing file system
            if access_denied(e) and not isinstance(e, gzip.BadGzipFile):
                raise refused(name, e) from e
            what = "bad or truncated gzip data" if gz else "read error"
            at = base + (len(view) if spans else filled)
            raise CorruptRecordError(f"{name}: {what} after byte offset {at}{where} ({e})"
                                     f"{_hint(e)}", path=name, offset=at) from e
        while True:
            limit = batch_records if first_record is None else \
                batch_records - seen % batch_records
            count, stop, pos, info = scan_frames(view, start, limit, verify, offsets)
            if count:
                seen += count
                yield to_batch(view, offsets[:count + 1], base)
            start = pos
            if stop == LIMIT:
                continue
            if stop == PARTIAL and not eof:
                need = info
                break
            if stop != END:
                raise frame_error(stop, name, base + pos, info, where)
            break
        if eof:
            return
        if spans:
            continue
        keep = filled - start  # carry the partial record to the front (growing if needed)
        if need > buf.size:
            grown = np.empty(max(need, 2 * buf.size), np.uint8)
            grown[:keep] = buf[start:filled]
            buf = grown
        else:
            buf[:keep] = buf[start:filled]
        base += start
        filled, start = keep, 0


def _read_into(stream: Any, buf: np.ndarray, filled: int) -> int:
    """Fill buf[filled:] from the stream; fewer bytes only at the end of the stream."""
    view = buf.data[filled:]  # ndarray.data: the array's buffer as a memoryview
    got = 0
    while got < len(view):
        n = stream.readinto(view[got:])
        if not n:
            break
        got += n
    return got
