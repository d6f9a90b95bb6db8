"""tfspark.keras.resume: the per-epoch checkpoints train_on_spark's workers resume from, in one
process (no Spark): complete checkpoints only, weights and optimizer state restored, the epochs
before a restart kept in the history once, old checkpoints pruned."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tfspark.keras.resume import epoch_checkpoint, latest_checkpoint

pytestmark = [pytest.mark.tf]


def model_and_data():
    import keras

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 3)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    model.compile(keras.optimizers.Adam(0.01), "binary_crossentropy")
    return model, x, y


def test_a_restart_resumes_after_the_last_complete_epoch(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    model, x, y = model_and_data()
    first = epoch_checkpoint(ckpt, is_chief=True)
    model.fit(x, y, epochs=3, batch_size=64, verbose=0, shuffle=False, callbacks=[first])
    assert first.resumed_from == 0 and len(first.history["loss"]) == 3
    assert sorted(os.listdir(ckpt)) == ["epoch-00002", "epoch-00003"]  # two kept
    state = json.loads((tmp_path / "ckpt" / "epoch-00003" / "state.json").read_text())
    assert state["epoch"] == 3 and state["history"]["loss"] == first.history["loss"]
    # A crash while the chief wrote epoch 4 leaves a .tmp directory: it is not a checkpoint.
    (tmp_path / "ckpt" / "epoch-00004.tmp-123").mkdir()
    assert latest_checkpoint(ckpt)[0] == 3

    restarted, _, _ = model_and_data()  # new weights, as a new process would have
    logged = []
    second = epoch_checkpoint(ckpt, is_chief=True, log=logged.append)
    restarted.fit(x, y, epochs=5, batch_size=64, verbose=0, shuffle=False, callbacks=[second])
    assert second.resumed_from == 3 and logged and "epoch 3" in logged[0]
    assert len(second.history["loss"]) == 5  # 3 before the restart, 2 after: each once
    assert second.history["loss"][:3] == first.history["loss"]
    # The restored model goes on from the trained one (weights and optimizer state): its
    # first epoch after the restart is close to where the first run stopped, not a fresh
    # start.
    fresh, _, _ = model_and_data()
    fresh_loss = fresh.evaluate(x, y, verbose=0)
    assert second.history["loss"][3] < first.history["loss"][0]
    assert abs(second.history["loss"][3] - first.history["loss"][2]) < \
        abs(fresh_loss - first.history["loss"][2])


def test_a_worker_that_is_not_the_chief_writes_nothing(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    model, x, y = model_and_data()
    cb = epoch_checkpoint(ckpt, is_chief=False)
    model.fit(x, y, epochs=2, batch_size=64, verbose=0, callbacks=[cb])
    assert latest_checkpoint(ckpt) is None and len(cb.history["loss"]) == 2
