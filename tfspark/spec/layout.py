"""Record layouts: one row per tf.train.Example (rows_per_record = 1) or blocks of up to N
consecutive rows per Example, column by column (N > 1; design.md, "Block layout").

A block record holds, per feature `c` (with `n` the rows in the block):
    __rows            Int64List [n]
    c                 fixed: n*k values (null rows hold the spec's default); varlen: the values
    c/row_lengths     varlen: n lengths; 2-D ragged: n outer lengths
    c/values          2-D ragged: the values
    c/inner_lengths   2-D ragged: the inner lists' lengths
    c/nulls           the block's null rows (positions in the block), only when it has some
The manifest says which layout a data set has: "layout": {"rows_per_record": N}.
"""

from __future__ import annotations

from collections.abc import Iterable

from tfspark.errors import SchemaError
from tfspark.spec.model import Feature

ROWS_KEY = "__rows"
NULLS = "/nulls"
ROW_LENGTHS = "/row_lengths"
INNER_LENGTHS = "/inner_lengths"
VALUES = "/values"
MAX_ROWS_PER_RECORD = 1 << 20  # a block is one protobuf message: keep it well under 2 GB


def value_keys(f: Feature) -> tuple[str, ...]:
    """The block keys that hold f's values and lengths, in the order the readers take them:
    (values,) for fixed, (values, row lengths) for varlen, (values, row lengths, inner
    lengths) for 2-D ragged."""
    if f.kind == "fixed":
        return (f.name,)
    if f.kind == "varlen":
        return (f.name, f.name + ROW_LENGTHS)
    return (f.name + VALUES, f.name + ROW_LENGTHS, f.name + INNER_LENGTHS)


def block_keys(f: Feature) -> tuple[str, ...]:
    """Every key f may be stored under in a block record."""
    return value_keys(f) + ((f.name + NULLS,) if f.nullable else ())


def check_block_keys(features: Iterable[Feature]) -> None:
    """SchemaError when two features (or a feature and __rows) would share a block key."""
    seen = {ROWS_KEY: "the block row count"}
    for f in features:
        for key in block_keys(f):
            if key in seen:
                raise SchemaError(
                    f"in the block layout (rows_per_record > 1) column {f.name!r} and "
                    f"{seen[key] if key == ROWS_KEY else repr(seen[key])} both use the Example "
                    f"key {key!r}; rename column {f.name!r} (or the other), or write with "
                    f"rows_per_record=1")
            seen[key] = f.name
