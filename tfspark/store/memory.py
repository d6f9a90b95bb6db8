"""glibc's allocator in a process that reads: told to keep the memory the readers free.

A reader allocates its arrays afresh for every window and batch. By default glibc serves
allocations over 128 KiB-32 MiB with fresh mappings and hands freed memory back to the
kernel, which then zeroes every page of the next allocation again: page faults took a quarter
or more of the readers' CPU (docs/benchmarks.md). These settings keep up to 256 MiB of freed
memory and serve allocations under 64 MiB from the heap, for about 100 MiB more resident.

read_batches and make_dataset apply them once per process (mallopt, as the MALLOC_*_
environment variables do at start-up); a setting the environment already gives is left alone,
and TFSPARK_KEEP_MEMORY=0 leaves the allocator as it is. Other C libraries: nothing to do.
"""

from __future__ import annotations

import ctypes
import os
import threading

# (mallopt's parameter, its environment variable, the value)
SETTINGS = ((-1, "MALLOC_TRIM_THRESHOLD_", 256 << 20),  # M_TRIM_THRESHOLD
            (-2, "MALLOC_TOP_PAD_", 64 << 20),  # M_TOP_PAD
            (-3, "MALLOC_MMAP_THRESHOLD_", 64 << 20))  # M_MMAP_THRESHOLD
OPT_OUT = "TFSPARK_KEEP_MEMORY"

_lock = threading.Lock()
_applied: list[str] | None = None  # what this process set, once it tried


def keep_freed_memory() -> list[str]:
    """Apply SETTINGS to this process's allocator (once): the environment variables of those
    set, [] when none was (opted out, set already, or not glibc)."""
    global _applied
    with _lock:
        if _applied is None:
            _applied = _apply()
        return list(_applied)


def _apply() -> list[str]:
    if os.environ.get(OPT_OUT, "").strip().lower() in ("0", "false", "no", "off"):
        return []
    mallopt = _mallopt()
    if mallopt is None:
        return []
    return [name for param, name, value in SETTINGS
            if name not in os.environ and mallopt(param, value) == 1]


def _mallopt():
    """glibc's mallopt, or None (another C library: musl's ignores these, macOS has none)."""
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return None
    except (ValueError, OSError, AttributeError):  # not glibc, or no confstr (Windows)
        return None
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols: its C library's among them
    except OSError:
        return None
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None:
        mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt
