"""EpochCheckpoint: resume a multi-worker fit from its last finished epoch, epochs counted once,
on any Keras 3 backend (train_on_spark's TensorFlow and JAX workers use it).

Why not keras.callbacks.BackupAndRestore: in Keras 3 every worker writes the same two files in
place (weights, then the epoch), so on a shared path workers race, a crash between the two
leaves weights of one epoch labelled with another, and the history of the epochs before a
restart is lost. Here the chief alone writes each epoch into a new directory, renamed into
place when complete (`epoch-00003/`: weights, then state.json with the epoch and the history so
far); every worker restores from the newest complete one, after checking that all workers see
the same one (a checkpoint directory that is not shared fails at once, not as a hang).
How the workers compare epochs, and whether saving is collective, is the backend's: the worker
passes `differs` and `every_worker_saves` (JAX's multi-process weights are saved by every process
at once, so the others save to a scratch file).

The same directories serve resumable_fit (keras.fitting), whose checkpoints are also taken
mid-epoch (`epoch-00003-step-0000120/`) and hold each worker's reader state (`readers/`,
staged by every worker before the chief renames the checkpoint into place).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable
from typing import Any

from tfspark.errors import OptionError

_STATE = "state.json"
_WEIGHTS = "model.weights.h5"
_READERS = "readers"  # in a checkpoint: worker-<i>.json, each worker's read_batches state
_KEEP = 2  # complete checkpoints kept: the newest, and one before it
_NAME = re.compile(r"epoch-(\d+)(?:-step-(\d+))?")


def checkpoint_name(epochs_done: int, step: int = 0) -> str:
    """epoch-00003 after 3 epochs; epoch-00003-step-0000120 at step 120 of the fourth."""
    return f"epoch-{epochs_done:05d}" + (f"-step-{step:07d}" if step else "")


def _checkpoints(directory: str) -> list[tuple[tuple[int, int], str]]:
    """((epochs done, steps into the next), name) of the checkpoint directories in
    `directory`, oldest first; one being written (<name>.tmp-...) is not one."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(m, n) for n in names if (m := _NAME.fullmatch(n))]
    return sorted(((int(m[1]), int(m[2] or 0)), n) for m, n in found)


def latest(directory: str) -> tuple[int, int, str] | None:
    """(epochs done, steps into the next epoch, path) of the newest complete checkpoint in
    `directory`, or None."""
    done = [(at, n) for at, n in _checkpoints(directory)
            if os.path.exists(os.path.join(directory, n, _STATE))]
    if not done:
        return None
    (epoch, step), name = done[-1]
    return epoch, step, os.path.join(directory, name)


def latest_checkpoint(directory: str) -> tuple[int, str] | None:
    """(epochs done, path) of the newest complete checkpoint in `directory`, or None."""
    found = latest(directory)
    return None if found is None else (found[0], found[2])


def remove_checkpoints(directory: str) -> None:
    """Every checkpoint in `directory`, complete or half-written (the logs stay): a finished
    run's, so that the next run starts from scratch."""
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.startswith(("epoch-", f"{_READERS}-")):
                shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def place(epochs_done: int, step: int = 0) -> int:
    """A checkpoint's place as one int, for the workers' `differs` to compare."""
    return epochs_done * 10**9 + step


def same_on_every_worker(differs: Callable[[int], bool], epoch: int, directory: str,
                         step: int = 0) -> None:
    """Every worker must restore the same checkpoint, or their steps never line up; `differs`
    answers the same on every worker, so all stop together instead of some waiting for the
    others forever."""
    if differs(place(epoch, step)):
        seen = f"{epoch} epochs done" + (f" and {step} steps" if step else "")
        raise OptionError(f"checkpoint directory {directory!r} is not the same for every worker "
                          f"(this one sees {seen}, another worker sees another place): give a "
                          f"path every worker shares (a mounted or network filesystem)")


def restore(model: Any, checkpoint: str) -> dict[str, list[float]]:
    """Load a checkpoint's weights (and optimizer state) into model; its history."""
    if not model.built:
        raise OptionError("build the model (keras.Input) before fit to resume it")
    # On TensorFlow the optimizer's variables (Adam's moments) are made in the scope of the
    # model's strategy, wherever the caller is (fit enters it; this runs before fit).
    strategy = getattr(model, "distribute_strategy", None)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        model.load_weights(os.path.join(checkpoint, _WEIGHTS))
    with open(os.path.join(checkpoint, _STATE)) as f:
        state = json.load(f)
    return {k: list(v) for k, v in state["history"].items()}


def _save_weights(model: Any, path: str) -> None:
    with warnings.catch_warnings():
        # Keras's saving calls np.array on TF variables, which numpy 2 flags.
        warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)
        model.save_weights(path)


