"""`tfspark train --backend jax`: the train job on Keras 3's JAX backend, without TensorFlow.

The same model from the same statistics (train_features), read by read_batches instead of
make_dataset: string features arrive as ids of the statistics' vocabularies (VocabularyIds in
place of StringLookup, which needs TensorFlow). What needs TensorFlow's lookups is left out with
its reason: integer features named in `categorical` (IntegerLookup), arrays of strings or ids
(their pooled lookups) and variable-length arrays (pooled as ragged tensors); fixed-length
number arrays stay. Each epoch is one pass of the reader (its own shuffle), as
make_dataset's are on the TensorFlow backend.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from typing import Any

import numpy as np

from tfspark.errors import OptionError, require


def use_backend(backend: str, trains_here: bool = True) -> None:
    """Make this process's Keras run on `backend`, before Keras is imported: one line when it
    was imported on another and this process trains (a driver of workers trains nothing)."""
    keras = sys.modules.get("keras")
    if keras is not None:
        have = keras.backend.backend()
        if have != backend and trains_here:
            raise OptionError(f"backend {backend!r}: Keras was already imported here on "
                              f"{have!r}; set KERAS_BACKEND={backend} before importing it")
        return
    if backend == "jax":
        require("jax", "tfspark train --backend jax", "jax")
    os.environ["KERAS_BACKEND"] = backend


def prune(plan: Any) -> None:
    """Move what needs TensorFlow (its lookups, ragged tensors) out of the plan, saying why."""
    why = "needs TensorFlow's {} (train on backend 'tensorflow' to use it)"
    for f, vocab, how in list(plan.categorical):
        if f.dtype != "string":
            plan.categorical.remove((f, vocab, how))
            plan.ignored[f.name] = "an integer category: " + why.format("IntegerLookup")
    for f, s in list(plan.arrays):
        if "top" in s:
            plan.arrays.remove((f, s))
            plan.ignored[f.name] = "an array of ids or strings: " + why.format("lookups")
        elif f.kind != "fixed":
            plan.arrays.remove((f, s))
            plan.ignored[f.name] = "a variable-length array: its pooling " + \
                why.format("ragged tensors")


def float_inputs(spec: Any, plan: Any) -> Any:
    """The spec with the integer features the model normalizes as float32: JAX (without its
    x64 mode) truncates int64 arrays to int32, which wraps timestamps in microseconds and
    other large integers; the TensorFlow model casts them to float32 too. Floats casts
    their batches to match."""
    numbers = {f.name for f, _ in plan.numeric} | {f.name for f, _ in plan.arrays}
    return dataclasses.replace(spec, features=tuple(
        dataclasses.replace(f, dtype="float32") if f.name in numbers and f.dtype == "int64"
        else f for f in spec.features))


def read(data: Any, cfg: Any, split: str | None, features: list[Any],
         shuffle: int | None, strings: str = "ids") -> Any:
    """read_batches of these features and the label, strings as ids of the train split's
    vocabularies (or as they are: strings="object", for TensorFlow workers' StringLookup):
    one pass per iteration (passes() repeats them for fit)."""
    from tfspark.numpy.batches import read_batches

    return read_batches(
        data.path, data.batch, split=split, columns=[f.name for f in features] +
        [data.label.name], label_cols=[data.label.name], strings=strings,
        vocabulary=data.train_split if strings == "ids" else None, epochs=1, seed=cfg.seed,
        filesystem=data.fs,
        shuffle_buffer=cfg.shuffle_buffer if shuffle is None else shuffle,
        shard=data.worker.shard if data.worker is not None else None)


def steps(reader: Any, given: int | None = None) -> int:
    """Batches per epoch: `given`, else one pass over the reader's rows."""
    n = given or reader.steps_per_epoch()
    if not n:
        raise OptionError("the number of batches per epoch is unknown (no manifest counts): "
                          "set steps_per_epoch")
    return int(n)


class Floats:
    """A reader whose `floats` features come cast to float32 (float_inputs); its place
    (state_dict, load_state_dict) is the reader's, so resumable_fit saves and resumes it."""

    def __init__(self, reader: Any, floats: frozenset[str]) -> None:
        self.reader, self.floats = reader, floats

    def __iter__(self) -> Any:
        for x, y in self.reader:
            yield {k: v.astype(np.float32, copy=False) if k in self.floats else v
                   for k, v in x.items()}, y

    def state_dict(self) -> dict[str, Any]:
        """The reader's state_dict()."""
        return self.reader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The reader's load_state_dict()."""
        self.reader.load_state_dict(state)

    def steps_per_epoch(self) -> int | None:
        """The reader's steps_per_epoch()."""
        return self.reader.steps_per_epoch()


def passes(reader: Any) -> Any:
    """The reader's passes one after another, for ever (fit takes an epoch's steps of them)."""
    while True:
        yield from reader


def fit_args(cfg: Any, model: Any, train: Any, validation: Any) -> dict[str, Any]:
    """model.fit's data arguments for these readers, cast to the model's float inputs:
    x (a Floats reader: resumable_fit takes it as it is; model.fit, as passes(x))."""
    floats = frozenset(k for k, v in model.input.items() if v.dtype == "float32")
    # What JAX still truncates to int32 are string ids and labels: small, so say nothing.
    warnings.filterwarnings("ignore", "Explicitly requested dtype int64", UserWarning)
    out = {"x": Floats(train, floats), "steps_per_epoch": steps(train, cfg.steps_per_epoch)}
    if validation is not None:
        out.update(validation_data=passes(Floats(validation, floats)),
                   validation_steps=steps(validation))
    return out
