"""read_batches(..., stack=): fixed numeric features handed over as one array [batch, k], a
model's input matrix. The reader's mixing threads write each window's permuted columns into it
(the copy a training loop's np.stack made), so the loop no longer stacks 40 columns on its own
thread between two steps: on a GPU that loop is the feed's bottleneck (bench_gpu_feed.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tfspark.errors import OptionError
from tfspark.spec.model import FeatureSpec

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
