"""The `_tfspark.json` sidecar: spec + files + counts. It is the commit: readers take the files
it names and ignore everything else in the directory (failed attempts, _SUCCESS, .crc files).

Layout of a manifest:
    {"format": "tfspark.store.manifest", "version": 1, "created_by": "tfspark X",
     "record_type": "Example" | "SequenceExample" | "ByteArray", "compression": null | "gzip",
     "spec": {...FeatureSpec...} | null, "partition_by": [...], "splits": [...],
     "schema": {...Spark StructType JSON of the written columns, partition columns included...},
     "records": N, "bytes": B,
     "files": [{"path": "train/part-...tfrecord.gz", "records": n, "bytes": b,
                "split": "train" | null, "partition": {"col": "value"}, "write_id": "..."}],
     "layout": {"rows_per_record": N},    # block layout only; then "rows" beside each
                                          # "records" (of the manifest, files and writes)
     "writes": [{"write_id": "...", "records": n, "files": k}],   # one per append
     "stats": {...},                                                # counts from the workflow
     "backup": {"kind": "path" | "table", "target": ..., "location": ..., "rows": n,
                "complete": bool, "write_id": ...}}   # write_tfrecords' parquet copy
"backup" holds "pending" (the staging, its files) between the commit and the backup's move into
place; "complete": the backup holds every record of the data set.
A split directory also gets its own manifest naming just its files, so it reads on its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NoReturn

from tfspark import __version__
from tfspark.errors import ManifestError, SchemaError
from tfspark.spec.kinds import STORED_RECORD_TYPES
from tfspark.spec.layout import rows_of, rows_per_record
from tfspark.spec.model import FeatureSpec
from tfspark.store.fs import Location, locate

NAME = "_tfspark.json"
SUCCESS = "_SUCCESS"
# In write_tfrecords' backup directory: the marker naming the write the backup belongs to, and
# the hidden staging directories of writes that have not published their backup (yet).
BACKUP_MARKER = "_tfspark_backup.json"
BACKUP_STAGING = "_tfspark_staging-"
FORMAT = "tfspark.store.manifest"
VERSION = 1


def new_manifest(*, spec: dict[str, Any] | None, compression: str | None, record_type: str,
                 partition_by: Iterable[str] = (), rows_per_record: int = 1) -> dict[str, Any]:
    """An empty manifest (no files yet) for a data set of this spec, compression, record type
    and layout."""
    out = {"format": FORMAT, "version": VERSION, "created_by": f"tfspark {__version__}",
           "record_type": record_type, "compression": compression, "spec": spec,
           "partition_by": list(partition_by), "splits": [], "records": 0, "bytes": 0,
           "files": [], "writes": [], "stats": {}}
    if rows_per_record > 1:
        out.update(layout={"rows_per_record": rows_per_record}, rows=0)
    return out


def add_files(manifest: dict[str, Any], files: list[dict[str, Any]], write_id: str) -> None:
    """Add one write's file entries to `manifest` (in place) and recount records, bytes, splits."""
    manifest["files"].extend(files)
    entry = {"write_id": write_id, "records": sum(f["records"] for f in files),
             "files": len(files)}
    if "layout" in manifest:
        entry["rows"] = sum(rows_of(f) for f in files)
    manifest["writes"].append(entry)
    _recount(manifest)


def _recount(manifest: dict[str, Any]) -> None:
    files = manifest["files"]
    manifest["records"] = sum(f["records"] for f in files)
    if "layout" in manifest:
        manifest["rows"] = sum(rows_of(f) for f in files)
    manifest["bytes"] = sum(f["bytes"] for f in files)
    # Declared splits stay even without files (a split that got no rows reads as empty).
    manifest["splits"] = sorted(set(manifest.get("splits") or ()) |
                                {f["split"] for f in files if f.get("split")})


def split_manifest(manifest: dict[str, Any], split: str) -> dict[str, Any]:
    """The manifest of one split directory: its files with paths relative to it."""
    sub = {k: v for k, v in manifest.items() if k not in ("files", "writes")}
    prefix = split + "/"
    sub["files"] = [dict(f, path=f["path"][len(prefix):]) for f in manifest["files"]
                    if f.get("split") == split]
    sub["writes"] = []
    sub["split"] = split
    _recount(sub)
    sub["splits"] = []
    return sub


