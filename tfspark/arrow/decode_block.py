"""Block records (rows_per_record > 1) -> the rows' canonical Arrow columns, as arrow.decode gives
for the row layout: the mirror of arrow.encode_block.

Every block key is read as a plain list with arrow.decode's Decoder (one "row" per block); the
rows are then cut out of those lists with the lengths, and null rows restored from `c/nulls`.
Every count is checked, so a damaged or hand-made block fails naming its file and offset.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from tfspark.arrow.decode import Decoder, list_array
from tfspark.errors import CorruptRecordError
from tfspark.spec import layout
from tfspark.spec.model import Feature, FeatureSpec


def list_feature(key: str, dtype: str) -> Feature:
    """A block key read as a plain list feature (one list per block record)."""
    enc = {"int64": "int", "float32": "float", "string": "bytes"}[dtype]
    return Feature(name=key, path=(key,), kind="varlen", dtype=dtype,  # type: ignore[arg-type]
                   encoding=enc, source_type="block")  # type: ignore[arg-type]


def block_lists(spec: FeatureSpec, nulls: bool) -> FeatureSpec:
    """Every block key of `spec` as a plain list feature: __rows, then per feature its value
    keys (and its nulls key, when `nulls`), in that order."""
    lists = [list_feature(layout.ROWS_KEY, "int64")]
    for f in spec.features:
        keys = layout.block_keys(f) if nulls else layout.value_keys(f)
        lists.append(list_feature(keys[0], f.dtype))
        lists.extend(list_feature(k, "int64") for k in keys[1:])
    return FeatureSpec(tuple(lists))


class BlockDecoder:
    """Decodes block records of `spec` into one canonical column per feature, row by row."""

    def __init__(self, spec: FeatureSpec):
        self.spec = spec
        self._decoder = Decoder(block_lists(spec, nulls=True))

    def decode(self, buf: np.ndarray, offsets: np.ndarray, *, framed: bool = False,
               path: str | None = None, offset: int = 0,
               strict: str | None = None) -> pa.RecordBatch:
        """The rows of the blocks buf[offsets[i]:offsets[i+1]] (see Decoder.decode)."""
        blocks = self._decoder.decode(buf, offsets, framed=framed, path=path, offset=offset,
                                      strict=strict)
        where = BlockPlace(path or "<buffer>", offset, offsets)
        rows_col = blocks.column(layout.ROWS_KEY)
        sizes = _flat(rows_col)
        if rows_col.null_count or (len(sizes) != blocks.num_rows) or (sizes < 0).any():
            bad = int(np.argmax(np.asarray(rows_col.is_null()) if rows_col.null_count else
                                _counts(rows_col) != 1))
            raise where.error(bad, f"block record without a valid {layout.ROWS_KEY!r} count "
                                   f"(one int64 >= 0): not written with rows_per_record > 1")
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        arrays = [_feature(f, blocks, sizes, starts, where) for f in self.spec.features]
        return pa.RecordBatch.from_arrays(arrays, names=self.spec.names)


class BlockPlace:
    """Where a buffer of block records sits (file, its byte offset, record offsets): what a
    damaged block's error names."""

    def __init__(self, path: str, offset: int, offsets: np.ndarray):
        self.path, self.offset, self.offsets = path, offset, offsets

    def error(self, block: int, what: str) -> CorruptRecordError:
        """The CorruptRecordError for block record `block`, naming file and byte offset."""
        at = self.offset + int(self.offsets[block])
        return CorruptRecordError(f"{self.path}: {what} (block record at byte offset {at})",
                                  path=self.path, offset=at)


def _flat(col: pa.Array) -> np.ndarray:
    """The values of an int64 list column as one numpy array (all blocks', in order)."""
    return col.flatten().to_numpy(zero_copy_only=False)


def _counts(col: pa.Array) -> np.ndarray:
    """Values per block of a list column (0 where the key is absent)."""
    return col.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def check_counts(counts: np.ndarray, want: np.ndarray, where: BlockPlace, f: Feature,
                 what: str) -> None:
    """CorruptRecordError naming the first block whose count of `what` is not `want`."""
    bad = counts != want
    if bad.any():
        b = int(np.argmax(bad))
        raise where.error(b, f"feature {f.name!r}: {int(counts[b])} {what} where the block's "
                             f"rows need {int(want[b])}")


def _feature(f: Feature, blocks: pa.RecordBatch, sizes: np.ndarray, starts: np.ndarray,
             where: BlockPlace) -> pa.Array:
    n = int(starts[-1])
    keys = layout.value_keys(f)
    null = np.zeros(n, bool)
    if f.nullable:
        col = blocks.column(f.name + layout.NULLS)
        pos = _flat(col).astype(np.int64)
        counts = _counts(col)
        owner = np.repeat(np.arange(len(sizes)), counts)
        if ((pos < 0) | (pos >= sizes[owner])).any():
            b = int(owner[np.argmax((pos < 0) | (pos >= sizes[owner]))])
            raise where.error(b, f"feature {f.name!r}: a null position outside the block")
        null[starts[owner] + pos] = True
    values_col = blocks.column(keys[0])
    value_counts = _counts(values_col)
    values = values_col.flatten()
    if f.kind == "fixed":
        k = f.shape[0] if f.shape else 1
        check_counts(value_counts, sizes * k, where, f, "values")
        if not f.shape:  # scalars: null where null, like the row layout's absent features
            return _mask(values, null) if null.any() else values
        return list_array(np.arange(n + 1, dtype=np.int64) * k, values, null)
    lengths_col = blocks.column(keys[1])
    check_counts(_counts(lengths_col), sizes, where, f, "row lengths")
    lengths = _flat(lengths_col).astype(np.int64)
    if (lengths < 0).any() or (null & (lengths != 0)).any():
        owner = np.repeat(np.arange(len(sizes)), sizes)
        b = int(owner[np.argmax((lengths < 0) | (null & (lengths != 0)))])
        raise where.error(b, f"feature {f.name!r}: a negative row length, or values in a "
                             f"null row")
    rows = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    per_block = rows[starts[1:]] - rows[starts[:-1]]
    if f.kind == "varlen":
        check_counts(value_counts, per_block, where, f, "values")
        return list_array(rows, values, null)
    inner_col = blocks.column(keys[2])
    check_counts(_counts(inner_col), per_block, where, f, "inner lengths")
    inner = _flat(inner_col).astype(np.int64)
    if (inner < 0).any():
        raise where.error(0, f"feature {f.name!r}: a negative inner length")
    inner_rows = np.concatenate([[0], np.cumsum(inner)]).astype(np.int64)
    check_counts(value_counts, inner_rows[rows[starts[1:]]] - inner_rows[rows[starts[:-1]]],
                 where, f, "values")
    return list_array(rows, list_array(inner_rows, values, None), null)


def _mask(values: pa.Array, null: np.ndarray) -> pa.Array:
    """values with the rows in `null` made null."""
    import pyarrow.compute as pc

    return pc.if_else(pa.array(~null), values, pa.nulls(len(values), values.type))
