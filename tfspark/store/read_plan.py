"""What a reader reads: files, spec, compression, labels and per-file counts, from a tfspark
directory (its manifest), one split of it, explicit TFRecord files with a spec, or (spark.read)
a directory of TFRecord files without a manifest.

One planner for all three readers: make_dataset (tfspark.tf) and read_batches (tfspark.numpy)
plan a training read (one split at a time, a spec to parse with); spark.read (tfspark.spark)
plans a table read (`whole=True`: every split of a data set, raw records, files without a
manifest). The spec a read parses with is one given to the reader (a FeatureSpec, its JSON or
dict, a spec file, a manifest or a data set's path) or the manifest's, and a given one is
checked to name keys the records hold (a spec of other files would read rows of pure
defaults). No TensorFlow and no pyspark, so a bad path, split, spec or label fails before any
pipeline or Spark job is built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from tfspark.errors import OptionError, SchemaError, TfsparkError
from tfspark.spec.model import FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.commit import write_id_of
from tfspark.store.fs import Location, locate
from tfspark.store.partitions import in_partition, partition_of
from tfspark.store.uris import failed_request
from tfspark.wire.compression import normalize_compression, sniff_gzip

SNIFF = "auto"  # a file's compression, found from its first bytes when it is opened


@dataclass(frozen=True)
class ReadPlan:
    """What a reader will read: the files (Locations: each on its filesystem), the spec,
    compression, labels, and (with a manifest) each file's record count, rows (block layout)
    and partition values."""

    locations: tuple[Location, ...]  # the files
    spec: FeatureSpec | None  # None only for table reads of raw records or foreign files
    compression: str | None  # None | "gzip": the manifest's, or the files' when all agree
    labels: tuple[str, ...]
    records: tuple[int, ...] | None = None  # per file, from the manifest; None: unknown
    compressions: tuple[str | None, ...] | None = None  # per file, when they differ (SNIFF:
    #                                                     found when the file is opened)
    rows_per_record: int = 1  # the layout: > 1 for blocks of rows (spec.layout)
    rows: tuple[int, ...] | None = None  # per file, block layout: rows (records are blocks)
    spec_given: bool = False  # spec= came from the caller, not from the data set's manifest
    root: str = ""  # the directory read (a split's own with split=); "" for explicit files
    rels: tuple[str, ...] = ()  # the files relative to root
    partitions: tuple[Mapping[str, str | None], ...] = ()  # per file (partition_by values)
    manifest: mf.Manifest | None = field(default=None, compare=False)
    record_type: str = "Example"
    home: Location | None = None  # the directory read, on its filesystem (root, for people)
    sizes: tuple[int, ...] | None = None  # per file, bytes (the manifest's: no request each)
    versions: tuple[str | None, ...] | None = None  # per file, the write that made it

    @property
    def files(self) -> tuple[str, ...]:
        """The files as people read them: local paths, or URIs without their query."""
        return tuple(f.base if f.is_local else f.uri for f in self.locations)

    def file_compressions(self) -> tuple[str | None, ...]:
        """Each file's compression (None, "gzip", or SNIFF)."""
        return self.compressions or (self.compression,) * len(self.locations)

    def file_rows(self) -> tuple[int, ...] | None:
        """Each file's rows (records in the row layout); None when unknown."""
        return self.rows if self.rows is not None else self.records

    @property
    def example_spec(self) -> FeatureSpec:
        """The spec to parse with (a training read always has one)."""
        if self.spec is None:
            raise _raw_records(self.root, self.record_type)
        return self.spec


def _raw_records(where: str, record_type: str) -> SchemaError:
    return SchemaError(f"{where!r} holds raw records (record_type {record_type!r}), not "
                       f"tf.train.Example: there is no spec to parse them with. Read them with "
                       f"tf.data.TFRecordDataset")


