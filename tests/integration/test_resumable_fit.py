"""resumable_fit: a Keras fit from read_batches stopped at any step,
mid-epoch included, and started again in a new model and a new reader, ends with exactly the
weights of the run that was never stopped (the same batches, weights and optimizer state), every
epoch in the history once. In one process on this venv's Keras backend; the loopback cluster's
JAX workers do the same after a kill (tests/cluster/test_cluster_training.py). No Spark: the
files are written by tfspark's encoders."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T
from test_numpy_reader import write_dir

import tfspark
from tfspark.errors import OptionError
from tfspark.keras import resume

pytestmark = [pytest.mark.tf]
ROWS, BATCH, EPOCHS, EVERY = 600, 32, 3, 5  # 19 steps an epoch (the last one short)
STEPS = -(-ROWS // BATCH)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, 3))
    batch = pa.RecordBatch.from_pydict({
        **{f"x{i}": pa.array(x[:, i]) for i in range(3)},
        "y": pa.array((x.sum(axis=1) > 0).astype(np.int64))})
    schema = T.StructType([T.StructField(f"x{i}", T.DoubleType()) for i in range(3)] +
                          [T.StructField("y", T.LongType())])
    spec = tfspark.infer_spec(schema, label_cols=["y"])
    return write_dir(str(tmp_path_factory.mktemp("fit") / "blocks"), batch, spec, 8, files=3)


def model() -> object:
    import keras

    keras.utils.set_random_seed(0)
    inputs = {f"x{i}": keras.Input((), name=f"x{i}", dtype="float32") for i in range(3)}
    x = keras.ops.stack([inputs[f"x{i}"] for i in range(3)], axis=1)
    out = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dense(8, "relu")(x))
    m = keras.Model(inputs, out)
    m.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")
    return m


def reader(path: str, **kw) -> object:
    return tfspark.read_batches(path, BATCH, **{"label_cols": ["y"], "seed": 7, "epochs": None,
                                                "shuffle_buffer": 100, **kw})


class Stop(Exception):
    pass


def stop_at(epoch: int, step: int) -> object:
    import keras

    class StopAt(keras.callbacks.Callback):  # a crash after this many steps of this epoch
        def on_epoch_begin(self, e, logs=None):
            self.epoch = e

        def on_train_batch_end(self, batch, logs=None):
            if self.epoch == epoch and batch + 1 == step:
                raise Stop

    return StopAt()


def weights(m) -> list[np.ndarray]:
    return [np.asarray(w) for w in m.get_weights()]


@pytest.fixture(scope="module")
def uninterrupted(data, tmp_path_factory):
    m = model()
    done = tfspark.keras.resumable_fit(m, reader(data), EPOCHS, str(tmp_path_factory.mktemp("u")),
                                 every=EVERY, verbose=0)
    assert done.resumed_at == (0, 0) and len(done.history["loss"]) == EPOCHS
    return weights(m), done.history


# (epoch, step) where the first run dies: before any checkpoint, just after one, between two,
# one step before an epoch's end, right at the first step of an epoch
@pytest.mark.parametrize("epoch,step,resumed_at", [
    (0, 3, (0, 0)), (0, 5, (0, 5)), (1, 13, (1, 10)), (1, STEPS - 1, (1, 15)), (2, 1, (2, 0))])
def test_a_run_stopped_anywhere_resumes_to_the_same_weights(data, uninterrupted, tmp_path,
                                                            epoch, step, resumed_at):
    ckpt = str(tmp_path / "ckpt")
    with pytest.raises(Stop):
        tfspark.keras.resumable_fit(model(), reader(data), EPOCHS, ckpt, every=EVERY, verbose=0,
                              callbacks=[stop_at(epoch, step)])
    again, logged = model(), []  # new weights and a new reader, as a new process has
    done = tfspark.keras.resumable_fit(again, reader(data), EPOCHS, ckpt, every=EVERY, verbose=0,
                                 log=logged.append)
    assert done.resumed_at == resumed_at
    assert bool(logged) == (resumed_at != (0, 0))
    want, history = uninterrupted
    for got, expected in zip(weights(again), want):
        np.testing.assert_array_equal(got, expected)
    assert len(done.history["loss"]) == EPOCHS
    # The epochs finished before the stop keep their figures; the interrupted one counts
    # the steps after the restart only.
    assert done.history["loss"][:resumed_at[0]] == history["loss"][:resumed_at[0]]


def test_the_progress_bar_counts_the_epochs_of_the_whole_run(data, tmp_path, capsys):
    """A resumed run shows its epochs as those of one run: the rest of the interrupted epoch
    (a fit call of its own) is "Epoch 2/3", not Keras's "Epoch 2/2", and counts its steps."""
    ckpt = str(tmp_path / "ckpt")
    with pytest.raises(Stop):
        tfspark.keras.resumable_fit(model(), reader(data), EPOCHS, ckpt, every=EVERY, verbose=0,
                              callbacks=[stop_at(1, 13)])
    capsys.readouterr()
    done = tfspark.keras.resumable_fit(model(), reader(data), EPOCHS, ckpt, every=EVERY, verbose=2)
    assert done.resumed_at == (1, 10)
    out = capsys.readouterr().out
    assert re.findall(r"^Epoch (\d+/\d+)$", out, re.M) == ["2/3", "3/3"], out
    assert re.findall(r"^(\d+)/\1 - ", out, re.M) == [str(STEPS - 10), str(STEPS)], out


