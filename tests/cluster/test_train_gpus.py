"""train_on_spark with Spark's GPU scheduling, on the loopback cluster whose workers offer one
fake GPU each ("0" and "1", from discovery scripts): one barrier task per GPU, each training
process (TensorFlow or JAX) started with CUDA_VISIBLE_DEVICES set to the GPU Spark gave its
task; more workers than GPUs fail before any task starts.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
from pyspark import cloudpickle

import tfspark
from tfspark.errors import OptionError

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.tf, pytest.mark.slow]

# The executors cannot import this test module: its functions travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def report_gpus(ctx):
    ctx.log(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}")
    if ctx.backend == "jax":
        import jax

        return jax.process_count()
    return ctx.strategy.num_replicas_in_sync


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_each_worker_gets_the_gpu_spark_gave_its_task(gpu_cluster_spark, tmp_path, backend):
    sc = gpu_cluster_spark.sparkContext
    assert sc.getConf().get("spark.task.resource.gpu.amount") == "1"
    ckpt = tmp_path / "ckpt"
    assert tfspark.train_on_spark(gpu_cluster_spark, report_gpus, 2, backend=backend,
                                  checkpoint_dir=str(ckpt)) == 2
    seen = set()
    for i in (0, 1):
        log = (ckpt / "logs" / f"worker-{i}.log").read_text()
        m = re.search(r"CUDA_VISIBLE_DEVICES='(\d+)'", log)
        assert m, log[-1500:]
        seen.add(m.group(1))
    assert seen == {"0", "1"}  # one GPU each, the two executors' own


def test_more_workers_than_gpus_fail_before_any_task(gpu_cluster_spark):
    with pytest.raises(OptionError, match=r"num_workers=3 but the cluster has 2 task slot"):
        tfspark.train_on_spark(gpu_cluster_spark, report_gpus, 3)
