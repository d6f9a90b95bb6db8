"""Partitions (`col=value/` directories below a data set written with partition_by): their
names, the grouping of a batch's rows by partition and split, and a partition's directory read
as the rows of that partition (make_dataset, read_batches and spark.read find the data set's
manifest above it and read its files of that partition; what reads a data set as a whole,
verify, inspect and stats, names the data set instead).

Values are escaped the way Hive and Spark escape them (percent-encoding of `/`, `=`, `%`, ...),
plus `.` and `..` themselves, so no value can name a path outside the output directory.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfspark.errors import ManifestError
from tfspark.store import manifest as mf
from tfspark.store.fs import Location, locate

NULL_VALUE = "__HIVE_DEFAULT_PARTITION__"
_ESCAPE = set('"#%\'*/:=?\\{}[]^') | {chr(c) for c in range(0x20)} | {"\x7f"}


def escape(value: Any) -> str:
    """A partition value as a directory name part (`col=<this>`), escaped as Hive and Spark do;
    None is __HIVE_DEFAULT_PARTITION__.
    """
    if value is None:
        return NULL_VALUE
    text = value if isinstance(value, str) else value_text(value)
    if text in ("", ".", ".."):
        return "".join(f"%{ord(c):02X}" for c in text) if text else NULL_VALUE
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in text)


def value_text(value: Any) -> str:
    """A partition value as text (booleans lower case, dates ISO), as the manifest stores it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def directory(split: str | None, partition: dict[str, Any]) -> str:
    """Relative directory of a (split, partition) group, '' for the root."""
    parts = [escape(split)] if split is not None else []
    parts += [f"{escape(k)}={escape(v)}" for k, v in partition.items()]
    return "/".join(parts)


def group_rows(batch: pa.RecordBatch, columns: list[str]
               ) -> Iterator[tuple[tuple, pa.RecordBatch, np.ndarray]]:
    """(key values, rows, their indices in batch) for each distinct combination of `columns`,
    keys as Python values."""
    if not columns or batch.num_rows == 0:
        yield (), batch, np.arange(batch.num_rows)
        return
    codes = np.zeros(batch.num_rows, np.int64)
    dicts = []
    for name in columns:
        enc = pc.dictionary_encode(batch.column(name), null_encoding="encode")
        idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes = codes * (len(enc.dictionary) + 1) + idx
        dicts.append(enc.dictionary)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    cuts = np.flatnonzero(np.diff(sorted_codes)) + 1
    for rows in np.split(order, cuts):
        first = int(rows[0])
        key = tuple(batch.column(c)[first].as_py() for c in columns)
        yield key, batch.take(pa.array(rows)), rows


# ---------------------------------------------------------------- a partition's directory

_LEVEL = re.compile(r"[^=/]+=[^/]*")  # a partition directory's name: col=value


def partition_of(loc: Location) -> tuple[Location, mf.Manifest, dict[str, str]] | None:
    """(the directory with the manifest, the manifest, the levels' {col: value} as the
    directory names write them) when loc is a partition's directory; else None. A request
    per `col=value` level up, none for other names."""
    names: list[str] = []
    at: Location | None = loc
    while at is not None and _LEVEL.fullmatch(posixpath.basename(at.base)):
        names.insert(0, posixpath.basename(at.base))
        at = at.parent()
        top = mf.find_manifest(at) if at is not None else None
        if at is not None and top is not None:
            levels = dict(name.split("=", 1) for name in names)
            if list(levels) != [escape(c) for c in top.partition_by[:len(levels)]]:
                return None
            return at, top, levels
    return None


def in_partition(entry: mf.FileEntry, levels: Mapping[str, str]) -> bool:
    """Whether a manifest's file lies in the partition `levels` (partition_of's)."""
    values = {escape(k): escape(v) for k, v in entry.partition.items()}
    return all(values.get(col) == value for col, value in levels.items())


def read_data_set_manifest(path: Any, filesystem: Any = None) -> mf.Manifest:
    """read_manifest, where a partition's directory is named as one (and its data set)."""
    loc = locate(path, filesystem)
    try:
        return mf.read_manifest(loc)
    except ManifestError:
        inside = partition_of(loc)
        if inside is None:
            raise
        raise ManifestError(f"{loc.uri!r} is a partition's directory of the data set "
                            f"{inside[0].uri!r}, whose manifest is there: give that directory "
                            f"(make_dataset, read_batches and spark.read also take a "
                            f"partition's directory)") from None
