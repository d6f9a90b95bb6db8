"""The train job's feeds from read_batches: Keras on JAX reads the data set this way (string
features as ids of the statistics' vocabularies), and so do TensorFlow workers under
train_on_spark (strings as they are, for StringLookup), whose ctx.fit resumes mid-epoch from
the reader's state. Each epoch is one pass of the reader (its own shuffle), as make_dataset's
are on the TensorFlow backend.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tfspark.errors import OptionError


def read(data: Any, cfg: Any, split: str | None, features: list[Any],
         shuffle: int | None, strings: str = "ids") -> Any:
    """read_batches of these features and the label, strings as ids of the train split's
    vocabularies (or as they are: strings="object", for TensorFlow workers' StringLookup):
    one pass per iteration (passes() repeats them for fit)."""
    from tfspark.numpy.read import read_batches

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

    def resumed_steps(self) -> int | None:
        """The reader's resumed_steps()."""
        return self.reader.resumed_steps()


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
