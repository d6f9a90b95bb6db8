"""The NumPy form of a batch: {feature: column}, where a column is a dense array ([rows] or
[rows, n]; strings as an object array of bytes) or a Ragged (values, row_splits) for
variable-length features, nested for 2-D ragged ones. Slicing, gathering and joining them
row-wise is all the reader needs, each in a few whole-array NumPy operations.

Padded (read_batches(..., ragged="padded")): variable-length features as a fixed-width array and
a mask, the form JAX (one shape, one compile) and Keras's masking layers take on every backend.

A feature `name` becomes two columns: `name`, its values [batch, length] with the rest of each
row filled (0, or b"" for strings), and `name_mask`, bool [batch, length], True where a value
is. The length is pad_to's for the feature, else the longest row the statistics of the data
set saw (so every batch has the same shape); longer rows are cut (as keras.utils.pad_sequences
with truncating="post"). Everything is NumPy on whole columns: no Python per row.

Stacked (read_batches(..., stack=)): fixed numeric features handed over as one array [batch, k],
a model's input matrix. The reader's mixing threads write each window's permuted columns into it
(the copy a training loop's np.stack made), so the loop no longer stacks 40 columns on its own
thread between two steps: on a GPU that loop is the feed's bottleneck (bench_gpu_feed.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Union

import numpy as np

from tfspark.errors import OptionError
from tfspark.spec.model import FeatureSpec
from tfspark.store import manifest as mf


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


MASK = "_mask"


def pad_lengths(spec: FeatureSpec, labels: tuple[str, ...], manifest: mf.Manifest | None,
                strings: str, pad_to: int | Mapping[str, int] | None) -> dict[str, int]:
    """{feature: width} of the variable-length features read (labels aside); OptionError
    names a feature that cannot be padded or has no width, and what to do."""
    varlen = [f for f in spec.features if f.kind in ("varlen", "ragged") and f.name not in labels]
    names = {f.name for f in spec.features}
    given = pad_to if isinstance(pad_to, Mapping) else {}
    unknown = sorted(set(given) - {f.name for f in varlen})
    if unknown:
        raise OptionError(f"pad_to names {unknown}, which are not variable-length features read "
                          f"here ({sorted(f.name for f in varlen)})")
    stats = (manifest.feature_stats() if manifest is not None else None) or {}
    out = {}
    for f in varlen:
        if f.kind == "ragged" or (f.dtype == "string" and strings == "bytes"):
            raise OptionError(f"ragged='padded' pads one level: {f.name!r} has two (a 2-D "
                              f"ragged feature, or strings='bytes'); leave it out with "
                              f"columns=[...] or read it with ragged='ragged'")
        if f.name + MASK in names:
            raise OptionError(f"ragged='padded' names {f.name!r}'s mask {f.name + MASK!r}, which "
                              f"is a feature already; rename one of them")
        width = given.get(f.name, pad_to if isinstance(pad_to, int) else None)
        if width is None:
            width = ((stats.get(f.name) or {}).get("length") or {}).get("max")
        if not isinstance(width, int) or isinstance(width, bool) or width < 1:
            raise OptionError(f"ragged='padded' needs a width for {f.name!r}: the data set's "
                              f"statistics give none, so pass pad_to={{{f.name!r}: n}} (or "
                              f"pad_to=n for all)" if width is None else
                              f"pad_to for {f.name!r} must be a positive int, got {width!r}")
        out[f.name] = width
    return out


def pad(column: Ragged, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(values [rows, width] with the rest filled, mask [rows, width]) of a 1-level Ragged."""
    splits = np.asarray(column.row_splits, dtype=np.int64)
    values = np.asarray(column.values)
    rows = len(splits) - 1
    lengths = np.diff(splits)
    mask = np.arange(width) < lengths[:, None]
    fill = b"" if values.dtype == object else 0
    out = np.full((rows, width), fill, dtype=values.dtype)
    row = np.repeat(np.arange(rows), lengths)
    col = np.arange(len(values)) - np.repeat(splits[:-1], lengths)
    keep = col < width
    out[row[keep], col[keep]] = values[:splits[-1]][keep]
    return out, mask


