"""Partition directories (`col=value/`) and grouping a batch's rows by partition and split.

Values are escaped the way Hive and Spark escape them (percent-encoding of `/`, `=`, `%`, ...),
plus `.` and `..` themselves, so no value can name a path outside the output directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
