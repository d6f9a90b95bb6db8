"""The one place numba is configured: compiled kernels are cached on disk, release the GIL."""

from __future__ import annotations

import numba

# cache=True keeps compiled kernels in __pycache__ (or NUMBA_CACHE_DIR), so each new Python
# worker loads them instead of compiling again; nogil lets Spark threads run kernels in parallel.
njit = numba.njit(cache=True, nogil=True)
