"""Arrow RecordBatch -> block records: up to N consecutive rows per tf.train.Example, column by
column (spec.layout has the keys; design.md, "Block layout").

Each feature's canonical per-row columns (arrow.encode) are regrouped per block: the values of a
block's rows become one list, null rows of fixed features are filled with the spec's default,
and the lengths and null positions go under their own keys. The serialization is arrow.encode's:
one "row" of its kernels is one block here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tfspark.arrow.columns import Column, columns_of
from tfspark.arrow.encode import BatchEncoder
from tfspark.arrow.values import column_of
from tfspark.spec import layout
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.wire.protobuf import BYTES, FLOAT, INT


class BlockEncoder(BatchEncoder):
    """BatchEncoder for the block layout: encode() returns one record per rows_per_record rows
    of the batch (the last may be short)."""

    def __init__(self, spec: FeatureSpec, rows_per_record: int, *,
                 null_elements: str = "error"):
        layout.check_block_keys(spec.features)
        super().__init__(spec, null_elements=null_elements)
        self.rows_per_record = rows_per_record

    def _columns(self, batch: pa.RecordBatch) -> tuple[list[Column], int]:
        n = batch.num_rows
        starts = np.append(np.arange(0, n, self.rows_per_record, dtype=np.int64), n)
        blocks = len(starts) - 1
        cols = [Column(layout.ROWS_KEY, INT, np.arange(blocks + 1, dtype=np.int64),
                     np.ones(blocks, bool), np.diff(starts), scalar=True)]
        for f in self.spec.features:
            arr = column_of(batch, f.path)
            row_cols = columns_of(f, arr, self.null_elements)  # checks every value
            nulls = ~arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else None
            cols.extend(_blocks_of(f, row_cols, nulls, starts))
        return cols, blocks


def _blocks_of(f: Feature, row_cols: list[Column], nulls: np.ndarray | None,
               starts: np.ndarray) -> list[Column]:
    """f's block columns from its per-row columns; nulls: which rows are null (None: none)."""
    n = int(starts[-1])
    present = np.ones(n, bool) if nulls is None else ~nulls
    every = np.ones(len(starts) - 1, bool)
    keys = layout.value_keys(f)
    out: list[Column] = []
    if f.kind == "fixed":
        c = row_cols[0]
        k = f.shape[0] if f.shape else 1
        if nulls is None:  # every row holds its k elements already, in order
            out.append(Column(keys[0], c.kind, k * starts + c.rows[0], every, c.values, c.offsets))
        else:
            data, offsets = _gather(c, _sources(c.rows, present, k), _default(f, c.kind))
            out.append(Column(keys[0], c.kind, k * starts, every, data, offsets))
    elif f.kind == "varlen":
        c = row_cols[0]
        if nulls is None:
            lengths = np.diff(c.rows).astype(np.int64)
            out.append(Column(keys[0], c.kind, c.rows[starts], every, c.values, c.offsets))
        else:
            data, offsets = _gather(c, _sources(c.rows, present, 0), None)
            lengths = np.where(present, np.diff(c.rows), 0).astype(np.int64)
            rows = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            out.append(Column(keys[0], c.kind, rows[starts], every, data, offsets))
        out.append(Column(keys[1], INT, starts, every, lengths))
    else:  # 2-D ragged: values per row, inner lengths per inner list
        vals, inner = row_cols
        data, offsets = _gather(vals, _sources(vals.rows, present, 0), None)
        val_lengths = np.where(present, np.diff(vals.rows), 0).astype(np.int64)
        val_rows = np.concatenate([[0], np.cumsum(val_lengths)]).astype(np.int64)
        inner_lengths = inner.values[_sources(inner.rows, present, 0)]
        outer = np.where(present, np.diff(inner.rows), 0).astype(np.int64)
        outer_rows = np.concatenate([[0], np.cumsum(outer)]).astype(np.int64)
        out.append(Column(keys[0], vals.kind, val_rows[starts], every, data, offsets))
        out.append(Column(keys[1], INT, starts, every, outer))
        out.append(Column(keys[2], INT, outer_rows[starts], every,
                        np.ascontiguousarray(inner_lengths, dtype=np.int64)))
    if nulls is not None and f.nullable:
        where = np.flatnonzero(nulls)
        block = np.searchsorted(starts, where, side="right") - 1
        counts = np.bincount(block, minlength=len(starts) - 1)
        rows = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        out.append(Column(f.name + layout.NULLS, INT, rows, counts > 0,
                        (where - starts[block]).astype(np.int64)))
    return out


def _sources(rows: np.ndarray, present: np.ndarray, fill: int) -> np.ndarray:
    """Element indices of the regrouped column: each present row's elements in order, and
    `fill` times -1 (the default) for each null row."""
    counts = np.where(present, np.diff(rows), fill).astype(np.int64)
    total = int(counts.sum())
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    within = np.arange(total, dtype=np.int64) - np.repeat(firsts, counts)
    base = np.repeat(np.where(present, rows[:-1], -1), counts)
    return np.where(base >= 0, base + within, -1)


def _gather(c: Column, src: np.ndarray, default: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, byte offsets for BYTES) of elements src of column c (-1: the default)."""
    if c.kind != BYTES:
        pool = c.values if default is None else np.append(c.values, np.asarray(
            default, c.values.dtype))
        return np.ascontiguousarray(pool[np.where(src >= 0, src, len(pool) - 1)]), None
    assert c.offsets is not None
    return gather_bytes(c.values, c.offsets, src, default or b"")


def gather_bytes(data: np.ndarray, offsets: np.ndarray, src: np.ndarray,
                 default: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(bytes, offsets from 0) of strings src of data/offsets (string j: data[offsets[j]:
    offsets[j+1]]), `default` where src is -1: whole arrays, no Python object per string."""
    fill = np.frombuffer(default, np.uint8)
    pool = np.concatenate([data, fill])
    safe = np.maximum(src, 0)
    lengths = np.where(src >= 0, np.diff(offsets)[safe] if len(offsets) > 1 else 0, len(fill))
    begin = np.where(src >= 0, offsets[safe] if len(offsets) > 1 else 0, len(data))
    out = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    index = np.repeat(begin - out[:-1], lengths) + np.arange(int(out[-1]))
    return pool[index], out


def _default(f: Feature, kind: int) -> Any:
    """What a null row of fixed feature f holds: its spec default, in the stored type."""
    value = f.default
    if kind == FLOAT:
        return np.float32(0.0 if value is None else value)
    if kind == INT:
        return np.int64(0 if value is None else value)
    return (value or "").encode() if isinstance(value, str) else (value or b"")
