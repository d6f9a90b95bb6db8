"""One JAX training worker of train_on_spark(backend="jax"):
`python -m tfspark.keras.jax_worker JOB RESULT`.

Keras 3 on JAX across processes: keras.distribution.initialize (jax.distributed with worker
0's address as the coordinator, and one random seed for every process, so all build the same
initial weights), then a DataParallel distribution over every worker's devices. Each worker
feeds its own batches; Keras makes the global batch of them
(jax.make_array_from_process_local_data), so auto-sharding is off. CPU collectives go through
gloo (JAX has none across processes otherwise, and Keras's seed exchange runs on the CPUs even
where GPUs train). The Spark task sets CUDA_VISIBLE_DEVICES to the GPUs it was given.
"""

from __future__ import annotations

import sys
from typing import Any

from tfspark.errors import MissingExtraError, require


def _missing() -> str | None:
    """The one line to show when this executor lacks JAX, else None. (Without Keras, the
    package tfspark.keras says so itself, before this module runs.)"""
    try:
        require("jax", "train_on_spark(backend='jax')", "jax", " on every executor")
    except MissingExtraError as e:
        return str(e)
    return None


def _differs(value: int) -> bool:
    """Whether any process holds another value of an int (the same answer on every one)."""
    import numpy as np
    from jax.experimental import multihost_utils

    seen = np.asarray(multihost_utils.process_allgather(np.int64(value)))
    return len(set(seen.ravel().tolist())) > 1


def _distribution(job: dict[str, Any]) -> Any:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    import keras

    if keras.backend.backend() != "jax":  # pragma: no cover - the task sets KERAS_BACKEND
        raise RuntimeError(f"KERAS_BACKEND is {keras.backend.backend()!r}, not 'jax'")
    keras.distribution.initialize(",".join(job["workers"]), job["num_workers"], job["index"])
    distribution = keras.distribution.DataParallel()
    distribution.auto_shard_dataset = False  # each worker reads its own shard
    keras.distribution.set_distribution(distribution)
    return distribution


def main(argv: list[str]) -> int:
    """Run the job's train_fn under a DataParallel distribution over every worker; the exit
    status is 0 when it returned (and the chief's value is in RESULT)."""
    missing = _missing()
    if missing is not None:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    from tfspark.keras.worker import WorkerContext, read_job, run_job

    job = read_job(argv, "tfspark.keras.jax_worker")
    if job is None:
        return 2
    distribution = _distribution(job)
    import jax
    from jax.experimental import multihost_utils

    ctx = WorkerContext(job["num_workers"], job["index"], job["task_id"], job["checkpoint_dir"],
                        backend="jax", distribution=distribution, differs=_differs)
    ctx.log(f"started: {jax.process_count()} processes, {jax.device_count()} devices in sync")
    run_job(job, ctx, argv[1])
    # Leave together: worker 0 hosts the coordination service, and one that leaves first
    # fails the others' shutdown barrier.
    multihost_utils.sync_global_devices("tfspark-finished")
    ctx.log("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
