"""store/memory.py: the readers tell glibc's allocator to keep freed memory, once per process,
unless the environment sets it or opts out. Each case runs in a fresh Python (the settings are
the process's), and looks at what the allocator does: whether a 16 MiB array gets a mapping of
its own (mallinfo2's hblks) or comes from the heap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not hasattr(os, "confstr") or not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith(
        "glibc"), reason="glibc's allocator only")

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import ctypes, json, sys
import numpy as np

class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
applied = None
if sys.argv[1] == "function":
    from tfspark.store.memory import keep_freed_memory
    applied = [keep_freed_memory(), keep_freed_memory()]
elif sys.argv[1] in ("read_batches", "make_dataset"):
    import tfspark
    from tfspark.store import memory
    try:
        getattr(tfspark, sys.argv[1])(sys.argv[2], 8)
    except Exception as e:  # (a missing data set: read_batches fails after applying them)
        print(type(e).__name__, file=sys.stderr)
    applied = memory._applied
before = libc.mallinfo2().hblks
a = np.ones(16 << 20, np.uint8)
print(json.dumps({"applied": applied, "mapped": libc.mallinfo2().hblks - before}))
"""


def _probe(*args: str, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("MALLOC_") and k != "TFSPARK_KEEP_MEMORY"}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**base, "PYTHONPATH": str(ROOT), **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_large_array_gets_a_mapping_of_its_own_by_default():
    assert _probe("none")["mapped"] == 1


def test_once_applied_it_comes_from_the_heap_and_a_second_call_changes_nothing():
    got = _probe("function")
    every = ["MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_"]
    assert got == {"applied": [every, every], "mapped": 0}


@pytest.mark.parametrize("reader", ["read_batches", "make_dataset"])
def test_the_readers_apply_them(reader, tmp_path):
    if reader == "make_dataset":
        pytest.importorskip("tensorflow")
    got = _probe(reader, str(tmp_path / "no-such-data-set"))
    assert got["mapped"] == 0 and "MALLOC_MMAP_THRESHOLD_" in got["applied"]


def test_what_the_environment_sets_is_left_alone():
    # glibc took the environment's threshold (1 MiB) at start-up: the array is mapped
    got = _probe("function", MALLOC_MMAP_THRESHOLD_=str(1 << 20))
    assert got["mapped"] == 1
    assert got["applied"][0] == ["MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"]


@pytest.mark.parametrize("value", ["0", "off"])
def test_tfspark_keep_memory_0_opts_out(value):
    assert _probe("function", TFSPARK_KEEP_MEMORY=value) == {"applied": [[], []], "mapped": 1}