def test_the_train_jobs_rate_is_of_whole_epochs_only():
    """`tfspark train` reports examples/s of its fastest whole epoch: the rest of an
    interrupted one (fewer steps) is not timed as an epoch, also when it is all a resumed run
    trained (then no rate, rather than one too high)."""
    from tfspark.cli.train import _epoch_timer

    def ran(*steps: int) -> list[float]:
        timer = _epoch_timer()
        timer.whole = 4
        for e, n in enumerate(steps):
            timer.on_epoch_begin(e)
            for b in range(n):
                timer.on_train_batch_end(b)
            timer.on_epoch_end(e)
        return timer.seconds

    assert len(ran(3, 4, 4)) == 2
    assert ran(3) == []


def test_a_reader_of_processes_resumes_to_the_same_weights(data, tmp_path):
    """read_batches(processes=2): a run stopped mid-epoch and started again with a new model
    and new reading processes ends with the weights of the run never stopped."""
    m = model()
    with reader(data, processes=2) as r:
        tfspark.keras.resumable_fit(m, r, EPOCHS, str(tmp_path / "u"), every=EVERY, verbose=0)
    ckpt = str(tmp_path / "ckpt")
    with reader(data, processes=2) as r, pytest.raises(Stop):
        tfspark.keras.resumable_fit(model(), r, EPOCHS, ckpt, every=EVERY, verbose=0,
                              callbacks=[stop_at(1, 13)])
    again = model()
    with reader(data, processes=2) as r:
        done = tfspark.keras.resumable_fit(again, r, EPOCHS, ckpt, every=EVERY, verbose=0)
    assert done.resumed_at == (1, 10)
    for got, expected in zip(weights(again), weights(m)):
        np.testing.assert_array_equal(got, expected)


def test_checkpoints_hold_the_reader_and_only_the_newest_two_are_kept(data, tmp_path):
    ckpt = tmp_path / "ckpt"
    tfspark.keras.resumable_fit(model(), reader(data), 2, str(ckpt), every=EVERY, verbose=0)
    assert sorted(os.listdir(ckpt)) == ["epoch-00001-step-0000015", "epoch-00002"]
    state = json.loads((ckpt / "epoch-00002" / "state.json").read_text())
    assert (state["epoch"], state["step"], len(state["history"]["loss"])) == (2, 0, 2)
    saved = resume.reader_states(str(ckpt / "epoch-00002"))
    assert len(saved) == 1 and saved[0]["batches"] == 2 * STEPS
    # A finished run resumes to nothing more: the same epochs asked for train no further.
    done = tfspark.keras.resumable_fit(model(), reader(data), 2, str(ckpt), every=EVERY, verbose=0)
    assert done.resumed_at == (2, 0) and len(done.history["loss"]) == 2