def plan_read(path_or_files: Any, *, split: str | None = None,
              spec: FeatureSpec | str | dict | None = None,
              label_cols: Iterable[str] | str | None = None, compression: str | None = None,
              check_files: bool = True, whole: bool = False,
              record_type: str | None = None, filesystem: Any = None,
              columns: Iterable[str] | str | None = None) -> ReadPlan:
    """Files, spec, compression and labels to read; errors come here, before any training.

    check_files: every file must exist (a missing one is named in the error). A spec given
    here must name keys the records hold (checked on the first records). whole (spark.read):
    a data set with splits reads all of them unless split= picks one, `compression` overrides
    the manifest's, `record_type` must agree with it, and a directory without a manifest reads
    its TFRecord files (no spec: the caller infers one). filesystem: where the paths are (a
    pyarrow or fsspec filesystem); default: from each path (local, or a URI's scheme).
    columns: the features to read (the labels come too); default: all the spec's.
    """
    if whole:
        return _plan_table(locate(path_or_files, filesystem), split, compression, record_type)
    plan = _plan(path_or_files, split, spec=spec, label_cols=label_cols, compression=compression,
                 check_files=check_files, filesystem=filesystem)
    if spec is not None and check_files:
        check_spec_keys(plan)
    if columns is not None:
        plan = _pick_columns(plan, columns)
    return replace(plan, spec_given=spec is not None)


def _pick_columns(plan: ReadPlan, columns: Iterable[str] | str) -> ReadPlan:
    """The plan reading only `columns` and the labels (the records' other keys are skipped)."""
    cols = [columns] if isinstance(columns, str) else columns
    if not isinstance(cols, Iterable) or not (cols := list(cols)) or \
            not all(isinstance(c, str) for c in cols):
        raise OptionError(f"columns must be a feature name or a non-empty list of them, got "
                          f"{columns!r}")
    spec = plan.example_spec
    spec.check_names(cols, "columns", OptionError)
    keep = set(cols) | set(plan.labels)
    return replace(plan, spec=replace(spec, features=tuple(
        f for f in spec.features if f.name in keep)))


def _plan(path_or_files: Any, split: str | None, *, spec: Any, label_cols: Any,
          compression: str | None, check_files: bool, filesystem: Any) -> ReadPlan:
    if isinstance(path_or_files, (str, os.PathLike, Location)):
        loc = locate(path_or_files, filesystem)
        ahead = _listing_ahead(loc, split, check_files)
        # The manifest first: the common case costs no existence check (a round trip).
        levels: dict[str, str] | None = None  # a partition's directory: its col=value levels
        try:
            top = mf.find_manifest(loc) if split is None else None
            if top is None and split is None and loc.kind() == "file":
                raise mf.ManifestError("a file")
            root, manifest = _resolve_split(loc, split, whole=False, top=top)
        except (mf.ManifestError, NotADirectoryError) as e:
            inside = partition_of(loc)
            if inside is None:
                try:
                    one_file = loc.kind() == "file"
                except OSError:  # (the store failing again: the first error says it)
                    one_file = False
                if not one_file:
                    raise
                return _plan([loc], split, spec=spec, label_cols=label_cols,
                             compression=compression, check_files=check_files,
                             filesystem=filesystem)
            root, manifest = _resolve_split(inside[0], split, whole=False,
                                            top=inside[1] if split is None else None)
            levels, missing = inside[2], e
        plan = _from_manifest(root, manifest, compression, override=False, partition=levels)
        if levels is not None and not plan.locations:  # no such partition
            raise missing
        if manifest.spec is None:
            raise _raw_records(root.uri, manifest.record_type)
        feature_spec = load_spec(spec, filesystem)[0] if spec is not None else \
            plan.example_spec
        if feature_spec.record_type != manifest.record_type:
            raise SchemaError(f"{root.uri!r} holds {manifest.record_type} records but the spec "
                              f"given is for {feature_spec.record_type} records; leave spec= "
                              f"out or give one of this data set's record type")
        if check_files:
            _check_exist(list(plan.locations), root, list(plan.rels), ahead)
        return replace(plan, spec=feature_spec, labels=_labels(feature_spec, label_cols))
    if isinstance(path_or_files, (bytes, dict)) or not isinstance(path_or_files, Iterable):
        raise OptionError(f"path_or_files must be a data set's directory (a path or URI) or a "
                          f"list of TFRecord files, got {type(path_or_files).__name__}")
    files = [locate(f, filesystem) for f in path_or_files]
    if not files:
        raise OptionError("path_or_files is an empty list: give a data set's directory, or at "
                          "least one TFRecord file")
    if split is not None:
        raise OptionError("split= only applies to a tfspark directory, not to a list of files")
    if spec is None:
        raise OptionError(f"reading {len(files)} explicit file(s) needs spec=: a FeatureSpec, "
                          f"its JSON, or the path of a spec or _tfspark.json file")
    feature_spec, given = load_spec(spec, filesystem)
    hint = given.compression if given else None
    # Block files read as blocks only when the manifest given as spec= says so.
    block = given.rows_per_record if given else 1
    if check_files:
        _check_exist(files, None)
    labels = _labels(feature_spec, label_cols)
    if compression is not None or hint is not None:
        comp = normalize_compression(compression) if compression is not None else hint
        return ReadPlan(tuple(files), feature_spec, comp, labels, rows_per_record=block)
    # No manifest says: each file's first bytes do, as for every tfspark reader.
    comps = tuple(_sniff(f) for f in files)
    common = comps[0] if len(set(comps)) == 1 else None
    return ReadPlan(tuple(files), feature_spec, common, labels,
                    compressions=None if len(set(comps)) <= 1 else comps, rows_per_record=block)


