"""read_batches in the frameworks' own shapes. Each framework is imported only when its adapter
is used, so the NumPy reader keeps needing none of them.

  Keras 3 (any backend)   model.fit(iter(reader), steps_per_epoch=reader.steps_per_epoch(),
                          epochs=E) with reader = read_batches(..., epochs=None): a generator
                          of NumPy batches, which every backend takes as it is.
  PyTorch                 torch_dataset(path, batch_size, ...): an IterableDataset of batches
                          (use DataLoader(ds, batch_size=None, num_workers=k)); each DataLoader
                          worker of each rank reads its own shard.
  JAX                     jax.device_put(batch) on each batch (dicts of arrays are pytrees).
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
    once per epoch. Give shard= yourself to override the ranks. Needs torch (tfspark[torch])."""
    require("torch", "tfspark.torch_dataset", "torch")
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    from tfspark.numpy.batches import read_batches

    class _Batches(IterableDataset):
        def __iter__(self) -> Any:
            args = dict(kwargs)
            if "shard" not in args and torch.distributed.is_available() and \
                    torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
                args["shard"] = (torch.distributed.get_world_size(),
                                 torch.distributed.get_rank())
            reader = read_batches(path_or_files, batch_size, **args)
            info = get_worker_info()
            if info is not None and info.num_workers > 1:
                reader = reader.for_worker(info.num_workers, info.id)
            for batch in reader:
                yield _to_torch(torch, batch)

    return _Batches()


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
