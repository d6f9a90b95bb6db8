"""A partition's directory (`col=value/`, below a data set written with partition_by) read as
the rows of that partition: make_dataset, read_batches and spark.read find the data set's
manifest above it and read its files of that partition; what reads a data set as a whole
(verify, inspect, stats) names the data set instead."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from tfspark.errors import ManifestError
from tfspark.store import manifest as mf
from tfspark.store.fs import Location, locate
from tfspark.store.partitions import escape

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
