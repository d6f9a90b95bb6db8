"""Arrow RecordBatch -> serialized tf.train.SequenceExample bytes, whole columns at a time.

The context features take the Example encoder's canonical columns and kernels; each sequence
feature (array<array<T>>) becomes a feature list, one Feature per inner array (a step), written
by wire/sequence_write.py. No protobuf objects, no TensorFlow. BatchEncoder.encode comes here
for a SequenceExample spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tfspark.arrow.columns import (
    BLOCK_ROWS,
    Column,
    columns_of,
    leaf_column,
    list_parts,
    present_rows,
    size_column,
    write_column,
)
from tfspark.arrow.values import BadRow, column_of
from tfspark.spec.model import Feature
from tfspark.wire import sequence_write
from tfspark.wire.protobuf import BYTES, FLOAT, INT
from tfspark.wire.tfrecord import frame_into

if TYPE_CHECKING:
    from tfspark.arrow.encode import BatchEncoder


@dataclass
class _Steps:
    """One feature list column: rows -> steps -> elements (see wire/sequence_write.py)."""

    key: str
    row_steps: np.ndarray  # int64, n+1 step offsets per row
    present: np.ndarray  # bool, n
    steps: Column  # the elements, with rows = step offsets into them (S+1)
    inner: np.ndarray  # int64, S: bytes of each step's values
    body: np.ndarray  # int64, n: bytes of each row's FeatureList


def columns(enc: BatchEncoder, batch: pa.RecordBatch) -> tuple[list[Column], list[_Steps]]:
    """(context columns, feature-list columns) of the batch; BadRow names a bad row."""
    ctx: list[Column] = []
    lists: list[_Steps] = []
    for f in enc.spec.features:
        arr = column_of(batch, f.path)
        if f.kind == "sequence":
            lists.append(_steps_of(f, arr, enc.null_elements))
        else:
            ctx.extend(columns_of(f, arr, enc.null_elements))
    ctx.sort(key=lambda c: c.key)
    lists.sort(key=lambda c: c.key)
    return ctx, lists


def encode(enc: BatchEncoder, ctx: list[Column], lists: list[_Steps], n: int,
           framed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, n+1 record offsets): every row's SequenceExample, in enc's reused buffer."""
    ctx_keys = [enc.key_header(c.key) for c in ctx]
    list_keys = [enc.key_header(c.key) for c in lists]
    ctx_sizes = np.zeros(n, np.int64)
    list_sizes = np.zeros(n, np.int64)
    for c, key in zip(ctx, ctx_keys):
        size_column(c, ctx_sizes, key)
    for s, key in zip(lists, list_keys):
        sequence_write.size_lists(list_sizes, key, s.present, s.body)
    offsets, ctx_cursor, list_cursor = sequence_write.layout(ctx_sizes, list_sizes, framed)
    out = enc.buffer(int(offsets[-1]))
    for lo in range(0, n, BLOCK_ROWS):
        hi = min(lo + BLOCK_ROWS, n)
        sequence_write.write_heads(out, offsets, ctx_sizes, list_sizes, framed, lo, hi)
        for c, key in zip(ctx, ctx_keys):
            write_column(c, out, ctx_cursor, lo, hi, key)
        for s, key in zip(lists, list_keys):
            _write_list(s, out, list_cursor, lo, hi, key)
        if framed:
            frame_into(out, offsets[lo:hi + 1])
    return out, offsets


def _steps_of(f: Feature, arr: pa.Array, policy: str) -> _Steps:
    """A feature list column; a null row writes no entry, a null step is refused (or dropped
    with null_elements='drop'), like a null inner array of a ragged column."""
    n = len(arr)
    present = present_rows(f, arr)
    row_steps, inner = list_parts(f, arr, present, policy, what="a null step (inner array)")
    # Which row each step belongs to: for errors only, and only those need it computed.
    owner = np.repeat(np.arange(n), np.diff(row_steps)) \
        if inner.null_count or not present.all() else None
    steps_present = present[owner] if owner is not None else np.ones(len(inner), bool)
    step_rows, leaf = list_parts(f, inner, steps_present, policy, row_of=owner)
    try:
        col = leaf_column(f, f.name, step_rows, steps_present, leaf)
    except BadRow as e:  # it counted steps: name the row that holds the step
        if owner is None:
            owner = np.repeat(np.arange(n), np.diff(row_steps))
        raise BadRow(e.template, int(owner[e.row]) if e.row < len(owner) else e.row) from None
    if col.kind == INT:
        sizes = sequence_write.int_steps(row_steps, step_rows, col.values)
    elif col.kind == FLOAT:
        sizes = sequence_write.float_steps(row_steps, step_rows)
    else:
        sizes = sequence_write.bytes_steps(row_steps, step_rows, col.offsets)
    return _Steps(f.name, row_steps, present, col, *sizes)


def _write_list(s: _Steps, out: np.ndarray, cursor: np.ndarray, lo: int, hi: int,
                key: np.ndarray) -> None:
    c = s.steps
    head = (out, cursor, lo, hi, key, s.row_steps, s.present, s.body, s.inner, c.rows)
    if c.kind == INT:
        sequence_write.write_int_lists(*head, c.values)
    elif c.kind == FLOAT:
        sequence_write.write_float_lists(*head, c.values.view(np.uint8))
    else:
        assert c.kind == BYTES
        sequence_write.write_bytes_lists(*head, c.values, c.offsets)
