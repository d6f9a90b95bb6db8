"""DataLoader options for the tests' worker processes: started by a fork server (preloaded with
torch and the reader), not forked from the test process, whose Spark, TensorFlow and reader
threads a fork copies mid-way (a lock one of them held at the fork stays held in the child for
ever); and a timeout, so a worker that never answers fails its test instead of stalling the run.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

WORKER_TIMEOUT_S = 120


def worker_options(context: str = "forkserver") -> dict[str, Any]:
    """DataLoader(..., **worker_options()) where num_workers > 0."""
    ctx = multiprocessing.get_context(context)
    if context == "forkserver":
        ctx.set_forkserver_preload(["torch", "tfspark.numpy.torch_batches"])
    return {"multiprocessing_context": ctx, "timeout": WORKER_TIMEOUT_S}
