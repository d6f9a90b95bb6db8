"""make_dataset(..., file_reader="tensorflow") is graph ops alone, so tf.data service runs it
on its workers (how large TPU and GPU jobs move input processing off the trainers): an
in-process dispatcher and worker serve both layouts, every row as read_batches reads it. The
default for the row layout (tfspark's own reader, a Python stage) is what the service cannot
run. Written with write_dataset: no Spark."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import tfspark
from tfspark.errors import OptionError

pytestmark = pytest.mark.tf
N = 3000


@pytest.fixture(scope="module")
def service(tf):
    """A dispatcher here and a worker in a process of its own (what runs there is the graph:
    no Python function of this process)."""
    import subprocess
    import sys
    import time

    svc = tf.data.experimental.service
    dispatcher = svc.DispatchServer()
    address = dispatcher.target.split("://")[1]
    worker = subprocess.Popen([sys.executable, "-c", (
        "import sys, tensorflow as tf; svc = tf.data.experimental.service; "
        "w = svc.WorkerServer(svc.WorkerConfig(dispatcher_address=sys.argv[1])); "
        "print('up', flush=True); w.join()"), address],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert worker.stdout is not None and worker.stdout.readline().strip() == "up"
    time.sleep(1)  # (registered with the dispatcher)
    yield dispatcher.target
    worker.kill()
    worker.wait()
    dispatcher._stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("service")
    ids = np.arange(N)
    table = pa.table({"id": pa.array(ids), "x": pa.array(ids * 0.25),
                      "s": pa.array([f"v{i % 13}" for i in ids]),
                      "tags": pa.array([list(range(i % 4)) for i in ids]),
                      "y": pa.array(ids % 2)})
    out = {}
    for name, kw in {"rows": {}, "blocks": {"rows_per_record": 64}}.items():
        out[name] = str(root / name)
        tfspark.write_dataset(table, out[name], label_cols=["y"], max_records_per_file=1000,
                              **kw)
    return out


@pytest.mark.parametrize("layout", ["rows", "blocks"])
def test_tf_data_service_serves_every_row(tf, service, data, layout):
    ds = tfspark.make_dataset(data[layout], 100, file_reader="tensorflow", seed=1)
    served = ds.apply(tf.data.experimental.service.distribute(
        processing_mode="parallel_epochs", service=service, job_name=f"job-{layout}"))
    got = {}
    for features, y in served:
        f = {k: (v.to_list() if hasattr(v, "to_list") else v.numpy().tolist())
             for k, v in features.items()}
        for i, x, s, tags, label in zip(f["id"], f["x"], f["s"], f["tags"], y.numpy()):
            assert i not in got
            got[i] = (x, s, tags, int(label))
    want = {}
    for features, y in tfspark.read_batches(data[layout], 500):
        for i, x, s, tags, label in zip(features["id"], features["x"], features["s"],
                                        features["tags"].to_list(), y):
            want[int(i)] = (float(x), bytes(s), [int(t) for t in tags], int(label))
    assert len(got) == N and got == want


def test_the_default_row_reader_is_not_for_the_service(tf, service, data):
    """tfspark's own reader of the row layout is a Python stage: a worker in another process
    cannot run it (file_reader="tensorflow" is the way)."""
    ds = tfspark.make_dataset(data["rows"], 100)
    served = ds.apply(tf.data.experimental.service.distribute(
        processing_mode="parallel_epochs", service=service, job_name="job-default"))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not find callback"):
        for _ in served:
            pass


def test_only_files_tensorflow_reaches(data, tmp_path):
    with pytest.raises(OptionError, match="file_reader='tensorflow' reads with TensorFlow's "
                       "file systems, cache_dir is tfspark's reader's"):
        tfspark.make_dataset(data["rows"], 10, file_reader="tensorflow",
                             cache_dir=str(tmp_path))
    with pytest.raises(OptionError, match=r"file_reader must be one of \['auto', "
                       r"'tensorflow'\], got 'tf'"):
        tfspark.make_dataset(data["rows"], 10, file_reader="tf")
