"""The NumPy form of a batch: {feature: column}, where a column is a dense array ([rows] or
[rows, n]; strings as an object array of bytes) or a Ragged (values, row_splits) for
variable-length features, nested for 2-D ragged ones. Slicing, gathering and joining them
row-wise is all the reader needs, each in a few whole-array NumPy operations.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Union

import numpy as np


class Ragged(NamedTuple):
    """Rows of variable length: row i is values[row_splits[i]:row_splits[i + 1]]. values is an
    array, or a Ragged itself for 2-D ragged features. Like tf.RaggedTensor.from_row_splits."""

    values: Any  # np.ndarray | Ragged
    row_splits: np.ndarray  # int64, rows + 1, from 0

    def to_list(self) -> list:
        """The rows as Python lists (for tests and inspection)."""
        inner = self.values.to_list() if isinstance(self.values, Ragged) else \
            self.values.tolist()
        s = self.row_splits
        return [inner[s[i]:s[i + 1]] for i in range(len(s) - 1)]


Column = Union[np.ndarray, Ragged]  # noqa: UP007 - a runtime alias on Python 3.10
Table = dict[str, Column]


def num_rows(t: Table) -> int:
    """Rows in a table (0 for one without columns)."""
    for col in t.values():
        return len(col.row_splits) - 1 if isinstance(col, Ragged) else len(col)
    return 0


def slice_rows(col: Column, lo: int, hi: int) -> Column:
    """Rows lo..hi-1."""
    if not isinstance(col, Ragged):
        return col[lo:hi]
    s = col.row_splits
    return Ragged(slice_rows(col.values, int(s[lo]), int(s[hi])), s[lo:hi + 1] - s[lo])


def take_rows(col: Column, rows: np.ndarray) -> Column:
    """The given rows, in that order."""
    if not isinstance(col, Ragged):
        return col[rows]
    s = col.row_splits
    lengths = (s[1:] - s[:-1])[rows]
    splits = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=splits[1:])
    # element indices: each row's range, concatenated
    within = np.arange(int(splits[-1]), dtype=np.int64) - np.repeat(splits[:-1], lengths)
    elements = np.repeat(s[:-1][rows], lengths) + within
    return Ragged(take_rows(col.values, elements), splits)


def concat_rows(cols: list[Column]) -> Column:
    """The rows of several columns of one feature, one after another."""
    if len(cols) == 1:
        return cols[0]
    if not isinstance(cols[0], Ragged):
        return np.concatenate(cols)
    ragged = [c for c in cols if isinstance(c, Ragged)]
    splits, base = [np.zeros(1, np.int64)], 0
    for c in ragged:
        splits.append(c.row_splits[1:] + base)
        base += int(c.row_splits[-1])
    return Ragged(concat_rows([c.values for c in ragged]), np.concatenate(splits))


def concat_tables(tables: list[Table]) -> Table:
    """Tables of the same features, rows one after another."""
    if len(tables) == 1:
        return tables[0]
    return {k: concat_rows([t[k] for t in tables]) for k in tables[0]}


def slice_table(t: Table, lo: int, hi: int) -> Table:
    """Rows lo..hi-1 of every column."""
    return {k: slice_rows(c, lo, hi) for k, c in t.items()}


def take_table(t: Table, rows: np.ndarray) -> Table:
    """The given rows of every column."""
    return {k: take_rows(c, rows) for k, c in t.items()}


def cut_rows(carry: Table | None, rows: Table, size: int
             ) -> tuple[list[Table], list[int], Table | None]:
    """Tables of `size` rows from carry + rows (views of rows; only one that straddles the two
    is copied), where each ends in rows, and what is left over."""
    n, start, out, ends = num_rows(rows), 0, [], []
    if carry is not None:
        need = size - num_rows(carry)
        if n < need:
            return [], [], concat_tables([carry, rows])
        out.append(concat_tables([carry, slice_table(rows, 0, need)]))
        ends.append(need)
        start = need
    while n - start >= size:
        out.append(slice_table(rows, start, start + size))
        start += size
        ends.append(start)
    return out, ends, (slice_table(rows, start, n) if start < n else None)
