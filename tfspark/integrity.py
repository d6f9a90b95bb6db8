"""`tfspark verify PATH` (tfspark.verify): check a data set against its manifest, every byte.

Reads every file the manifest names, checks both CRCs of every record, compares record counts
per file with the manifest, parses every record with the spec, and lists files in the
directory that the manifest does not name. No Spark, no TensorFlow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfspark import manifest as mf
from tfspark.errors import CorruptRecordError, TfsparkError
from tfspark.fs import locate
from tfspark.spec.model import FeatureSpec
from tfspark.wire.stream import read_records

_DATA_FILE = re.compile(r"\.tfrecords?(\.gz)?$")
_CHUNK_RECORDS = 10_000


@dataclass
class Report:
    """What `verify` found: totals read and the list of problems (empty when the data set is ok)."""

    path: str
    files: int = 0
    records: int = 0
    bytes: int = 0
    compression: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def render(self, limit: int = 20) -> str:
        """The report as text for the terminal, listing at most `limit` problems."""
        lines = [f"tfspark verify {self.path}",
                 f"  files {self.files:,}  records {self.records:,}  bytes {self.bytes:,}  "
                 f"compression {self.compression or 'none'}"]
        if self.ok:
            lines.append("  OK: every CRC, count and record checks out")
            return "\n".join(lines)
        lines.append(f"  {len(self.problems)} problem(s):")
        lines += [f"  - {p}" for p in self.problems[:limit]]
        if len(self.problems) > limit:
            lines.append(f"  ... and {len(self.problems) - limit} more")
        return "\n".join(lines)


def verify(path: str) -> Report:
    """Check the data set at `path` against its manifest: every file present, both CRCs of every
    record, record counts, every record parsed with the spec, no stray data files.

    Problems (including a missing manifest) are collected in the Report, not raised.
    """
    report = Report(path)
    loc = locate(path)
    try:
        manifest = mf.read_manifest(loc)
    except TfsparkError as e:
        report.problems.append(str(e))
        return report
    report.compression = manifest.get("compression")
    spec = FeatureSpec.from_dict(manifest["spec"]) if manifest.get("spec") else None
    named = {f["path"] for f in manifest["files"]}
    for entry in manifest["files"]:
        _check_file(loc, entry, manifest.get("compression"), spec, report)
    for rel in loc.list_files():
        if _DATA_FILE.search(rel) and rel not in named and not rel.startswith("_"):
            report.problems.append(f"{rel}: extra data file that the manifest does not name "
                                   f"(readers ignore it; delete it if it is a leftover)")
    return report


def _check_file(loc: Any, entry: dict[str, Any], compression: str | None,
                spec: FeatureSpec | None, report: Report) -> None:
    rel = entry["path"]
    if not loc.exists(rel):
        report.problems.append(f"{rel}: missing (the manifest names it with {entry['records']} "
                               f"records); restore it or rewrite the data set")
        return
    report.files += 1
    count = 0
    chunk: list[bytes] = []
    try:
        with loc.fs.open_input_stream(loc.join(rel), compression=None) as f:
            for record in read_records(f, compression=compression, path=rel):
                chunk.append(record)
                if len(chunk) == _CHUNK_RECORDS:
                    _parse(chunk, spec, rel, count)
                    count += len(chunk)
                    chunk = []
        _parse(chunk, spec, rel, count)
        count += len(chunk)
    except CorruptRecordError as e:
        report.problems.append(str(e))
        count += len(chunk)
    except TfsparkError as e:
        report.problems.append(f"{rel}: {e}")
    report.records += count
    report.bytes += loc.fs.get_file_info(loc.join(rel)).size
    if count != entry["records"]:
        report.problems.append(f"{rel}: holds {count} readable records but the manifest says "
                               f"{entry['records']}")


def _parse(records: list[bytes], spec: FeatureSpec | None, rel: str, first: int) -> None:
    """Parse a chunk with the spec; a record that does not parse is named by its index."""
    if spec is None or not records:
        return
    from tfspark.arrow.decode import decode_records

    sizes = np.fromiter((len(r) for r in records), dtype=np.int64, count=len(records))
    offsets = np.zeros(len(records) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    buf = np.frombuffer(b"".join(records), dtype=np.uint8)
    try:
        decode_records(buf, offsets, spec)
    except TfsparkError as e:
        raise CorruptRecordError(f"{rel}: a record among records {first}..{first + len(records)}"
                                 f" does not parse with the spec: {e}") from None
