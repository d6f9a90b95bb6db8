"""read_batches in the frameworks' own shapes. Each framework is imported only when its adapter
is used, so the NumPy reader keeps needing none of them.

  Keras 3 (any backend)   model.fit(iter(reader), steps_per_epoch=reader.steps_per_epoch(),
                          epochs=E) with reader = read_batches(..., epochs=None): a generator
                          of NumPy batches, which every backend takes as it is.
  PyTorch                 torch_dataset(path, batch_size, ...): an IterableDataset of batches
                          (use DataLoader(ds, batch_size=None, num_workers=k)); each DataLoader
                          worker of each rank reads its own shard.
  JAX                     jax.device_put(batch) on each batch (dicts of arrays are pytrees).
  Grain                   grain_dataset(path, batch_size, ...): a grain.IterDataset of batches
                          whose iterators checkpoint (get_state/set_state), for Grain
                          pipelines, orbax checkpoints and Keras 3's fit.
Each adapter resumes exactly where its reader's state says (state.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfspark.errors import require
from tfspark.numpy.columns import Ragged


def torch_dataset(path_or_files: Any, batch_size: int, **kwargs: Any) -> Any:
    """A torch.utils.data.IterableDataset of read_batches(path_or_files, batch_size, **kwargs)
    batches as torch tensors (strings stay object arrays of bytes; a Ragged becomes a Ragged
    of tensors). When torch.distributed is initialized, each rank reads its shard
    (shard=(world size, rank), evened across ranks by even_shards); the DataLoader workers of
    a rank split the rank's shard among them, so together they yield each of its rows exactly
    once per epoch. Give shard= yourself to override the ranks. Needs torch (tfspark[torch]).

    Resumable: state_dict() / load_state_dict() say and set where its reader is (in each
    DataLoader worker, its part's), which torchdata's StatefulDataLoader saves and gives
    back, so a resumed loader yields exactly the batches that were still to come."""
    require("torch", "tfspark.torch_dataset", "torch")
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    from tfspark.numpy.batches import read_batches

    class _Batches(IterableDataset):
        def __init__(self) -> None:
            self._reader: Any = None  # made in the process that iterates (a worker's own)
            self._state: dict[str, Any] | None = None  # given back, for the next iteration

        def reader(self) -> Any:
            info = get_worker_info()
            where = (info.id, info.num_workers) if info is not None else None
            if self._reader is None or self._reader[0] != where:  # (a copy in a worker)
                args = dict(kwargs)
                if "shard" not in args and torch.distributed.is_available() and \
                        torch.distributed.is_initialized() and \
                        torch.distributed.get_world_size() > 1:
                    args["shard"] = (torch.distributed.get_world_size(),
                                     torch.distributed.get_rank())
                reader = read_batches(path_or_files, batch_size, **args)
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
                yield _to_torch(torch, batch)

        def state_dict(self) -> dict[str, Any]:
            return dict(self._state) if self._state is not None else \
                self.reader().state_dict()

        def load_state_dict(self, state: dict[str, Any]) -> None:
            self._state = state

    return _Batches()


def grain_dataset(path_or_files: Any, batch_size: int, **kwargs: Any) -> Any:
    """A grain.IterDataset of read_batches(path_or_files, batch_size, **kwargs) batches
    (NumPy, as read_batches gives them): Grain's transformations (.map, .filter, prefetch
    with threads) apply to it, and its iterators' get_state()/set_state() are the reader's
    state_dict()/load_state_dict(), so Grain's (and orbax's) checkpoints resume it exactly.
    When JAX runs several processes (jax.process_count() > 1), each reads its shard
    (shard=(process count, process index)); give shard= yourself to override. Keras 3's
    fit takes it on every backend. Needs grain (tfspark[grain])."""
    require("grain", "tfspark.grain_dataset", "grain")
    import grain

    from tfspark.numpy.batches import read_batches

    class _Iterator(grain.DatasetIterator):
        def __init__(self, reader: Any) -> None:
            super().__init__()
            self._reader, self._it = reader, None

        def __next__(self) -> Any:
            if self._it is None:
                self._it = iter(self._reader)
            return next(self._it)  # type: ignore[call-overload]

        def get_state(self) -> dict[str, Any]:
            return self._reader.state_dict()

        def set_state(self, state: dict[str, Any]) -> None:
            if self._it is not None:
                self._it.close()  # stops its reading threads
                self._it = None
            self._reader.load_state_dict(state)

    class _Batches(grain.IterDataset):
        def __iter__(self) -> Any:
            args = dict(kwargs)
            if "shard" not in args:
                args["shard"] = _jax_processes()
            return _Iterator(read_batches(path_or_files, batch_size, **args))

    return _Batches()


def _jax_processes() -> tuple[int, int] | None:
    """(process count, index) when JAX is imported and runs several processes, else None."""
    import sys

    jax = sys.modules.get("jax")
    if jax is None or jax.process_count() <= 1:
        return None
    return jax.process_count(), jax.process_index()


def _to_torch(torch: Any, value: Any) -> Any:
    if isinstance(value, tuple) and not isinstance(value, Ragged):
        return tuple(_to_torch(torch, v) for v in value)
    if isinstance(value, dict):
        return {k: _to_torch(torch, v) for k, v in value.items()}
    if isinstance(value, Ragged):
        return Ragged(_to_torch(torch, value.values), torch.from_numpy(value.row_splits))
    if isinstance(value, np.ndarray) and value.dtype != object:
        return torch.from_numpy(np.ascontiguousarray(value))
    return value