def test_a_reader_of_one_epoch_an_iteration_gives_the_same_as_an_endless_one(data, tmp_path):
    """epochs=1: each of fit's epochs is a new iteration of the reader (a new shuffle)."""
    m = model()
    tfspark.keras.resumable_fit(m, tfspark.read_batches(data, BATCH, label_cols=["y"], seed=7,
                                                  shuffle_buffer=100), 2, verbose=0)
    with pytest.raises(Stop):
        tfspark.keras.resumable_fit(model(), tfspark.read_batches(
            data, BATCH, label_cols=["y"], seed=7, shuffle_buffer=100), 2, str(tmp_path),
            every=EVERY, verbose=0, callbacks=[stop_at(1, 7)])
    again = model()
    done = tfspark.keras.resumable_fit(again, tfspark.read_batches(
        data, BATCH, label_cols=["y"], seed=7, shuffle_buffer=100), 2, str(tmp_path),
        every=EVERY, verbose=0)
    assert done.resumed_at == (1, 5)
    for got, expected in zip(weights(again), weights(m)):
        np.testing.assert_array_equal(got, expected)


def test_bad_arguments_say_what_to_do(data, tmp_path):
    with pytest.raises(OptionError, match="every=0"):
        tfspark.keras.resumable_fit(model(), reader(data), 1, str(tmp_path), every=0)
    with pytest.raises(OptionError, match="initial_epoch"):
        tfspark.keras.resumable_fit(model(), reader(data), 1, str(tmp_path), initial_epoch=1)
    with pytest.raises(OptionError, match=r"checkpoint_dir 'gs://b/ckpt': .* not an object-store"):
        tfspark.keras.resumable_fit(model(), reader(data), 1, "gs://b/ckpt")
    with pytest.raises(OptionError, match="read_batches reader"):
        tfspark.keras.resumable_fit(model(), [np.zeros(3)], 1, str(tmp_path))
    # A checkpoint of epoch_checkpoint (no reader state) is not resumed as if it were one.
    m = model()
    m.fit({f"x{i}": np.zeros(4, "float32") for i in range(3)}, np.zeros(4), verbose=0,
          callbacks=[resume.epoch_checkpoint(str(tmp_path / "plain"), is_chief=True)])
    with pytest.raises(OptionError, match=r"has no reader state \(saved by another kind of run\)"):
        tfspark.keras.resumable_fit(model(), reader(data), 2, str(tmp_path / "plain"))
    # A checkpoint of a run whose reader gave other batches: named, and what to do said in
    # resumable_fit's terms (its user never gave read_batches a state=).
    kept = str(tmp_path / "kept")
    with pytest.raises(Stop):
        tfspark.keras.resumable_fit(model(), reader(data), 2, kept, every=EVERY, verbose=0,
                              callbacks=[stop_at(0, EVERY + 1)])
    for kw, differs in (({"shuffle_buffer": 50}, "shuffle_buffer=100 there, 50 here"),
                        ({"processes": 2}, "saved by a reader without processes=")):
        # (closed: a reader of processes keeps shared memory mapped until then)
        with reader(data, **kw) as other, pytest.raises(OptionError) as info:
            tfspark.keras.resumable_fit(model(), other, 2, kept, every=EVERY, verbose=0)
        line = str(info.value)
        assert line.startswith(f"checkpoint '{kept}/") and f"({differs})" in line, line
        assert f"remove '{kept}' to start afresh" in line and "state=" not in line, line
