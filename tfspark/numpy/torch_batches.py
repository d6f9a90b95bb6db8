"""torch_dataset's IterableDataset, in a module of its own because it imports torch (frameworks.py
imports it only when torch_dataset is called) and because a DataLoader whose workers start by
spawn or forkserver pickles the dataset: a class defined inside a function cannot be pickled
(macOS and Windows start workers by spawn; forkserver is the safe choice in a process whose
Spark, TensorFlow or reader threads a fork would copy mid-way).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from tfspark.numpy.columns import Ragged
from tfspark.numpy.read import read_batches


class TorchBatches(IterableDataset):
    """read_batches(path_or_files, batch_size, **kwargs) as torch tensors, each DataLoader
    worker its part of the rank's shard (see tfspark.torch_dataset)."""

    def __init__(self, path_or_files: Any, batch_size: int, kwargs: dict[str, Any]) -> None:
        self.path_or_files, self.batch_size, self.kwargs = path_or_files, batch_size, kwargs
        self._reader: Any = None  # (where, reader), made in the process that iterates
        self._state: dict[str, Any] | None = None  # given back, for the next iteration

    def __getstate__(self) -> dict[str, Any]:
        # A worker gets the arguments and any state given back, never the parent's reader.
        return {**self.__dict__, "_reader": None}

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

    def state_dict(self) -> dict[str, Any]:
        """Where the reader is (JSON-serializable), for torchdata's StatefulDataLoader."""
        return dict(self._state) if self._state is not None else self.reader().state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume the next iteration where `state` (from state_dict) says."""
        self._state = state


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
