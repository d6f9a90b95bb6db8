"""The one place numba is configured: compiled kernels are cached on disk, release the GIL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])


def njit(fn: F) -> F:
    """Compile `fn` in nopython mode.

    cache=True keeps compiled kernels in __pycache__ (or NUMBA_CACHE_DIR), so each new Python
    worker loads them instead of compiling again; nogil lets Spark threads run kernels in
    parallel. Typed as returning `fn` so type checkers see the Python signature.
    """
    return numba.njit(cache=True, nogil=True)(fn)  # type: ignore[return-value]
