"""torch_dataset's IterableDataset, in a module of its own because it imports torch
(numpy.frameworks imports it only when torch_dataset is called) and because a DataLoader whose
workers start by spawn or forkserver pickles the dataset: a class defined inside a function
cannot be pickled (macOS and Windows start workers by spawn; forkserver is the safe choice in a
process whose Spark, TensorFlow or reader threads a fork would copy mid-way).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from tfspark.errors import OptionError, StateMismatch
from tfspark.numpy.columns import Ragged
from tfspark.numpy.read import read_batches


class TorchBatches(IterableDataset):
    """read_batches(path_or_files, batch_size, **kwargs) as torch tensors, each DataLoader
    worker its part of the rank's shard (see tfspark.torch_dataset)."""

    def __init__(self, path_or_files: Any, batch_size: int, kwargs: dict[str, Any]) -> None:
        self.path_or_files, self.batch_size, self.kwargs = path_or_files, batch_size, kwargs
        self._reader: Any = None  # (where, reader), made in the process that iterates
        self._state: dict[str, Any] | None = None  # given back, for the next iteration
        self._workers = 0  # a loader of this many worker processes reads it (loader())

    def __getstate__(self) -> dict[str, Any]:
        # A worker gets the arguments and any state given back, never the parent's reader.
        return {**self.__dict__, "_reader": None, "_workers": 0}

    def reader(self) -> Any:
        """This process's reader (a DataLoader worker's: its part of the shard), made once."""
        info = get_worker_info()
        where = (info.id, info.num_workers) if info is not None else None
        if self._reader is None or self._reader[0] != where:  # (a copy in a worker)
            args = dict(self.kwargs)
            if "shard" not in args and torch.distributed.is_available() and \
                    torch.distributed.is_initialized() and \
                    torch.distributed.get_world_size() > 1:
                args["shard"] = (torch.distributed.get_world_size(),
                                 torch.distributed.get_rank())
            reader = read_batches(self.path_or_files, self.batch_size, **args)
            if info is not None and info.num_workers > 1:
                reader = reader.for_worker(info.num_workers, info.id)
            self._reader = (where, reader)
        return self._reader[1]

    def __iter__(self) -> Any:
        reader = self.reader()
        if self._state is not None:
            reader.load_state_dict(self._state)
            self._state = None
        for batch in reader:
            yield to_torch(batch)

    @property
    def vocabularies(self) -> dict[str, list[bytes]] | None:
        """With strings="ids": {feature: its vocabulary}, id k + 1 standing for vocabulary[k]
        and 0 for any other value (size an Embedding len(...) + 1); None otherwise."""
        return self.reader().vocabularies

    def state_dict(self) -> dict[str, Any]:
        """Where the reader is (JSON-serializable), for torchdata's StatefulDataLoader."""
        if self._workers and get_worker_info() is None:  # (its copies are read, not it)
            raise OptionError(
                f"state_dict: this dataset is read by its loader's {self._workers} worker "
                f"processes, so its own state is not where they are: save the loader's "
                f"(loader.state_dict(), given back by loader.load_state_dict())")
        return dict(self._state) if self._state is not None else self.reader().state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume the next iteration where `state` (from state_dict) says."""
        self._state = state

    def loader(self, num_workers: int = 0, **kwargs: Any) -> Any:
        """A DataLoader of these batches (batch_size=None: the reader makes the batches):
        torchdata's StatefulDataLoader when it is installed, whose state_dict() and
        load_state_dict() resume exactly; torch's DataLoader otherwise. kwargs go to it
        (multiprocessing_context="forkserver" in a process that runs Spark, TensorFlow or
        JAX: a fork copies their threads mid-way; pin_memory, ...). A state saved by a loader
        of another num_workers is refused, naming both counts (each worker's state is of its
        part)."""
        if kwargs.get("batch_size") is not None:
            raise OptionError(f"loader: batch_size={kwargs['batch_size']!r}, but the batches "
                              f"are made by the reader (torch_dataset's batch_size): leave "
                              f"batch_size out")
        kwargs["batch_size"] = None
        self._workers = num_workers
        try:
            from torchdata.stateful_dataloader import StatefulDataLoader
        except ImportError:
            return torch.utils.data.DataLoader(self, num_workers=num_workers, **kwargs)
        return _checked_loader(StatefulDataLoader)(self, num_workers=num_workers, **kwargs)


def _checked_loader(base: type) -> type:
    """StatefulDataLoader, refusing a state of another number of workers in tfspark's words
    (torchdata's own check is a bare AssertionError at the next iteration)."""

    class Loader(base):
        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            saved = _workers_of(state_dict)
            if saved is not None and saved != self.num_workers:
                raise StateMismatch(
                    f"num_workers={saved} there, {self.num_workers} here",
                    f"state: saved by a DataLoader with num_workers={saved}, and this one has "
                    f"{self.num_workers}: each worker's state is where its part of the data "
                    f"is, so resume with num_workers={saved} (or start without the state)")
            super().load_state_dict(state_dict)

    return Loader


def _workers_of(state: Any) -> int | None:
    """The num_workers of a StatefulDataLoader's state (its workers' snapshot holds it; a
    single-process state has none); None when it is no such state."""
    if not isinstance(state, dict):
        return None
    main = (state.get("_snapshot") or {}).get("_main_snapshot") \
        if isinstance(state.get("_snapshot"), dict) else None
    if isinstance(main, dict) and isinstance(main.get("_num_workers"), int):
        return int(main["_num_workers"])
    return 0 if "_num_yielded" in state else None


def to_torch(value: Any) -> Any:
    """A batch's arrays as tensors (no copy where NumPy's memory is contiguous); strings stay
    object arrays of bytes, a Ragged becomes a Ragged of tensors."""
    if isinstance(value, tuple) and not isinstance(value, Ragged):
        return tuple(to_torch(v) for v in value)
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, Ragged):
        splits: Any = torch.from_numpy(value.row_splits)  # (Ragged is typed for NumPy)
        return Ragged(to_torch(value.values), splits)
    if isinstance(value, np.ndarray) and value.dtype != object:
        return torch.from_numpy(np.ascontiguousarray(value))
    return value
