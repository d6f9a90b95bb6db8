"""The `_tfspark.json` sidecar, as a typed Manifest: spec + files + counts. It is the commit:
readers take the files it names and ignore everything else in the directory (failed attempts,
_SUCCESS, .crc files).

On disk (the format older tfspark versions read; `Manifest.to_dict` writes it):
    {"format": "tfspark.manifest", "version": 1, "created_by": "tfspark X",
     "record_type": "Example" | "SequenceExample" | "ByteArray", "compression": null | "gzip",
     "spec": {...FeatureSpec...} | null, "partition_by": [...], "splits": [...],
     "schema": {...Spark StructType JSON of the written columns, partition columns included...},
     "records": N, "bytes": B,
     "files": [{"path": "train/part-...tfrecord.gz", "records": n, "bytes": b,
                "split": "train" | null, "partition": {"col": "value"}, "write_id": "..."}],
     "layout": {"rows_per_record": N},    # block layout only; then "rows" beside each
                                          # "records" (of the manifest, files and writes)
     "writes": [{"write_id": "...", "records": n, "files": k}],   # one per append
     "stats": {...},               # counts; "side" names the statistics files
     "backup": {"kind": "path" | "table", "target": ..., "location": ..., "rows": n,
                "complete": bool, "write_id": ...}}   # write_tfrecords' parquet copy
"backup" holds "pending" (the staging, its files) between the commit and the backup's move into
place; "inside": the backup's path relative to the data set when it lies inside it (so a copy
of the data set finds its copy of the backup); "complete": the backup holds every record of
the data set. A split directory also gets its own manifest naming just its files (and
"split": its name), so it reads on its own. Keys this version does not know are kept as they
are (`extra`).
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tfspark import __version__
from tfspark.errors import ManifestError, OptionError, SchemaError, store_hint
from tfspark.spec.kinds import STORED_RECORD_TYPES
from tfspark.spec.model import FeatureSpec
from tfspark.store.fs import Location, locate
from tfspark.store.stats import files as stats_files
from tfspark.store.uris import error_line, redact

NAME = "_tfspark.json"
SUCCESS = "_SUCCESS"
# In write_tfrecords' backup directory: the marker naming the write the backup belongs to, and
# the hidden staging directories of writes that have not published their backup (yet).
# In the parquet copy's directory, the write it belongs to: in a hidden subdirectory, so that
# what reads the directory's files (DuckDB's read_parquet('dir/*'), pyarrow, Spark) meets only
# parquet files; data sets written before kept it beside them (BACKUP_MARKER_BEFORE).
BACKUP_MARKER = "_tfspark/backup.json"
BACKUP_MARKER_BEFORE = "_tfspark_backup.json"
BACKUP_STAGING = "_tfspark_staging-"
FORMAT = "tfspark.manifest"
VERSION = 1
_KNOWN = {"format", "version", "created_by", "description", "record_type", "compression",
          "spec", "partition_by", "splits", "schema", "records", "bytes", "rows", "files",
          "layout", "writes", "stats", "backup", "split"}


@dataclass(frozen=True)
class FileEntry:
    """One data file: its path (relative to the manifest's directory), records and bytes, the
    split and partition it belongs to, the write that made it and (block layout) its rows."""

    path: str
    records: int
    bytes: int
    split: str | None = None
    partition: Mapping[str, str | None] = field(default_factory=dict)
    write_id: str | None = None
    rows: int | None = None  # the block layout's rows; None: one row per record

    @property
    def row_count(self) -> int:
        """Rows in the file: `rows` in the block layout, else its records."""
        return self.records if self.rows is None else self.rows

    def to_dict(self) -> dict[str, Any]:
        """The entry as stored."""
        out: dict[str, Any] = {"path": self.path, "records": self.records, "bytes": self.bytes,
                               "split": self.split}
        if self.partition:
            out["partition"] = dict(self.partition)
        if self.write_id is not None:
            out["write_id"] = self.write_id
        if self.rows is not None:
            out["rows"] = self.rows
        return out


@dataclass(frozen=True)
class WriteEntry:
    """One committed write: its id, records, files and (block layout) rows."""

    write_id: str
    records: int
    files: int
    rows: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The entry as stored."""
        out: dict[str, Any] = {"write_id": self.write_id, "records": self.records,
                               "files": self.files}
        if self.rows is not None:
            out["rows"] = self.rows
        return out


@dataclass(frozen=True)
class PendingBackup:
    """A committed write's backup not yet moved into place: its staging (a directory, or a
    catalog table), the mode it joins the backup with ("overwrite" or "append"), the staged
    files (a directory's, relative to the staging) and, for a table's append, the rows the
    table held before it (so a publish stopped half way can tell whether it inserted)."""

    staging: str
    mode: str
    files: tuple[str, ...] | None = None
    rows_before: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """As the manifest's JSON holds it."""
        out: dict[str, Any] = {"staging": self.staging, "mode": self.mode}
        if self.files is not None:
            out["files"] = list(self.files)
        if self.rows_before is not None:
            out["rows_before"] = self.rows_before
        return out


@dataclass(frozen=True)
class BackupEntry:
    """The manifest's record of the data set's parquet copy (module docstring): its kind
    ("path": a directory, "table": a catalog table), target (as the user named it) and
    location (where it was published), its rows, whether it holds every row of the data set
    (complete), the write that published it, its place inside the data set when it lies
    there, and what is still pending between the commit and its move into place."""

    kind: str
    target: str
    rows: int | None = None
    complete: bool = True
    location: str | None = None
    write_id: str | None = None
    inside: str | None = None
    pending: PendingBackup | None = None

    def to_dict(self) -> dict[str, Any]:
        """As the manifest's JSON holds it."""
        out: dict[str, Any] = {"kind": self.kind, "target": self.target, "rows": self.rows,
                               "complete": self.complete}
        for key in ("location", "write_id", "inside"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.pending is not None:
            out["pending"] = self.pending.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Any, bad: Any) -> BackupEntry:
        """The entry as the manifest holds it; `bad` says what is wrong with a damaged one."""
        if not isinstance(d, Mapping) or d.get("kind") not in ("path", "table") or \
                not isinstance(d.get("target"), str):
            bad(f"'backup' must be an object with kind 'path' or 'table' and a target, got "
                f"{d!r:.200}")
        rows = d.get("rows")
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int)):
            bad(f"backup rows={rows!r}, not an integer")
        p = d.get("pending")
        if p is not None and (not isinstance(p, Mapping) or not isinstance(p.get("staging"), str)
                              or p.get("mode") not in ("overwrite", "append")):
            bad(f"backup 'pending' {p!r:.200} is not a staging with a mode")
        pending = None if p is None else PendingBackup(
            p["staging"], p["mode"], tuple(p["files"]) if p.get("files") is not None else None,
            p.get("rows_before"))
        return cls(d["kind"], d["target"], rows, bool(d.get("complete", True)),
                   d.get("location"), d.get("write_id"), d.get("inside"), pending)


