"""grain_dataset's IterDataset and iterator, in a module of its own because it imports grain
(numpy.frameworks imports it only when grain_dataset is called) and because Grain's multiprocess
prefetch (`mp_prefetch`) pickles the dataset into its worker processes and gives each a slice:
classes defined inside a function cannot be pickled, and a source without `set_slice` cannot be
split ("Cannot slice IterDataset source").
"""

from __future__ import annotations

import sys
from typing import Any

import grain

from tfspark.errors import OptionError
from tfspark.numpy.read import read_batches


class GrainIterator(grain.DatasetIterator):
    """Batches of one reader; its state is the reader's (state_dict/load_state_dict)."""

    def __init__(self, reader: Any) -> None:
        super().__init__()
        self._reader, self._it = reader, None

    def __next__(self) -> Any:
        if self._it is None:
            self._it = iter(self._reader)
        return next(self._it)  # type: ignore[call-overload]

    def get_state(self) -> dict[str, Any]:
        """Where the reader is (JSON-serializable), as Grain's checkpoints save it."""
        return self._reader.state_dict()

    def set_state(self, state: dict[str, Any]) -> None:
        """Resume where `state` (from get_state) says."""
        if self._it is not None:
            self._it.close()  # stops its reading threads
            self._it = None
        self._reader.load_state_dict(state)


class GrainBatches(grain.IterDataset):
    """read_batches(path_or_files, batch_size, **kwargs) as a Grain source (see
    tfspark.grain_dataset); under mp_prefetch each worker process reads its slice."""

    def __init__(self, path_or_files: Any, batch_size: int, kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.path_or_files, self.batch_size, self.kwargs = path_or_files, batch_size, kwargs
        self._slice = (1, 0)  # (workers, this worker)

    @property
    def vocabularies(self) -> dict[str, list[bytes]] | None:
        """With strings="ids": {feature: its vocabulary}, id k + 1 standing for vocabulary[k]
        and 0 for any other value; None otherwise."""
        from tfspark.numpy.read import read_batches

        reader: Any = read_batches(self.path_or_files, self.batch_size, **{
            k: v for k, v in self.kwargs.items() if k not in ("state", "processes")})
        return reader.vocabularies

    def set_slice(self, sl: slice, sequential_slice: bool = False) -> None:
        """Read only this worker's part: `sl` is (worker index, None, workers), as Grain's
        mp_prefetch gives it; the parts hold every row once per epoch together (which rows
        each part gets is the reader's choice, sequential_slice or not)."""
        start, step = sl.start or 0, sl.step or 1
        if sl.stop is not None or not 0 <= start < step:
            raise OptionError(f"grain_dataset: cannot read the slice {sl} (only "
                              f"slice(worker, None, workers), as mp_prefetch gives)")
        workers, worker = self._slice
        self._slice = (workers * step, worker + start * workers)  # a slice of a slice

    def __iter__(self) -> GrainIterator:
        args = dict(self.kwargs)
        if "shard" not in args:
            args["shard"] = _jax_processes()
        reader = read_batches(self.path_or_files, self.batch_size, **args)
        workers, worker = self._slice
        if workers > 1:
            reader = reader.for_worker(workers, worker)
        return GrainIterator(reader)


def _jax_processes() -> tuple[int, int] | None:
    """(process count, index) when JAX is imported and runs several processes, else None."""
    jax = sys.modules.get("jax")
    if jax is None or jax.process_count() <= 1:
        return None
    return jax.process_count(), jax.process_index()
