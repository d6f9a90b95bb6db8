"""`tfspark verify PATH` (tfspark.verify): check a data set against its manifest, every byte.

Reads every file the manifest names, checks both CRCs of every record, compares record counts
per file with the manifest, parses every record with the spec, and lists files in the
directory that the manifest does not name. For a data set written by write_tfrecords it also
checks the parquet backup against the manifest: the write it belongs to (its marker) and its
rows (from the parquet footers). No Spark, no TensorFlow.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfspark import progress
from tfspark.errors import AccessError, CorruptRecordError, TfsparkError, scrubbed
from tfspark.spec.model import FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.fetch import Fetcher
from tfspark.store.fs import Location, locate
from tfspark.store.partitions import read_data_set_manifest
from tfspark.store.uris import error_line, redact, uri_to_path
from tfspark.wire.compression import sniff_gzip
from tfspark.wire.stream import read_records

_DATA_FILE = re.compile(r"\.tfrecords?(\.gz)?$")
_CHUNK_RECORDS = 10_000


@dataclass
class VerifyReport:
    """What `verify` found: totals read and the list of problems (empty when the data set is ok)."""

    path: str
    files: int = 0
    records: int = 0
    bytes: int = 0
    compression: str | None = None
    rows: int = 0  # = records but in the block layout (rows_per_record > 1)
    rows_per_record: int = 1
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth knowing, not wrong
    checked: str = "every CRC, count and record checks out"  # what "OK" stands for

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def render(self, limit: int = 20) -> str:
        """The report as text for the terminal, listing at most `limit` problems."""
        block = f"  rows {self.rows:,} (blocks of up to {self.rows_per_record:,})" \
            if self.rows_per_record > 1 else ""
        lines = [f"tfspark verify {self.path}",
                 f"  files {self.files:,}  records {self.records:,}{block}  bytes "
                 f"{self.bytes:,}  compression {self.compression or 'none'}"]
        lines += [f"  note: {n}" for n in self.notes]
        if self.ok:
            lines.append(f"  OK: {self.checked}")
            return "\n".join(lines)
        lines.append(f"  {len(self.problems)} problem(s):")
        lines += [f"  - {p}" for p in self.problems[:limit]]
        if len(self.problems) > limit:
            lines.append(f"  ... and {len(self.problems) - limit} more")
        return "\n".join(lines)


@scrubbed
def verify(path: str | os.PathLike, filesystem: Any = None) -> VerifyReport:
    """Check the data set at `path` against its manifest.

    Every file present, both CRCs of every record, record counts, every record parsed with
    the spec, no stray data files. A lone TFRecord file gets its framing and CRCs checked.
    What is wrong with the data set (a damaged manifest included) is collected in the
    report, not raised.

    Args:
        path: the data set's directory or URI, or one TFRecord file.
        filesystem: a pyarrow or fsspec filesystem. Default: from the path.

    Returns:
        A VerifyReport: `ok`, `problems` (one line each, naming the file and byte offset),
        and `text()` as `tfspark verify` prints it.

    Raises:
        ManifestError: the path holds no data set (nothing there, a directory without a
            manifest, a missing bucket) or cannot be reached (no server, refused
            credentials): there is nothing to verify.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"x": [1.0, 2.0]}), "ds")
        >>> report = tfspark.verify("ds")
        >>> report.ok, report.records
        (True, 2)
    """
    loc = locate(path, filesystem)
    report = VerifyReport(redact(os.fspath(path)))
    try:
        raw: bytes | None = loc.read_bytes(mf.NAME)
    except FileNotFoundError:
        raw = None
    except OSError as e:  # a lone file (no directory); no server, no permission
        if is_lone_file(loc):
            return _check_lone(loc, report)
        raise mf.unreadable(loc, e) from None
    if raw is None:
        if is_lone_file(loc):  # a lone TFRecord file (asked only now: no extra request)
            return _check_lone(loc, report)
        read_data_set_manifest(loc)  # raises: a partition's directory, nothing, no data set
        raise mf.no_manifest(loc)  # (found meanwhile: verify it once it is whole)
    try:
        manifest = mf.manifest_of(loc, raw)
    except TfsparkError as e:
        report.problems.append(str(e))
        return report
    report.compression = manifest.compression
    report.rows_per_record = manifest.rows_per_record
    _check_totals(json.loads(raw), manifest, report)
    named = {f.path for f in manifest.files}
    sizes = loc.file_sizes()  # one listing: which files are there, and their bytes
    with Fetcher() as fetcher:
        # the next files are opened (read ahead, on a store) while one is checked
        ahead = 0 if loc.is_local else 4
        opened: dict[int, Any] = {}
        present = [i for i, e in enumerate(manifest.files) if e.path in sizes]
        for k, i in enumerate(present):
            for j in present[k:k + 1 + ahead]:
                if j not in opened:
                    entry = manifest.files[j]
                    opened[j] = fetcher.open(loc.child(entry.path), sizes[entry.path])
            report.bytes += sizes[manifest.files[i].path]
            with opened.pop(i) as stream:
                _check_file(stream, manifest.files[i], manifest.compression, manifest.spec,
                            report, report.rows_per_record)
            progress.step(k + 1, len(present), f"verify: {k + 1}/{len(present)} files, "
                          f"{report.bytes / 2**20:,.1f} MiB checked ({manifest.files[i].path})")
    for entry in manifest.files:
        if entry.path not in sizes:
            report.problems.append(f"{entry.path}: missing (the manifest names it with "
                                   f"{entry.records} records); restore it or rewrite the data "
                                   f"set")
    for rel in sizes:
        if _DATA_FILE.search(rel) and rel not in named and not rel.startswith("_"):
            report.problems.append(f"{rel}: extra data file that the manifest does not name "
                                   f"(readers ignore it; delete it if it is a leftover)")
    if manifest.backup:
        _check_backup(loc, manifest, report)
    return report


def _check_totals(doc: dict[str, Any], manifest: mf.Manifest, report: VerifyReport) -> None:
    """The manifest's totals are its files' sums (readers use the files' entries; other
    tools may read the totals)."""
    block = manifest.rows_per_record > 1
    for key, total in (("records", manifest.records), ("bytes", manifest.bytes),
                       ("rows", manifest.rows if block else None)):
        if key in doc and total is not None and doc[key] != total:
            report.problems.append(f"{mf.NAME}: its total {key!r} is {doc[key]!r} but its "
                                   f"files' entries add up to {total:,}; the manifest was "
                                   f"edited: restore it or rewrite the data set")


def _check_lone(loc: Location, report: VerifyReport) -> VerifyReport:
    """A TFRecord file without a manifest: its framing and both CRCs of every record (no
    count or spec to compare with); its compression found from its first bytes."""
    report.files = 1
    report.checked = ("the framing and both CRCs of every record check out (a file without a "
                      "manifest: no counts or spec to check against)")
    try:
        report.bytes = loc.size()
        with loc.open_input() as f:  # (random access: its first bytes say its compression)
            report.compression = "gzip" if sniff_gzip(f) else None
            for _ in read_records(f, report.compression, path=loc.uri):
                report.records += 1
    except CorruptRecordError as e:
        report.problems.append(str(e))
    except OSError as e:
        report.problems.append(f"cannot read {loc.uri}: {error_line(e)}")
    return report


def is_lone_file(loc: Location) -> bool:
    """Whether loc is a file (a lone TFRecord file, no data set); False when the store will
    not say (the manifest's read then says what went wrong, with what to do)."""
    try:
        return loc.kind() == "file"
    except (OSError, ValueError):  # (the manifest's error says what went wrong)
        return False


def _check_backup(home: Location, manifest: mf.Manifest, report: VerifyReport) -> None:
    """The backup is the one the last write published, and holds the manifest's rows."""
    entry = manifest.backup
    assert entry is not None
    target = entry.target
    if entry.pending is not None:
        report.problems.append(
            f"backup {target}: the last write committed its TFRecords but stopped before its "
            f"staged backup ({entry.pending.staging}) was moved into place; run "
            f"write_tfrecords to this path again (any mode): it finishes the move first")
        return
    try:
        loc = home.child(entry.inside) if entry.inside else \
            home.resolve(uri_to_path(entry.location or target))
        try:
            marker = json.loads(loc.read_bytes(mf.BACKUP_MARKER))
        except FileNotFoundError:  # written by an earlier version: beside the parquet files
            marker = json.loads(loc.read_bytes(mf.BACKUP_MARKER_BEFORE))
        rows = _parquet_rows(loc)
    except (OSError, ValueError, TfsparkError) as e:
        report.problems.append(f"backup {target}: cannot read it ({error_line(e)}); restore it, or "
                               f"rewrite the data set with mode='overwrite'")
        return
    # The write that published the backup: the last one, unless later writes (through the
    # data source) added records without a backup, which leaves the backup incomplete.
    write_id = entry.write_id
    last = manifest.last_write
    if marker.get("write_id") != write_id or (entry.complete and write_id != last):
        report.problems.append(f"backup {target}: belongs to write {marker.get('write_id')} but "
                               f"the data set's manifest says {write_id}: the backup was "
                               f"replaced or restored by something else; rewrite the data set")
    if not entry.complete:
        report.notes.append(f"backup {target}: holds the rows of the data set's write_tfrecords "
                            f"writes only; later writes through the data source have none")
    if rows != entry.rows:
        report.problems.append(f"backup {target}: holds {rows} rows but the manifest records "
                               f"{entry.rows} for it; it was changed after the write: "
                               f"rewrite the data set")
    if entry.complete and entry.rows != manifest.rows:
        report.problems.append(f"backup {target}: holds {entry.rows} rows but the "
                               f"TFRecords hold {manifest.rows}: they disagree; rewrite "
                               f"the data set")
    stale = sorted({r.split("/")[0] for r in loc.list_files()
                    if r.startswith(mf.BACKUP_STAGING)})
    if stale:
        report.notes.append(f"backup {target}: {len(stale)} staging director(ies) of writes "
                            f"that did not commit ({', '.join(stale[:3])}); readers skip them; "
                            f"delete them when no write is running")


def _parquet_rows(loc: Any) -> int:
    """Rows of the parquet files under loc (hidden names skipped), from their footers."""
    import pyarrow.parquet as pq

    rows = 0
    for rel in loc.list_files():
        if any(p.startswith(("_", ".")) for p in rel.split("/")):
            continue
        with loc.open_input(rel) as f:
            rows += pq.ParquetFile(f).metadata.num_rows
    return rows


def _check_file(stream: Any, entry: mf.FileEntry, compression: str | None,
                spec: FeatureSpec | None, report: VerifyReport, block: int) -> None:
    rel = entry.path
    report.files += 1
    count = rows = 0
    chunk: list[bytes] = []
    size = max(1, _CHUNK_RECORDS // block)  # blocks hold many rows each
    try:
        for record in read_records(stream, compression=compression, path=rel):
            chunk.append(record)
            if len(chunk) == size:
                rows += _parse(chunk, spec, rel, count, block)
                count += len(chunk)
                chunk = []
        rows += _parse(chunk, spec, rel, count, block)
        count += len(chunk)
    except AccessError as e:  # not read: nothing known of its records, no count to compare
        report.problems.append(str(e))
        return
    except CorruptRecordError as e:
        report.problems.append(str(e))
        count += len(chunk)
        if _unread(e):  # what it holds past there is unknown: no count to compare
            report.records += count
            return
    except TfsparkError as e:
        report.problems.append(f"{rel}: {e}")
    report.records += count
    if count != entry.records:
        report.problems.append(f"{rel}: holds {count} readable records but the manifest says "
                               f"{entry.records}")
    elif block > 1 and spec is not None and rows != entry.row_count:
        report.problems.append(f"{rel}: its blocks hold {rows} rows but the manifest says "
                               f"{entry.row_count}")
    report.rows += rows if block > 1 and spec is not None else entry.row_count


def _unread(error: CorruptRecordError) -> bool:
    """Whether the file system failed to give the file's bytes (a store's refusal, a
    connection lost), rather than giving damaged ones."""
    cause = error.__cause__
    return isinstance(cause, OSError) and not isinstance(cause, gzip.BadGzipFile)


def _parse(records: list[bytes], spec: FeatureSpec | None, rel: str, first: int,
           block: int = 1) -> int:
    """Parse a chunk with the spec (block records when block > 1); a record that does not
    parse is named by its index. Returns the rows the records hold."""
    if spec is None or not records:
        return len(records)
    from tfspark.arrow.decode import Decoder
    from tfspark.arrow.decode_block import BlockDecoder

    sizes = np.fromiter((len(r) for r in records), dtype=np.int64, count=len(records))
    offsets = np.zeros(len(records) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    buf = np.frombuffer(b"".join(records), dtype=np.uint8)
    try:
        decoder = Decoder(spec) if block == 1 else BlockDecoder(spec)
        return decoder.decode(buf, offsets).num_rows
    except TfsparkError as e:
        raise CorruptRecordError(f"{rel}: a record among records {first}..{first + len(records)}"
                                 f" does not parse with the spec: {e}") from None