def _from_manifest(root: Location, manifest: mf.Manifest, compression: str | None,
                   override: bool, split: str | None = None,
                   partition: Mapping[str, str] | None = None) -> ReadPlan:
    """The plan of the files a manifest names (of one split, of one partition when given)."""
    comp = manifest.compression
    if compression is not None and normalize_compression(compression) != comp:
        if not override:
            raise OptionError(f"compression={compression!r} disagrees with the manifest of "
                              f"{root.uri!r} ({comp or 'none'}); leave compression unset for "
                              f"directories")
        comp = normalize_compression(compression)
    entries = manifest.files_of(split=split)
    if partition is not None:
        entries = tuple(e for e in entries if in_partition(e, partition))
    rels = tuple(_safe_rel(e.path, root.uri) for e in entries)
    block = manifest.rows_per_record
    return ReadPlan(tuple(root.child(r) for r in rels), manifest.spec, comp,
                    tuple(manifest.spec.label_names) if manifest.spec else (),
                    tuple(e.records for e in entries), rows_per_record=block,
                    rows=tuple(e.row_count for e in entries) if block > 1 else None,
                    root=root.uri, rels=rels, partitions=tuple(e.partition for e in entries),
                    manifest=manifest, record_type=manifest.record_type, home=root,
                    sizes=tuple(e.bytes for e in entries),
                    versions=tuple(e.write_id or manifest.last_write for e in entries))


def _plan_table(loc: Location, split: str | None, compression: str | None,
                record_type: str | None) -> ReadPlan:
    """spark.read's plan (plan_read's `whole`)."""
    path = loc.uri
    has_manifest = loc.present(mf.NAME)
    # a partition's directory (col=value/): its files of the data set around it
    inside = None if has_manifest else partition_of(loc)
    if has_manifest or inside is not None or split is not None:
        if split is not None and not has_manifest and inside is None:
            raise OptionError(f"option split={split!r} needs a data set written with splits "
                              f"(a _tfspark.json manifest); {path!r} has no manifest")
        root, manifest = _resolve_split(loc, None, whole=True) if inside is None else \
            inside[:2]
        if record_type and record_type != manifest.record_type:
            raise OptionError(f"option recordType={record_type!r} contradicts the manifest of "
                              f"{path!r}, which says {manifest.record_type!r}; drop the option")
        if split is not None and split not in manifest.splits:
            raise _no_split(path, split, manifest)
        plan = _from_manifest(root, manifest, compression, override=True, split=split,
                              partition=None if inside is None else inside[2])
        if plan.locations or inside is None:
            return plan
        raise OptionError(f"input path {path!r} does not exist")
    kind = loc.kind()
    if kind is None:
        raise OptionError(f"input path {path!r} does not exist")
    comp = normalize_compression(compression) if compression is not None else SNIFF
    if kind == "file":  # one file: read it whatever its name
        rels: list[str] = [""]
    else:
        listed = loc.list_files()
        _refuse_uncommitted(path, listed)
        rels = [rel for rel in listed if _is_data(rel)]
    return ReadPlan(tuple(loc.child(r) if r else loc for r in rels), None, None, (),
                    compressions=(comp,) * len(rels), root=loc.uri, rels=tuple(rels),
                    partitions=({},) * len(rels), record_type=record_type or "Example",
                    home=loc)


