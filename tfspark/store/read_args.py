"""The checks of a reader's arguments (make_dataset, read_batches) that need no data set: one
OptionError naming the argument, before anything is read."""

from __future__ import annotations

import os
from typing import Any

from tfspark.errors import OptionError
from tfspark.store.local_paths import local_only
from tfspark.store.read_plan import AUTOTUNE


def check_read_args(batch_size: Any, shuffle_buffer: Any, epochs: Any, num_parallel_reads: Any,
                    shard: Any, cache: Any, seed: Any = None) -> None:
    """OptionError for a bad batch_size, shuffle_buffer, epochs, num_parallel_reads, shard,
    cache or seed argument of a reader (make_dataset, read_batches)."""

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not is_int(batch_size) or batch_size < 1:
        raise OptionError(f"batch_size must be a positive int, got {batch_size!r}")
    if shuffle_buffer is not None and (not is_int(shuffle_buffer) or shuffle_buffer < 0):
        raise OptionError(f"shuffle_buffer must be an int >= 0 (0: no shuffling) or None, got "
                          f"{shuffle_buffer!r}")
    if epochs is not None and (not is_int(epochs) or epochs < 1):
        raise OptionError(f"epochs must be a positive int, or None to repeat forever, got "
                          f"{epochs!r}")
    if not is_int(num_parallel_reads) or (num_parallel_reads < 1 and
                                          num_parallel_reads != AUTOTUNE):
        raise OptionError(f"num_parallel_reads must be a positive int or AUTOTUNE (-1), got "
                          f"{num_parallel_reads!r}")
    if shard is not None:
        ok = (isinstance(shard, (tuple, list)) and len(shard) == 2 and all(map(is_int, shard))
              and shard[0] >= 1 and 0 <= shard[1] < shard[0])
        if not ok:
            raise OptionError(f"shard must be (num_workers, index) with 0 <= index < "
                              f"num_workers, got {shard!r}")
    if seed is not None and not is_int(seed):
        raise OptionError(f"seed must be an int or None, got {seed!r}")
    if not isinstance(cache, (bool, str)):
        raise OptionError(f"cache must be True/False or a file path, got {cache!r}")


def check_io_args(io_threads: Any, cache_dir: Any) -> str | None:
    """OptionError for a bad io_threads or cache_dir argument of a reader; else the cache
    directory as a local path (None: no cache)."""
    if io_threads is not None and (not isinstance(io_threads, int) or
                                   isinstance(io_threads, bool) or io_threads < 1):
        raise OptionError(f"io_threads must be a positive int or None, got {io_threads!r}")
    if cache_dir is None:
        return None
    cache_dir = local_only(cache_dir, "cache_dir", "the cache is kept on this machine's "
                           "disk")
    if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
        raise OptionError(f"cache_dir {cache_dir!r} is a file, not a directory")
    why = "no permission"
    try:  # now, not when the first file is kept, in a reading thread
        os.makedirs(cache_dir, exist_ok=True)
        writable = os.access(cache_dir, os.W_OK | os.X_OK)
    except OSError as e:
        writable, why = False, e.strerror or str(e)
    if not writable:
        raise OptionError(f"cache_dir {cache_dir!r} cannot be written here "
                          f"({why}): give a directory this process may write")
    return cache_dir
