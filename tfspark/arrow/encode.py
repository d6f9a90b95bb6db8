"""Arrow RecordBatch + FeatureSpec -> serialized tf.train.Example (or SequenceExample) bytes,
whole columns at a time.

The mirror of the decoder. Each spec feature becomes one or two canonical columns (see the
Example wire's writer); compiled kernels size every row, the output is allocated once, and each
column writes its entries in Example key order. A SequenceExample's context features take the
same columns and kernels; each sequence feature (array<array<T>>) becomes a feature list, one
Feature per inner array (a step). No protobuf objects, no TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tfspark.arrow.columns import (
    BLOCK_ROWS,
    Column,
    check_columns,
    columns_of,
    leaf_column,
    list_parts,
    present_rows,
    size_column,
    write_column,
)
from tfspark.arrow.values import BadRow, column_of
from tfspark.errors import EncodeError
from tfspark.spec.kinds import NULL_ELEMENT_POLICIES
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.wire import example_write, sequence_write
from tfspark.wire.protobuf import BYTES, FLOAT, INT
from tfspark.wire.tfrecord import frame_into
from tfspark.wire.words import SLACK


def encode_batch(batch: pa.RecordBatch | pa.Table, spec: FeatureSpec, *,
                 null_elements: str = "error") -> list[bytes]:
    """One serialized tf.train.Example per row, in row order.

    null_elements: "error" (default) refuses a null inside an array, naming column and row;
    "drop" leaves such elements out. Raises EncodeError for a missing column, a type that does
    not fit the spec or a refused null.
    """
    if not isinstance(batch, (pa.RecordBatch, pa.Table)):
        raise EncodeError(f"encode_batch needs a pyarrow RecordBatch or Table, got "
                          f"{type(batch).__name__}; build one with pa.RecordBatch.from_pydict "
                          f"or pa.Table.from_pandas")
    if not isinstance(spec, FeatureSpec):
        raise EncodeError(f"encode_batch needs a tfspark.FeatureSpec, got "
                          f"{type(spec).__name__}; see tfspark.infer_spec")
    buf, offsets = BatchEncoder(spec, null_elements=null_elements).encode(batch)
    raw = buf.tobytes()
    offs = offsets.tolist()
    return [raw[a:b] for a, b in zip(offs, offs[1:])]


def encode_records(batch: pa.RecordBatch | pa.Table, spec: FeatureSpec, *, framed: bool = False,
                   null_elements: str = "error") -> tuple[np.ndarray, np.ndarray]:
    """All rows' Examples in one new uint8 buffer, with n+1 record offsets.

    framed=True returns TFRecord-framed records ready to write to a file (the offsets then
    delimit framed records).
    """
    buf, offsets = BatchEncoder(spec, null_elements=null_elements).encode(batch, framed=framed)
    return buf.copy(), offsets


class BatchEncoder:
    """Encodes batch after batch into one reused buffer (fresh memory costs page faults).

    The array `encode` returns is only valid until the next call.
    """

    def __init__(self, spec: FeatureSpec, *, null_elements: str = "error"):
        if null_elements not in NULL_ELEMENT_POLICIES:
            raise EncodeError(f"null_elements must be one of {list(NULL_ELEMENT_POLICIES)}, "
                              f"got {null_elements!r}")
        self.spec = spec
        self.null_elements = null_elements
        self._keys = {k: example_write.key_header(k) for f in spec.features for k in f.keys}
        self._buf = np.empty(0, np.uint8)

    def encode(self, batch: pa.RecordBatch | pa.Table, *, framed: bool = False,
               row_numbers: np.ndarray | None = None,
               where: str = "") -> tuple[np.ndarray, np.ndarray]:
        """(buffer, n+1 record offsets) of the batch's rows as serialized Examples.

        framed=True adds TFRecord framing, ready to write to a file. The buffer is reused by the
        next call. Raises EncodeError for a missing column, a wrong type or a refused null; it
        names a bad row by row_numbers[i] (default: its index in the batch) and says `where`
        rows are counted (e.g. "Spark partition 3").
        """
        if isinstance(batch, pa.Table):
            chunks = batch.combine_chunks().to_batches()
            batch = chunks[0] if chunks else pa.RecordBatch.from_pylist([], schema=batch.schema)
        check_columns(batch, self.spec)
        try:
            if self.spec.is_sequence:
                cols, lists = _sequence_columns(self, batch)
                n = batch.num_rows
            else:
                cols, n = self._columns(batch)
        except BadRow as e:
            number = int(row_numbers[e.row]) if row_numbers is not None else e.row
            raise e.renamed(number, where) from None
        if n == 0:  # checked all the same; no kernel needed (nor loaded: a driver checking a
            return self._buf[:0], np.zeros(1, np.int64)  # spec has no rows to encode)
        if self.spec.is_sequence:
            return _sequence_encode(self, cols, lists, n, framed)
        cols.sort(key=lambda c: c.key)
        keys = [self.key_header(c.key) for c in cols]
        sizes = np.zeros(n, np.int64)
        for c, key in zip(cols, keys):
            size_column(c, sizes, key)
        offsets, cursor = example_write.layout(sizes, framed)
        total = int(offsets[-1])
        # framed records are written by words, which need room past the last one
        room = self.buffer(total + SLACK)
        for lo in range(0, n, BLOCK_ROWS):
            hi = min(lo + BLOCK_ROWS, n)
            example_write.write_heads(room, offsets, sizes, framed, lo, hi)
            for c, key in zip(cols, keys):
                write_column(c, room, cursor, lo, hi, key, wide=framed)
            if framed:
                frame_into(room, offsets[lo:hi + 1])
        return room[:total], offsets

    def _columns(self, batch: pa.RecordBatch) -> tuple[list[Column], int]:
        """(the canonical columns of the records, how many records): one per row here."""
        cols: list[Column] = []
        for feature in self.spec.features:
            cols.extend(columns_of(feature, column_of(batch, feature.path), self.null_elements))
        return cols, batch.num_rows

    def buffer(self, total: int) -> np.ndarray:
        """The reused buffer's first `total` bytes, grown when too small."""
        if total > len(self._buf):
            self._buf = np.empty(max(total, len(self._buf) * 3 // 2), np.uint8)
        return self._buf[:total]

    def key_header(self, key: str) -> np.ndarray:
        """The bytes that start an entry of Example key `key` (made once per key)."""
        head = self._keys.get(key)
        if head is None:
            head = self._keys[key] = example_write.key_header(key)
        return head


# ---------------------------------------------------------------- SequenceExample

@dataclass
class _Steps:
    """One feature list column: rows -> steps -> elements (see wire.sequence_write)."""

    key: str
    row_steps: np.ndarray  # int64, n+1 step offsets per row
    present: np.ndarray  # bool, n
    steps: Column  # the elements, with rows = step offsets into them (S+1)
    inner: np.ndarray  # int64, S: bytes of each step's values
    body: np.ndarray  # int64, n: bytes of each row's FeatureList


def _sequence_columns(enc: BatchEncoder, batch: pa.RecordBatch
                      ) -> tuple[list[Column], list[_Steps]]:
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


def _sequence_encode(enc: BatchEncoder, ctx: list[Column], lists: list[_Steps], n: int,
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
