"""Arrow values -> what an Example stores: int64, float32 or bytes, checked on the way.

The conversions of arrow.encode (which lays the stored values out per row): booleans, dates and
timestamps to int64, doubles and decimals to float32 (refusing what float32 cannot hold),
strings and binary as bytes buffers, ml Vectors densified. A value that cannot be stored
raises BadRow, which names the row in the batch; BatchEncoder renames it in its caller's
numbering (the row of the Spark task, say) and raises EncodeError.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfspark.errors import EncodeError
from tfspark.spec.model import Feature

_F32_MAX = float(np.finfo(np.float32).max)
_TS_TO_US = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}
ROW = "{row}"  # where a BadRow's message names its row


class BadRow(Exception):
    """A value that cannot be stored, at row `row` of the batch (ROW in `template`)."""

    def __init__(self, template: str, row: int):
        super().__init__(template.replace(ROW, str(row)))
        self.template, self.row = template, row

    def renamed(self, number: int, where: str = "") -> EncodeError:
        """The EncodeError naming the row as `number`, with `where` the rows are counted (e.g.
        "Spark partition 2") said at the end."""
        note = f" (rows are counted within {where})" if where else ""
        return EncodeError(self.template.replace(ROW, str(number)) + note)


def fill(arr: pa.Array, value: object) -> pa.Array:
    """arr with its nulls replaced by value (the stored placeholder of absent rows)."""
    return pc.fill_null(arr, value) if arr.null_count else arr


def to_int64(f: Feature, arr: pa.Array) -> np.ndarray:
    """Integers, booleans (0/1), dates (days) and timestamps (microseconds UTC) as int64."""
    t, enc = arr.type, f.encoding
    if enc == "bool" and pa.types.is_boolean(t):
        return fill(arr, False).cast(pa.int64()).to_numpy(zero_copy_only=False)
    if enc in ("int", "bool") and pa.types.is_integer(t):
        filled = fill(arr, 0)
        if pa.types.is_uint64(t):
            big = pc.greater(filled, pa.scalar(2**63 - 1, pa.uint64())).to_numpy(
                zero_copy_only=False)
            if big.any():
                row = int(np.argmax(big))
                raise EncodeError(f"column {f.name!r} value {filled[row].as_py()} at element "
                                  f"{row} is out of int64 range; cast or scale the column")
        return filled.cast(pa.int64(), safe=False).to_numpy(zero_copy_only=False)
    if enc == "date" and (pa.types.is_date32(t) or pa.types.is_date64(t)):
        days = fill(arr, 0).cast(pa.date32()) if pa.types.is_date64(t) else arr
        return fill(days.view(pa.int32()), 0).cast(pa.int64()).to_numpy(
            zero_copy_only=False)
    if enc == "timestamp" and pa.types.is_timestamp(t):
        raw = fill(arr.view(pa.int64()), 0).to_numpy(zero_copy_only=False)
        scale = _TS_TO_US[t.unit]
        if scale is None:
            return np.floor_divide(raw, 1000)
        limit = (2**63 - 1) // scale
        if scale > 1 and (np.abs(raw) > limit).any():
            raise EncodeError(f"column {f.name!r} has a timestamp too far from 1970 to hold in "
                              f"microseconds; filter or clip it")
        return raw * scale
    wrong_type(f, t)
    raise AssertionError  # unreachable, for type checkers


def to_float32(f: Feature, raw: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """float64 values as float32; a finite value beyond float32's range is refused (BadRow at
    its row: rows are the n+1 element offsets of the rows)."""
    raw = np.asarray(raw, dtype=np.float64)
    with np.errstate(over="ignore"):
        out = raw.astype(np.float32)
    over = np.isfinite(raw) & ~np.isfinite(out)
    if over.any():
        i = int(np.argmax(over))
        raise BadRow(f"column {f.name!r} value {float(raw[i])!r} at row {ROW} is out of "
                     f"float32 range (|x| <= {_F32_MAX:.4g}); scale or clip the column",
                     _row_of(rows, i))
    return out


def check_decimals(f: Feature, arr: pa.Array, f32: np.ndarray, rows: np.ndarray) -> None:
    """Decimals are stored as float32 (about 7 significant digits) only when they come back
    exactly: the float32 value, rounded to the column's scale, is the decimal and fits its
    precision. Otherwise BadRow naming the value and what it would read back as, and the two
    ways on: a cast to double (float32 rounding accepted) or decimal_as="string" (exact)."""
    p, s = arr.type.precision, arr.type.scale
    rounded = np.round(f32.astype(np.float64), s)
    fits = np.abs(rounded) < 10.0 ** (p - s)
    back = pa.array(np.where(fits, rounded, 0.0)).cast(pa.decimal128(38, s))
    same = pc.equal(back, fill(arr, 0).cast(pa.decimal128(38, s))).to_numpy(
        zero_copy_only=False)
    bad = ~(same & fits) & arr.is_valid().to_numpy(zero_copy_only=False)
    if bad.any():
        i = int(np.argmax(bad))
        got = (f"{rounded[i]:.{s}f}" if fits[i]
               else f"{float(f32[i]):.7g}, beyond decimal({p},{s})")
        raise BadRow(f"column {f.name!r} value {arr[i].as_py()} at row {ROW} does not survive "
                     f"float32 storage (about 7 significant digits): it would read back as "
                     f"{got}; store decimals exactly as text with decimal_as='string' (data "
                     f"source option decimalAs=string), or cast the column to double to accept "
                     f"float32 rounding", _row_of(rows, i))


def _row_of(rows: np.ndarray, element: int) -> int:
    return int(np.searchsorted(rows, element, side="right") - 1)


def bytes_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(data, n+1 int64 offsets) of a string/binary column, zero-copy for large_binary."""
    if not (pa.types.is_large_binary(arr.type)):
        arr = arr.cast(pa.large_binary())
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else \
        np.zeros(0, np.uint8)
    return data, offsets


def wrong_type(f: Feature, t: pa.DataType) -> None:
    """Raise the EncodeError for a column whose Arrow type does not fit its feature."""
    raise EncodeError(f"column {f.name!r} holds Arrow type {t}, which does not match its spec "
                      f"({f.source_type}, stored as {f.dtype}); re-infer the spec from this "
                      f"data or cast the column")


def column_of(batch: pa.RecordBatch, path: tuple[str, ...]) -> pa.Array:
    """The column at `path` (struct fields flattened, their parents' nulls applied)."""
    arr = batch.column(path[0])
    for depth, name in enumerate(path[1:], start=1):
        if not pa.types.is_struct(arr.type):
            raise EncodeError(f"column {'.'.join(path[:depth])!r} should be a struct, got Arrow "
                              f"type {arr.type}")
        idx = arr.type.get_field_index(name)
        if idx < 0:
            raise EncodeError(f"struct column {'.'.join(path[:depth])!r} has no field {name!r}")
        arr = arr.flatten()[idx]  # flatten() applies the struct's own nulls to its fields
    return arr
