"""The one place numba is configured: compiled kernels are cached on disk, release the GIL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba
from numba.core import event

from tfspark import progress

F = TypeVar("F", bound=Callable[..., Any])


def njit(fn: F) -> F:
    """Compile `fn` in nopython mode.

    cache=True keeps compiled kernels in __pycache__ (or NUMBA_CACHE_DIR), so each new Python
    worker loads them instead of compiling again; nogil lets Spark threads run kernels in
    parallel. Typed as returning `fn` so type checkers see the Python signature.
    """
    return numba.njit(cache=True, nogil=True)(fn)  # type: ignore[return-value]


class _FirstCompile(event.Listener):
    """Says once per process that kernels are compiling, which takes seconds (a numba compile
    event fires only on a miss of the disk cache: a new install, or a new kind of input)."""

    said = False

    def on_start(self, ev: event.Event) -> None:
        py_func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
        if not _FirstCompile.said and getattr(py_func, "__module__", "").startswith("tfspark."):
            _FirstCompile.said = True
            progress.log.info("tfspark: compiling kernels (first run only: they are cached "
                              "on disk after) ...")

    def on_end(self, ev: event.Event) -> None:
        pass


event.register("numba:compile", _FirstCompile())
