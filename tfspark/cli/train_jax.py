"""`tfspark train --backend jax`: the train job on Keras 3's JAX backend, without TensorFlow.

The same model from the same statistics (train_features), read by read_batches instead of
make_dataset: string features arrive as ids of the statistics' vocabularies (VocabularyIds in
place of StringLookup, which needs TensorFlow). What needs TensorFlow's lookups is left out with
its reason: integer features named in `categorical` (IntegerLookup), arrays of strings or ids
(their pooled lookups) and variable-length arrays (pooled as ragged tensors); fixed-length
number arrays stay. Its feeds from read_batches are cli.train_feed's.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from typing import Any

from tfspark.errors import MissingExtraError, OptionError, install, require


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
    elif backend == "tensorflow" and trains_here and \
            importlib.util.find_spec("tensorflow") is None:
        raise MissingExtraError("tfspark train (--backend tensorflow, the default)",
                                "tensorflow", "tf", f"; or train with Keras on JAX, which needs "
                                f"no TensorFlow: --backend jax ({install('jax')})")
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