def dumps(manifest: dict[str, Any]) -> bytes:
    """The manifest as the JSON bytes of a _tfspark.json file (NaN and infinities refused)."""
    return (json.dumps(manifest, indent=1, allow_nan=False) + "\n").encode()


def read_manifest(path: str | Location) -> dict[str, Any]:
    """The manifest in directory `path`; ManifestError says what is wrong and what to do."""
    loc = locate(path) if isinstance(path, str) else path
    if not loc.exists(NAME):
        raise ManifestError(f"no {NAME} in {loc.uri!r}: it was not written by tfspark, or its "
                            f"write did not commit. Rewrite it, or read the files with an "
                            f"explicit spec")
    try:
        raw = loc.read_bytes(NAME)
    except OSError as e:  # no permission, a directory in its place, a failing filesystem
        raise ManifestError(f"cannot read {loc.join(NAME)} ({e}); check that it is a file "
                            f"you may read (permissions, credentials)") from None
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{loc.join(NAME)} is not valid JSON ({e}); the file is damaged, "
                            f"rewrite the data set") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ManifestError(f"{loc.join(NAME)} is not a tfspark manifest")
    if doc.get("version") != VERSION:
        raise ManifestError(f"{loc.join(NAME)} has version {doc.get('version')!r}; this tfspark "
                            f"reads version {VERSION}: upgrade tfspark")
    _check_contents(doc, loc.join(NAME))
    return doc


def _check_contents(doc: dict[str, Any], where: str) -> None:
    """The fields readers rely on, so a manifest edited by hand fails here, naming the file and
    the entry, not deep inside a reader."""
    def bad(what: str) -> NoReturn:
        raise ManifestError(f"{where}: {what}; the manifest is damaged (edited by hand?): "
                            f"restore it or rewrite the data set")

    block = rows_per_record(doc, where)
    files = doc.get("files")
    if not isinstance(files, list):
        bad(f"'files' must be a list of file entries, got {type(files).__name__}")
    for i, f in enumerate(files):
        if not isinstance(f, dict):
            bad(f"files[{i}] must be an object, got {type(f).__name__}")
        rel = f.get("path")
        if not isinstance(rel, str) or not rel or rel.startswith(("/", "\\")) or "://" in rel \
                or ".." in rel.replace("\\", "/").split("/"):
            bad(f"files[{i}] names {rel!r}, which is not a relative path inside the directory")
        for key in ("records", "bytes", "rows"):
            n = f.get(key, 0) if key != "records" else f.get(key)
            if type(n) is not int or n < 0:
                bad(f"files[{i}] ({rel}) has {key}={n!r}, not an integer >= 0")
        if block > 1 and "rows" not in f:
            bad(f"files[{i}] ({rel}) has no 'rows', which the block layout needs")
    record_type = doc.get("record_type", "Example")
    if record_type not in STORED_RECORD_TYPES:
        bad(f"record_type {record_type!r} is not one of {list(STORED_RECORD_TYPES)}")
    if doc.get("compression") not in (None, "gzip"):
        bad(f"compression {doc.get('compression')!r} is not null or 'gzip'")
    if doc.get("spec") is not None:
        try:
            spec = FeatureSpec.from_dict(doc["spec"])
        except SchemaError as e:
            bad(f"its spec is invalid: {e}")
        if spec.record_type != record_type:
            bad(f"record_type {record_type!r} but its spec is for {spec.record_type!r} records")


def write_manifest(loc: Location, manifest: dict[str, Any]) -> None:
    """Split manifests first, then the top one, then _SUCCESS, each replaced atomically."""
    for split in manifest.get("splits", []):
        loc.write_bytes_atomic(f"{split}/{NAME}", dumps(split_manifest(manifest, split)))
    loc.write_bytes_atomic(NAME, dumps(manifest))
    loc.write_bytes_atomic(SUCCESS, b"")


def feature_stats(manifest: dict[str, Any], split: str | None = None) -> dict[str, Any] | None:
    """{feature: statistics} the write stored (spark/stats.py): of one split, or of all rows
    when split is None; None when there are none."""
    stats = manifest.get("stats") or {}
    if split is not None:
        return (stats.get("splits") or {}).get(split) or None
    return stats.get("features") or None


def stats_splits(manifest: dict[str, Any]) -> list[str]:
    """The splits that have statistics, sorted (for error messages)."""
    return sorted((manifest.get("stats") or {}).get("splits") or {})

