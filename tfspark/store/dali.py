"""Index files for NVIDIA DALI's TFRecord reader: per data file, the offset and size of each
record, so DALI's `readers.tfrecord` reads a data set's files without an indexing pass of its
own (what its `tfrecord2idx` script writes).

    _tfspark_index/<the data file's path in the data set>.idx     one line per record:
        "<offset> <size>\\n"   offset: the record's first byte in the file; size: the framed
                             record, 8 (length) + 4 (its CRC) + the data + 4 (the data's CRC)

A data file never changes once committed (new writes make new files), so an index that is
there is current: `dali_index` writes the missing ones (after an append, those of the new
files) and removes those of files no manifest names any more (after an overwrite). Each
record's CRCs are checked as its offset is taken, and the count must be the manifest's: an
index never points into a damaged file. DALI reads uncompressed TFRecords only.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tfspark.errors import CountMismatchError, OptionError, TfsparkError
from tfspark.store import manifest as mf
from tfspark.store.fs import Location, locate
from tfspark.store.uris import error_line, redact
from tfspark.wire.stream import stream_framed

DIR = "_tfspark_index"
SUFFIX = ".idx"


def dali_index(path: str | os.PathLike, split: str | None = None,
               filesystem: Any = None) -> list[tuple[str, str]]:
    """Write the index files NVIDIA DALI's TFRecord reader takes, for a data set's files.

    For every TFRecord file (of one split with `split=`) that has none yet, under
    `<path>/_tfspark_index/`: one line "offset size" per record, as DALI's tfrecord2idx
    writes it. Each record's CRCs are checked on the way. Index files of files the data set
    no longer holds are removed.

    Args:
        path: a data set's directory or URI (uncompressed).
        split: index this split's files only.
        filesystem: a pyarrow filesystem for `path` (default: from the path).

    Returns:
        (data file, index file) pairs in the manifest's order, as paths DALI opens (local
        paths, or URIs on a store): give DALI's `fn.readers.tfrecord` the first of each pair
        as `path` and the second as `index_path`.

    Raises:
        OptionError: a compressed data set (DALI reads uncompressed TFRecords only).
        CorruptRecordError: a damaged record (its file and byte offset).

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"x": [1.0, 2.0]}), "ds")
        >>> [(data.endswith(".tfrecord"), index.endswith(".idx"))
        ...  for data, index in tfspark.dali_index("ds")]
        [(True, True)]
    """
    return write_indexes(locate(path, filesystem), split)[0]


def write_indexes(loc: Location, split: str | None
                  ) -> tuple[list[tuple[str, str]], int, int]:
    """dali_index's work: (its pairs, index files written, index files removed)."""
    from tfspark.store.partitions import read_data_set_manifest

    m = read_data_set_manifest(loc)
    where = redact(loc.uri)
    if m.compression:
        raise OptionError(f"{where} is {m.compression}-compressed; DALI's TFRecord reader "
                          f"reads uncompressed files only: write the data set uncompressed "
                          f"(compression=None; tfspark export --compression none) to index it")
    m.check_split(split, where)
    files = m.files_of(split=split)
    # (a split's directory has a manifest of its own, naming its files: indexed there)
    have = set(loc.child(DIR).file_sizes())  # (one listing; none when there is no index)
    missing = [f for f in files if f"{f.path}{SUFFIX}" not in have]
    loc.at_once(lambda f: _index_file(loc, f), missing)
    named = {f"{f.path}{SUFFIX}" for f in m.files}
    stale = sorted(rel for rel in have if rel not in named)
    if stale:
        loc.delete_files(f"{DIR}/{rel}" for rel in stale)
    pairs = [(loc.child_uri(f.path), loc.child_uri(f"{DIR}/{f.path}{SUFFIX}")) for f in files]
    return pairs, len(missing), len(stale)


def after_write(loc: Location, rows: int, who: str) -> int:
    """dali_index=True: the index files of a committed write's data set (the new files'; those
    of files it replaced removed), or TfsparkError saying the rows are committed and which
    command writes the index. The number written."""
    try:
        return write_indexes(loc, None)[1]
    except Exception as e:
        raise TfsparkError(
            f"{who} committed this write's {rows:,} rows to {redact(loc.uri)!r}, but writing "
            f"their DALI index failed ({error_line(e)}); the rows are in the data set, do not "
            f"write them again: `tfspark index PATH` (tfspark.dali_index) writes the index") \
            from e


def record_index(loc: Location, rel: str) -> np.ndarray:
    """(offset, size) of each record of the TFRecord file rel under loc, both CRCs of each
    checked (CorruptRecordError names the file and offset)."""
    parts: list[np.ndarray] = []

    def bounds(buf: np.ndarray, offsets: np.ndarray, base: int) -> None:
        parts.append(offsets + base)

    with loc.open_stream(rel) as f:
        for _ in stream_framed(f, redact(loc.child_uri(rel)), True, bounds):
            pass
    if not parts:
        return np.empty((0, 2), np.int64)
    starts = np.concatenate([p[:-1] for p in parts])
    ends = np.concatenate([p[1:] for p in parts])
    return np.stack([starts, ends - starts], axis=1)


def index_text(index: np.ndarray) -> bytes:
    """The index file's bytes: "offset size" per record, one line each."""
    return "".join(f"{o} {s}\n" for o, s in index.tolist()).encode()


def _index_file(root: Location, f: mf.FileEntry) -> None:
    index = record_index(root, f.path)
    if len(index) != f.records:
        raise CountMismatchError(f"{redact(root.child_uri(f.path))} holds {len(index):,} "
                                 f"records, its manifest says {f.records:,}; run tfspark "
                                 f"verify on the data set")
    root.write_bytes_atomic(f"{DIR}/{f.path}{SUFFIX}", index_text(index))
