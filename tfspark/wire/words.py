"""Unaligned 8-byte words in byte arrays, for the compiled kernels: one load or store instruction
where a loop would move a byte at a time (the CRC's input; the heads and values the Example
writer copies). Both take a contiguous 1-d uint8 array and an index, and neither checks bounds:
the caller keeps [idx, idx + 8) within the array's memory. A word's leading or trailing zero
bits, one instruction where a loop would branch (the size of a varint written or read). And
copy_bytes, the copy by words that the Example writer and the readers' string copies share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from tfspark.wire.jit import njit

SLACK = 8  # bytes past the end of what it means to write that a copy by words may write
# The kernels index buffers by byte positions made unsigned (buf[unsigned(pos)]): numba checks
# every signed index for a negative one (Python's wrap-around), which took half the time of
# copying a scalar's entry when writing, and a fifth of the time of indexing records.
unsigned = np.uint64


def _bytes_array(arr: Any) -> bool:
    """Whether numba's type `arr` is a contiguous 1-d uint8 array: an address from the index
    alone would be wrong for any other."""
    return (isinstance(arr, types.Array) and arr.ndim == 1 and arr.layout == "C"
            and arr.dtype == types.uint8)


def _address(context: Any, builder: Any, arr_type: Any, arr: Any, idx: Any) -> Any:
    data = context.make_array(arr_type)(context, builder, arr).data
    return builder.bitcast(builder.gep(data, [idx]), ir.IntType(64).as_pointer())


def _load_typer(typingctx, arr, idx):
    """The 8 bytes at arr[idx:idx + 8] as one little-endian word, any alignment."""
    if not _bytes_array(arr):
        return None

    def codegen(context, builder, signature, args):
        return builder.load(_address(context, builder, signature.args[0], *args), align=1)
    return types.uint64(arr, types.intp), codegen


def _store_typer(typingctx, arr, idx, word):
    """Write word's 8 bytes (little-endian) at arr[idx:idx + 8], any alignment."""
    if not _bytes_array(arr):
        return None

    def codegen(context, builder, signature, args):
        builder.store(args[2], _address(context, builder, signature.args[0], args[0], args[1]),
                      align=1)
        return context.get_dummy_value()
    return types.void(arr, types.intp, types.uint64), codegen


def _zeros_typer(llvm: str) -> Any:
    """The typer of an intrinsic counting a uint64's zero bits at one end (64 for 0) with the
    LLVM intrinsic `llvm` (llvm.ctlz.i64: leading, llvm.cttz.i64: trailing)."""

    def typer(typingctx, word):
        if word != types.uint64:
            return None

        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64), ir.IntType(1)])
            fn = cgutils.get_or_insert_function(builder.module, fnty, llvm)
            return builder.call(fn, [args[0], ir.Constant(ir.IntType(1), 0)])
        return types.uint64(types.uint64), codegen
    return typer


_clz_typer = _zeros_typer("llvm.ctlz.i64")
_ctz_typer = _zeros_typer("llvm.cttz.i64")


_load_typer.__name__ = "load_u64"  # (numba names an intrinsic after its typer)
_store_typer.__name__ = "store_u64"
_clz_typer.__name__ = "leading_zeros"
_ctz_typer.__name__ = "trailing_zeros"
load_u64: Any = intrinsic(_load_typer)
store_u64: Any = intrinsic(_store_typer)
leading_zeros: Any = intrinsic(_clz_typer)
trailing_zeros: Any = intrinsic(_ctz_typer)


@njit
def copy_bytes(out, pos, src, s, n, wide):
    """src[s:s + n] to out[pos:], the position after it returned; by words when wide (while
    src has 8 bytes to read), each store reaching up to 7 bytes past the copy's end: out
    needs them (SLACK), and what they hold is written again or never read."""
    k = 0
    if wide:
        last = src.shape[0] - 8
        while k < n and s + k <= last:
            store_u64(out, pos + k, load_u64(src, s + k))
            k += 8
    at, src_at = unsigned(pos), unsigned(s)
    for j in range(unsigned(k), unsigned(n)):  # (strings are short; a loop beats slice setup)
        out[at + j] = src[src_at + j]
    return pos + n