@dataclass(frozen=True)
class Manifest:
    """A data set's manifest (module docstring). Counts are derived from the files."""

    spec: FeatureSpec | None = None
    record_type: str = "Example"
    compression: str | None = None
    partition_by: tuple[str, ...] = ()
    splits: tuple[str, ...] = ()
    files: tuple[FileEntry, ...] = ()
    writes: tuple[WriteEntry, ...] = ()
    rows_per_record: int = 1
    schema: Mapping[str, Any] | None = None
    stats: Mapping[str, Any] = field(default_factory=dict)
    backup: BackupEntry | None = None
    split: str | None = None  # a split directory's manifest: its split
    created_by: str = f"tfspark {__version__}"
    description: str | None = None  # the writer's note on the data set
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys this version does not know
    # where it was read from: its statistics files are found from there
    home: Location | None = field(default=None, compare=False, repr=False)
    _loaded: dict = field(default_factory=dict, compare=False, repr=False)

    # ---------------------------------------------------------------- counts and lookups

    @property
    def records(self) -> int:
        """Records of all files."""
        return sum(f.records for f in self.files)

    @property
    def rows(self) -> int:
        """Rows of all files (records in the row layout)."""
        return sum(f.row_count for f in self.files)

    @property
    def bytes(self) -> int:
        """Bytes of all files."""
        return sum(f.bytes for f in self.files)

    @property
    def last_write(self) -> str | None:
        """The id of the last committed write (None: none)."""
        return self.writes[-1].write_id if self.writes else None

    def files_of(self, write_id: str | None = None, split: str | None = None
                 ) -> tuple[FileEntry, ...]:
        """The files of one write and/or one split (all for None)."""
        return tuple(f for f in self.files if (write_id is None or f.write_id == write_id)
                     and (split is None or f.split == split))

    def rows_of_split(self, split: str | None) -> int:
        """Rows of one split (all rows for None)."""
        return sum(f.row_count for f in self.files_of(split=split))

    def stats_scope(self) -> str | None:
        """None: the statistics are of every row; else which rows they are of (an append's
        statistics are of its own rows: the earlier rows' sketches are not kept)."""
        if self.stats.get("features_scope") != "last write":
            return None
        rows = (self.stats.get("rows") or {}).get("source")
        of = f"{rows:,} " if isinstance(rows, int) else ""
        return f"the last write's {of}rows only, an append: not all {self.rows:,}"

    def feature_stats(self, split: str | None = None) -> dict[str, Any] | None:
        """{feature: statistics} the write stored (spark.stats): of one split, or of all
        rows when split is None; None when there are none. Those of an append are of its
        own rows (stats_scope), said once by a warning."""
        scope = self.stats_scope()
        if scope is not None and "scope said" not in self._loaded:
            import warnings

            from tfspark.store.uris import redact

            self._loaded["scope said"] = True
            where = redact(self.home.uri) if self.home is not None else "this data set"
            warnings.warn(f"the statistics of {where} are of {scope}: an overwrite with every "
                          f"row gives statistics of all of them", stacklevel=2)
        side = self.stats.get("side")
        if side is None:  # written by a tfspark that kept them inside the manifest
            if split is not None:
                return (self.stats.get("splits") or {}).get(split) or None
            return self.stats.get("features") or None
        key = (side.get("dir"), split)  # a replace()d manifest may name other files
        if key not in self._loaded:
            if self.home is None:
                raise ManifestError("this manifest's statistics are in files beside it: read "
                                    "it with tfspark.store.manifest.read_manifest(path)")
            root = self.home.parent() if self.split is not None else self.home
            assert root is not None
            self._loaded[key] = stats_files.load(root, side, split)
        return self._loaded[key] or None

    def check_split(self, split: str | None, where: str) -> None:
        """OptionError when `split` is given and this data set (at `where`) has no such split."""
        if split is None or split in self.splits:
            return
        where = redact(where)
        if not self.splits:
            raise OptionError(f"no split {split!r} in {where}: it was written without "
                              f"split=; leave split out")
        raise OptionError(f"no split {split!r} in {where}; its splits are {list(self.splits)}")

    def stats_splits(self) -> list[str]:
        """The splits that have statistics, sorted (for error messages)."""
        side = self.stats.get("side")
        return sorted(side.get("splits") or () if side else self.stats.get("splits") or {})

    # ---------------------------------------------------------------- changes

    def with_files(self, files: Iterable[FileEntry], write_id: str) -> Manifest:
        """This manifest with one more write's files (and its splits) added."""
        files = tuple(files)
        rows = sum(f.row_count for f in files) if self.rows_per_record > 1 else None
        entry = WriteEntry(write_id, sum(f.records for f in files), len(files), rows)
        splits = set(self.splits) | {f.split for f in files if f.split}
        return dataclasses.replace(self, files=self.files + files,
                                   writes=self.writes + (entry,), splits=tuple(sorted(splits)))

    def for_split(self, split: str) -> Manifest:
        """The manifest of one split directory: its files with paths relative to it."""
        prefix = split + "/"
        files = tuple(dataclasses.replace(f, path=f.path[len(prefix):]) for f in self.files
                      if f.split == split)
        return dataclasses.replace(self, files=files, writes=(), splits=(), split=split,
                                   home=self.home.child(split) if self.home else None)

    # ---------------------------------------------------------------- JSON

    def to_dict(self) -> dict[str, Any]:
        """The manifest as stored (the format older versions read)."""
        out: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "created_by": self.created_by,
            "record_type": self.record_type, "compression": self.compression,
            "spec": self.spec.to_dict() if self.spec is not None else None,
            "partition_by": list(self.partition_by), "splits": list(self.splits),
            "records": self.records, "bytes": self.bytes,
            "files": [f.to_dict() for f in self.files],
            "writes": [w.to_dict() for w in self.writes], "stats": dict(self.stats)}
        if self.rows_per_record > 1:
            out.update(layout={"rows_per_record": self.rows_per_record}, rows=self.rows)
        if self.schema is not None:
            out["schema"] = dict(self.schema)
        if self.description is not None:
            out["description"] = self.description
        if self.backup is not None:
            out["backup"] = self.backup.to_dict()
        if self.split is not None:
            out["split"] = self.split
        return {**self.extra, **out}

    def dumps(self) -> builtins.bytes:
        """The bytes of a _tfspark.json file (NaN and infinities refused)."""
        return (json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n").encode()

    @classmethod
    def from_dict(cls, doc: Any, where: str = "the manifest") -> Manifest:
        """The Manifest of a stored one; ManifestError names the entry that is wrong (so a
        manifest edited by hand fails here, not deep inside a reader)."""
        def bad(what: str) -> NoReturn:
            raise ManifestError(f"{where}: {what}; the manifest is damaged (edited by hand?): "
                                f"restore it or rewrite the data set")

        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ManifestError(f"{where} is not a tfspark manifest")
        if doc.get("version") != VERSION:
            raise ManifestError(f"{where} has version {doc.get('version')!r}; this tfspark "
                                f"reads version {VERSION}: upgrade tfspark")
        layout = doc.get("layout") or {}
        block = layout.get("rows_per_record", 1) if isinstance(layout, Mapping) else None
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            bad(f"layout {layout!r} is not {{'rows_per_record': N}} with N >= 1")
        files = doc.get("files")
        if not isinstance(files, list):
            bad(f"'files' must be a list of file entries, got {type(files).__name__}")
        record_type = doc.get("record_type", "Example")
        if record_type not in STORED_RECORD_TYPES:
            bad(f"record_type {record_type!r} is not one of {list(STORED_RECORD_TYPES)}")
        if doc.get("compression") not in (None, "gzip"):
            bad(f"compression {doc.get('compression')!r} is not null or 'gzip'")
        spec = None
        if doc.get("spec") is not None:
            try:
                spec = FeatureSpec.from_dict(doc["spec"])
            except SchemaError as e:
                bad(f"its spec is invalid: {e}")
            if spec.record_type != record_type:
                bad(f"record_type {record_type!r} but its spec is for {spec.record_type!r} "
                    f"records")
        try:
            return cls(
                spec=spec, record_type=record_type, compression=doc.get("compression"),
                partition_by=tuple(doc.get("partition_by") or ()),
                splits=tuple(doc.get("splits") or ()),
                files=tuple(_file(f, i, block, bad) for i, f in enumerate(files)),
                writes=tuple(WriteEntry(w["write_id"], w["records"], w["files"], w.get("rows"))
                             for w in doc.get("writes") or ()),
                rows_per_record=block, schema=doc.get("schema"), stats=doc.get("stats") or {},
                backup=None if doc.get("backup") is None else BackupEntry.from_dict(
                    doc["backup"], bad), split=doc.get("split"),
                created_by=doc.get("created_by", ""), description=doc.get("description"),
                extra={k: v for k, v in doc.items() if k not in _KNOWN})
        except (KeyError, TypeError) as e:
            bad(f"a write entry lacks {e}")


def _file(f: Any, i: int, block: int, bad: Any) -> FileEntry:
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
    return FileEntry(rel, f["records"], f["bytes"], f.get("split"), f.get("partition") or {},
                     f.get("write_id"), f.get("rows"))


def read_manifest(path: str | os.PathLike | Location, filesystem: Any = None) -> Manifest:
    """The manifest of a data set: its spec, files, counts, splits and statistics.

    Args:
        path: the data set's directory or URI.
        filesystem: a pyarrow or fsspec filesystem. Default: from the path.

    Returns:
        The Manifest.

    Raises:
        ManifestError: what is wrong (no data set there, a damaged manifest) and what to do.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"x": [1.0, 2.0]}), "ds", split={"a": 1.0})
        >>> manifest = tfspark.read_manifest("ds")
        >>> manifest.rows, manifest.splits, manifest.spec.names
        (2, ('a',), ['x'])
    """
    loc = locate(path, filesystem)
    manifest = find_manifest(loc)
    if manifest is None:
        raise no_manifest(loc)
    return manifest


def no_manifest(loc: Location, split: str | None = None) -> ManifestError:
    """Why directory loc (nor its `split` directory) holds no manifest: it does not exist (a
    mistyped path), or it is not a data set of tfspark's. Asked only on this error path (on a
    store, one round trip more)."""
    try:
        missing = not loc.exists()
    except OSError:  # cannot tell: say what was looked for
        missing = False
    if missing:
        return ManifestError(f"{loc.uri!r} does not exist: check the path" +
                             ("" if loc.is_local else " and its bucket"))
    where = f"{loc.uri!r}" + (f" nor in its {split!r} directory" if split else "")
    return ManifestError(f"no {NAME} in {where}: it was not written by tfspark, or its write "
                         f"did not commit. Rewrite it, or read the files with an explicit spec")


def find_manifest(loc: Location) -> Manifest | None:
    """The manifest in directory loc, or None when it has none: one read, no separate
    existence check (a round trip saved on an object store)."""
    try:
        raw = loc.read_bytes(NAME)
    except FileNotFoundError:
        return None
    except OSError as e:  # no permission, a directory in its place, a failing filesystem
        raise unreadable(loc, e) from None
    return manifest_of(loc, raw)


# What a refused manifest's error says to a Python caller; the command line says its own.
SPARK_CREDENTIALS_HINT = ("a data set written with the credentials in Spark's Hadoop settings "
                          "reads with filesystem=tfspark.spark.spark_filesystem(spark, path)")


def unreadable(loc: Location, error: OSError) -> ManifestError:
    """The error of a manifest in loc that is there but cannot be read."""
    what = store_hint(error) or "check that it is a file you may read (permissions, " \
        "credentials)" + ("" if loc.is_local else f"; {SPARK_CREDENTIALS_HINT}")
    return ManifestError(f"cannot read {loc.child(NAME).uri} ({error_line(error)}); {what}")


def manifest_of(loc: Location, raw: bytes) -> Manifest:
    """The manifest of directory loc from its bytes; ManifestError when they are not one."""
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ManifestError(f"{loc.join(NAME)} is not valid JSON ({e}); the file is damaged, "
                            f"rewrite the data set") from None
    return dataclasses.replace(Manifest.from_dict(doc, loc.join(NAME)), home=loc)


def write_manifest(loc: Location, manifest: Manifest, seen: set[str] | None = None) -> None:
    """The statistics files first, then the split manifests, then the top
    one, then _SUCCESS, each replaced atomically; then the statistics no manifest names go.
    seen: the names at loc's top level before (the commit lock's listing, on a store, whose
    requests are slow): _SUCCESS is written only where it is not there; None: written."""
    side = manifest.stats.get("side")
    if any(k in manifest.stats for k in stats_files.HEAVY):
        light = stats_files.move_aside(loc, manifest.stats, manifest.last_write or "stats")
        manifest = dataclasses.replace(manifest, stats=light)
        side = light["side"]
    loc.at_once(lambda split: loc.write_bytes_atomic(  # (on a store at once)
        f"{split}/{NAME}", manifest.for_split(split).dumps()), manifest.splits)
    loc.write_bytes_atomic(NAME, manifest.dumps())
    if seen is None or SUCCESS not in seen:
        loc.write_bytes_atomic(SUCCESS, b"")
    stats_files.sweep(loc, side["dir"] if side else None)
