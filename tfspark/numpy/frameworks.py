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

from tfspark.errors import require


def torch_dataset(path_or_files: Any, batch_size: int, **kwargs: Any) -> Any:
    """A torch.utils.data.IterableDataset of read_batches(path_or_files, batch_size, **kwargs)
    batches as torch tensors (strings stay object arrays of bytes; a Ragged becomes a Ragged
    of tensors). When torch.distributed is initialized, each rank reads its shard
    (shard=(world size, rank), evened across ranks by even_shards); the DataLoader workers of
    a rank split the rank's shard among them, so together they yield each of its rows exactly
    once per epoch. Give shard= yourself to override the ranks. Needs torch (tfspark[torch]).
    Workers may start by fork, spawn or forkserver; in a process that also runs Spark or
    TensorFlow, prefer DataLoader(..., multiprocessing_context="forkserver"): a fork copies
    their threads mid-way, and a lock one of them held stays held in the worker.

    Resumable: state_dict() / load_state_dict() say and set where its reader is (in each
    DataLoader worker, its part's), which torchdata's StatefulDataLoader saves and gives
    back, so a resumed loader yields exactly the batches that were still to come."""
    require("torch", "tfspark.torch_dataset", "torch")
    from tfspark.numpy.torch_batches import TorchBatches

    return TorchBatches(path_or_files, batch_size, kwargs)


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