def _refuse_uncommitted(path: str, listed: list[str]) -> None:
    """A directory with tfspark part files (or write_tfrecords' _backup/) but no manifest holds
    a write that did not commit: its files may be partial or from failed attempts."""
    parts = [r for r in listed if write_id_of(r)]
    if not parts and not any(r.startswith("_backup/") for r in listed):
        return
    what = (f"{len(parts)} part file(s) of a tfspark write" if parts else
            "the parquet backup (_backup/) of a tfspark write")
    raise OptionError(f"{path!r} has no {mf.NAME} but holds {what} that did not commit: the "
                      f"write failed, was killed or is still running, and its files may be "
                      f"partial. Rewrite it (mode 'overwrite'); to look at one of the files "
                      f"anyway, read that file's own path")


def _is_data(rel: str) -> bool:
    parts = rel.split("/")
    return ".tfrecord" in parts[-1] and not any(p.startswith(("_", ".")) for p in parts)


def _resolve_split(loc: Location, split: str | None, whole: bool,
                   top: mf.Manifest | None = None) -> tuple[Location, mf.Manifest]:
    """(location, manifest) of the directory to read: a split's own directory with split=, or
    the path itself (a training read refuses a data set with splits, a table read takes all).
    top: loc's manifest when already read."""
    path = loc.uri
    if split is None:
        manifest = top or mf.read_manifest(loc)
        if manifest.splits and not whole:
            raise OptionError(f"{path!r} holds the splits {list(manifest.splits)}; read one at "
                              f"a time with split='{manifest.splits[0]}' (or another)")
        return loc, manifest
    if not isinstance(split, str) or not split or "/" in split or split in (".", ".."):
        raise OptionError(f"split must be a split name like 'train', got {split!r}")
    sub = loc.child(split)
    found = mf.find_manifest(sub)
    if found is not None:
        return sub, found
    here = top or mf.find_manifest(loc)
    if here is not None:
        if here.split == split:  # the path is that split's directory already
            return loc, here
        raise _no_split(path, split, here)
    raise mf.no_manifest(loc, split)


def _no_split(path: str, split: str, manifest: mf.Manifest) -> mf.ManifestError:
    have = list(manifest.splits)
    return mf.ManifestError(f"no split {split!r}: there is no such split in {path!r}; "
                            + (f"its splits are {have}" if have else
                               "it was written without splits: leave split unset"))


def _safe_rel(rel: str, where: str) -> str:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or ".." in parts or "://" in rel:
        raise mf.ManifestError(f"the manifest of {where!r} names {rel!r}, which is not a "
                               f"relative path inside the directory; the manifest is damaged")
    return rel


def _listing_ahead(loc: Location, split: str | None, check_files: bool
                   ) -> tuple[Location, Future[list[str]]] | None:
    """On an object store: the listing _check_exist will want, started now so that it runs
    beside the manifest read (one round trip before the first read instead of two)."""
    if not check_files or loc.is_local:
        return None
    where = loc if split is None else loc.child(split)
    pool = ThreadPoolExecutor(1, thread_name_prefix="tfspark-list")
    try:
        return where, pool.submit(where.list_files)
    finally:
        pool.shutdown(wait=False)


def _check_exist(files: list[Location], root: Location | None,
                 rels: list[str] | None = None,
                 ahead: tuple[Location, Future[list[str]]] | None = None) -> None:
    if root is not None and not root.is_local and rels is not None:  # one listing, not a
        def absent(listed: list[str]) -> list[str]:                   # request per file
            present = set(listed)
            return [f.uri for f, r in zip(files, rels) if r not in present]

        early = ahead[1].result() if ahead is not None and ahead[0].base == root.base else None
        missing = absent(early) if early is not None else []
        if early is None or missing:  # none, or listed before the manifest was read: a write
            missing = absent(root.list_files())  # may have committed in between, so again
    else:
        try:
            missing = [f.uri for f in files if f.kind() != "file"]
        except OSError as e:  # (a store refusing: say which files and what to check)
            more = f" and {len(files) - 1} more" if len(files) > 1 else ""
            raise OSError(f"cannot look for the TFRecord files named for reading "
                          f"({files[0].uri!r}{more}): {failed_request(e, 'check the paths')}") \
                from None
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise FileNotFoundError(f"TFRecord file {missing[0]!r}{more} named for reading does not "
                                f"exist; the data set is incomplete (deleted or moved files?): "
                                f"rewrite it or fix the file list")