def pad_batch(batch: dict[str, Any], widths: Mapping[str, int]) -> dict[str, Any]:
    """The batch with each padded feature as its values and its mask, in place of the Ragged."""
    for name, width in widths.items():
        column = batch.get(name)
        if isinstance(column, Ragged):
            batch[name], batch[name + MASK] = pad(column, width)
    return batch


_DTYPES = {"int64": np.int64, "float32": np.float32}
_BLOCK = 8192  # rows of the matrix written at a time


@dataclass(frozen=True)
class Stack:
    """One stacked array: `name` [rows, width] holds `columns` side by side, in that order;
    column i fills the `widths[i]` places from `offsets[i]` on."""

    name: str
    columns: tuple[str, ...]
    widths: tuple[int, ...]
    offsets: tuple[int, ...]
    dtype: type

    @property
    def width(self) -> int:
        """The array's columns: the stacked features' widths together."""
        return self.offsets[-1] + self.widths[-1]


def plan_stacks(stack: Mapping[str, Sequence[str]] | None, spec: FeatureSpec,
                labels: Sequence[str], strings: str) -> tuple[Stack, ...]:
    """The stacks of `stack` ({name: [feature, ...]}), checked against the features read: each
    feature fixed and numeric (strings as ids), of one dtype per stack, in one stack only, not
    a label, and no stack named like a feature kept apart. OptionError says which is not."""
    if stack is None:
        return ()
    if not isinstance(stack, Mapping) or not stack:
        raise OptionError(f"stack must be a dict {{name: [feature, ...]}}, got {stack!r}")
    read = set(spec.names)
    stacked: dict[str, str] = {}
    out = []
    for name, columns in stack.items():
        if not isinstance(name, str) or isinstance(columns, str) or \
                not isinstance(columns, Sequence) or not columns:
            raise OptionError(f"stack: {name!r} must name a non-empty list of features, got "
                              f"{columns!r}")
        dtypes: dict[str, str] = {}
        widths = []
        for col in columns:
            if col in labels:
                raise OptionError(f"stack {name!r}: {col!r} is a label column; labels come "
                                  f"apart, leave it out of the stack")
            if col not in read:
                raise OptionError(f"stack {name!r}: no feature {col!r} in the read; features "
                                  f"are {spec.names}")
            if col in stacked:
                raise OptionError(f"stack {name!r}: {col!r} is already in stack "
                                  f"{stacked[col]!r}; put each feature in one stack")
            f = spec[col]
            dtype = "int64" if f.dtype == "string" and strings == "ids" else f.dtype
            if f.kind != "fixed" or dtype not in _DTYPES or len(f.shape) > 1:
                raise OptionError(f"stack {name!r}: {col!r} is a {f.kind} {f.dtype} feature; "
                                  f"only fixed-length int64 or float32 features (strings with "
                                  f"strings='ids') can be stacked")
            dtypes[col] = dtype
            widths.append(f.shape[0] if f.shape else 1)
            stacked[col] = name
        if len(set(dtypes.values())) > 1:
            first = columns[0]
            other = next(c for c in columns if dtypes[c] != dtypes[first])
            raise OptionError(f"stack {name!r}: {other!r} is {dtypes[other]} where {first!r} "
                              f"is {dtypes[first]}; stack features of one dtype (or make two "
                              f"stacks)")
        offsets = tuple(int(x) for x in np.cumsum([0] + widths[:-1]))
        out.append(Stack(name, tuple(columns), tuple(widths), offsets,
                         _DTYPES[dtypes[columns[0]]]))
    clash = [s.name for s in out if s.name in read and s.name not in stacked]
    if clash:
        raise OptionError(f"stack {clash[0]!r} is named like a feature read apart; name the "
                          f"stack otherwise")
    return tuple(out)


def fill(matrix: np.ndarray, stack: Stack, columns: Sequence[np.ndarray], lo: int, hi: int
         ) -> None:
    """Rows lo..hi-1 of `matrix` from the stack's (permuted) columns, _BLOCK rows at a time: a
    block of the matrix stays in cache while each column's stretch is written into it (taking
    each column straight into its strided place ran 3.4x slower: bench/bench_stack.py)."""
    for start in range(lo, hi, _BLOCK):
        end = min(hi, start + _BLOCK)
        for col, width, at in zip(columns, stack.widths, stack.offsets):
            if col.ndim == 1:
                matrix[start:end, at] = col[start:end]
            else:
                matrix[start:end, at:at + width] = col[start:end]