def save(model: Any, directory: str, epochs_done: int, history: dict[str, list[float]],
         step: int = 0, readers: bool = False) -> None:
    """The checkpoint after `epochs_done` epochs and `step` steps of the next: written to a
    new directory, renamed into place when whole; only the newest _KEEP are kept. readers:
    the workers' reader states were staged (stage_reader) and go in with it."""
    os.makedirs(directory, exist_ok=True)
    name = checkpoint_name(epochs_done, step)
    final = os.path.join(directory, name)
    tmp = _temporary(final)
    os.makedirs(tmp)
    _save_weights(model, os.path.join(tmp, _WEIGHTS))
    if readers:
        os.rename(os.path.join(directory, f"{_READERS}-{name}"), os.path.join(tmp, _READERS))
    with open(os.path.join(tmp, _STATE), "w") as f:  # last: its presence makes it complete
        json.dump({"epoch": epochs_done, "step": step, "history": history}, f)
    shutil.rmtree(final, ignore_errors=True)  # a rerun of an epoch saved before
    os.rename(tmp, final)
    kept = _checkpoints(directory)
    for _, old in kept[:-_KEEP]:
        shutil.rmtree(os.path.join(directory, old), ignore_errors=True)
    oldest = kept[-_KEEP:][0][0]
    for staged in os.listdir(directory):  # a reader state staged for a checkpoint never made,
        # and a checkpoint a crashed chief left half-written, older than every one kept
        m = _NAME.fullmatch(staged[len(_READERS) + 1:]) if staged.startswith(_READERS) else \
            _NAME.fullmatch(staged.split(".tmp-", 1)[0]) if ".tmp-" in staged else None
        if m and (int(m[1]), int(m[2] or 0)) < oldest:
            shutil.rmtree(os.path.join(directory, staged), ignore_errors=True)


def save_scratch(model: Any) -> None:
    """A worker's part in a collective save (JAX across processes), to a file removed at once."""
    with tempfile.TemporaryDirectory(prefix="tfspark-ckpt-") as scratch:
        _save_weights(model, os.path.join(scratch, _WEIGHTS))


def stage_reader(directory: str, epochs_done: int, step: int, worker: int,
                 state: dict[str, Any]) -> None:
    """A worker's reader state for the checkpoint the chief is about to save (written whole:
    a temporary file renamed)."""
    staged = os.path.join(directory, f"{_READERS}-{checkpoint_name(epochs_done, step)}")
    os.makedirs(staged, exist_ok=True)
    path = os.path.join(staged, f"worker-{worker}.json")
    tmp = _temporary(path)
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)


def _temporary(path: str) -> str:
    """A name beside `path` that no other writer uses: the checkpoint directory is shared by
    the workers' hosts (and a retried stage's), where process ids repeat (containers)."""
    return f"{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def reader_states(checkpoint: str) -> list[dict[str, Any]]:
    """The reader states every worker saved with a checkpoint, in the order of their worker
    numbers (empty: the checkpoint has none, e.g. one saved by epoch_checkpoint)."""
    folder = os.path.join(checkpoint, _READERS)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    found = {int(m[1]): n for n in names if (m := re.fullmatch(r"worker-(\d+)\.json", n))}
    if sorted(found) != list(range(len(found))):
        raise OptionError(f"checkpoint {checkpoint!r} holds the reader states of workers "
                          f"{sorted(found)}, not of every worker of its run: remove it to "
                          f"resume from the one before")
    out = []
    for i in range(len(found)):
        with open(os.path.join(folder, found[i])) as f:
            out.append(json.load(f))
    return out


def epoch_checkpoint(directory: str, *, is_chief: bool,
                     differs: Callable[[int], bool] | None = None,
                     every_worker_saves: bool = False, log: Any = None) -> Any:
    """A Keras callback that saves each finished epoch (chief only) and resumes from the newest.

    differs: with several workers, a function of this worker's epochs done, called by all at
      once, that is True on every worker when any of them sees another number; None: one
      worker.
    every_worker_saves: save_weights is a collective (JAX across processes): the workers that
      are not the chief save too, to a scratch file removed at once.

    After fit, `callback.history` is {metric: [one value per epoch]} over every epoch trained,
    before and after restarts; `callback.resumed_from` is the epochs restored (0: a fresh start).
    log: a function of one line, told when a checkpoint is restored.
    """
    import keras

    class EpochCheckpoint(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.directory = directory
            self.history: dict[str, list[float]] = {}
            self.resumed_from = 0

        def on_train_begin(self, logs: Any = None) -> None:
            found = latest_checkpoint(directory)
            epoch = found[0] if found else 0
            if differs is not None:
                same_on_every_worker(differs, epoch, directory)
            self.history, self.resumed_from = {}, 0
            if found is None:
                return
            self.history = restore(self.model, found[1])
            self.resumed_from = epoch
            if log is not None:
                log(f"resumed from the checkpoint of epoch {epoch} ({found[1]})")
            # What Keras's own BackupAndRestore sets: fit starts at this epoch.
            self.model._initial_epoch = epoch

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            for k, v in (logs or {}).items():
                self.history.setdefault(k, []).append(float(v))
            if is_chief:
                save(self.model, directory, epoch + 1, self.history)
            elif every_worker_saves:
                save_scratch(self.model)

    return EpochCheckpoint()