def _sniff(loc: Location) -> str | None:
    """A file's compression from its content (the gzip magic bytes), whatever its name."""
    try:
        with loc.open_input() as f:
            return "gzip" if sniff_gzip(f) else None
    except OSError:  # unreadable here: fall back on the name
        return "gzip" if loc.base.endswith(".gz") else None


def _labels(spec: FeatureSpec, label_cols: Iterable[str] | str | None) -> tuple[str, ...]:
    if label_cols is None:
        return tuple(spec.label_names)
    cols = [label_cols] if isinstance(label_cols, str) else list(label_cols)
    missing = [c for c in cols if c not in spec.names]
    if missing:
        raise SchemaError(f"label column(s) {missing} not in the spec; features are "
                          f"{spec.names}")
    return tuple(cols)


# ---------------------------------------------------------------- a spec given to a reader

def load_spec(spec: Any, filesystem: Any = None) -> tuple[FeatureSpec, mf.Manifest | None]:
    """(FeatureSpec, the manifest it came from or None) from the forms `spec=` accepts."""
    if isinstance(spec, FeatureSpec):
        return spec, None
    if isinstance(spec, mf.Manifest):
        if spec.spec is None:
            raise SchemaError("the manifest given as spec has no spec (record_type "
                              f"{spec.record_type!r}): its records are not Examples")
        return spec.spec, spec
    if isinstance(spec, (str, os.PathLike)) and not str(spec).lstrip().startswith("{"):
        return _spec_from_path(locate(os.fspath(spec), filesystem))
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise SchemaError(f"spec is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise SchemaError(f"spec must be a FeatureSpec, JSON text, a dict or a path, got "
                          f"{type(spec).__name__}")
    if spec.get("format") == mf.FORMAT:
        return load_spec(mf.Manifest.from_dict(spec, "the manifest given as spec"))
    return FeatureSpec.from_dict(spec), None


def _spec_from_path(loc: Location) -> tuple[FeatureSpec, mf.Manifest | None]:
    path = loc.uri
    if loc.kind() != "file":
        manifest = mf.find_manifest(loc)  # (one read: None when there is none)
        if manifest is not None:
            return load_spec(manifest)
        raise SchemaError(f"spec path {path!r} is neither a JSON file nor a tfspark directory")
    with loc.open_stream() as f:
        text = f.read()
    try:
        return load_spec(json.loads(text))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"spec file {path!r} is not valid JSON: {e}") from None


SPEC_CHECK_RECORDS = 100  # records looked at for the keys of a given spec


def check_spec_keys(plan: ReadPlan) -> None:
    """SchemaError when none of the spec's keys is in the first records of the data: such a
    spec would read rows of pure defaults (a spec of other files, or of other names)."""
    from tfspark.spec.layout import value_keys
    from tfspark.wire.example_py import record_keys

    features = plan.example_spec.features
    if plan.rows_per_record > 1:  # (every block has "__rows": not a key of the spec's)
        want = {k for f in features for k in value_keys(f)}
    else:
        want = {k for f in features for k in f.keys}
    seen: set[str] = set()
    looked = 0
    try:
        for data in _first_records(plan, SPEC_CHECK_RECORDS):
            seen |= record_keys(data)
            looked += 1
            if seen & want:
                return
    except (TfsparkError, OSError):  # damage or a wrong compression: the read will say so
        return
    if looked and not seen & want:
        shown = sorted(seen)[:20]
        raise SchemaError(f"the spec given names none of the keys in {plan.files[0]!r} (first "
                          f"{looked} records): the spec has {sorted(want)[:20]}, the records "
                          f"hold {shown}; give the spec these files were written with")


def _first_records(plan: ReadPlan, n: int) -> Any:
    """The data of the first n records of the plan's files, in order."""
    from tfspark.wire.stream import read_records

    for loc, comp in zip(plan.locations, plan.file_compressions()):
        with loc.open_stream() as f:
            for data in read_records(f, comp, path=loc.uri):
                yield data
                n -= 1
                if n <= 0:
                    return
