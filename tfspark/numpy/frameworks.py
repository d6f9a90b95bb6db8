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
Each adapter resumes exactly where its reader's state says (numpy.state).
"""

from __future__ import annotations

from typing import Any

from tfspark.errors import require, scrubbed


@scrubbed
def torch_dataset(path_or_files: Any, batch_size: int, **kwargs: Any) -> Any:
    """A torch.utils.data.IterableDataset of read_batches' batches as torch tensors.

    Strings stay object arrays of bytes; a Ragged becomes a Ragged of tensors. When
    torch.distributed is initialized, each rank reads its shard (shard=(world size, rank),
    evened across ranks by even_shards); the DataLoader workers of a rank split the rank's
    shard among them, so together they yield each of its rows exactly once per epoch. Give
    shard= yourself to override the ranks. Workers may start by fork, spawn or forkserver; in
    a process that also runs Spark or TensorFlow, prefer
    DataLoader(..., multiprocessing_context="forkserver"): a fork copies their threads
    mid-way, and a lock one of them held stays held in the worker. Needs torch
    (tfspark[torch]).

    Args:
        path_or_files: a data set's directory or URI, or TFRecord files with `spec`.
        batch_size: rows per batch.
{options}

    Returns:
        An IterableDataset, resumable: state_dict() / load_state_dict() say and set where its
        reader is (in each DataLoader worker, its part's), which torchdata's
        StatefulDataLoader saves and gives back. `.loader(num_workers=...)` makes that loader
        (batch_size=None: the batches are the reader's) and refuses a state saved with another
        num_workers; `.vocabularies` are the string features' under strings="ids".

    Raises:
        OptionError: a wrong argument (a column, the split), here rather than in the workers.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"x": [1.0, 2.0, 3.0]}), "ds")
        >>> [f["x"].tolist() for f in tfspark.torch_dataset("ds", 2, shuffle_buffer=0)]
        [[1.0, 2.0], [3.0]]
    """
    require("torch", "tfspark.torch_dataset", "torch")
    from tfspark.numpy.torch_batches import TorchBatches

    _check(path_or_files, batch_size, kwargs)
    return TorchBatches(path_or_files, batch_size, kwargs)


@scrubbed
def grain_dataset(path_or_files: Any, batch_size: int, **kwargs: Any) -> Any:
    """A grain.IterDataset of read_batches' batches (NumPy, as read_batches gives them).

    Grain's transformations (.map, .filter, prefetch with threads) apply to it. When JAX runs
    several processes (jax.process_count() > 1), each reads its shard (shard=(process count,
    process index)); give shard= yourself to override. Keras 3's fit takes it on every
    backend. Under Grain's multiprocess prefetch
    (`.mp_prefetch(grain.MultiprocessingOptions(num_workers=k))`) each worker process reads
    its part, together every row once per epoch. Needs grain (tfspark[grain]).

    Args:
        path_or_files: a data set's directory or URI, or TFRecord files with `spec`.
        batch_size: rows per batch.
{options}

    Returns:
        An IterDataset whose iterators' get_state()/set_state() are the reader's
        state_dict()/load_state_dict(), so Grain's (and orbax's) checkpoints resume it
        exactly; `.vocabularies` are the string features' under strings="ids".

    Raises:
        OptionError: a wrong argument (a column, the split), here rather than in the workers.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> _ = tfspark.write_dataset(pa.table({"x": [1.0, 2.0, 3.0]}), "ds")
        >>> [f["x"].tolist() for f in tfspark.grain_dataset("ds", 2, shuffle_buffer=0)]
        [[1.0, 2.0], [3.0]]
    """
    require("grain", "tfspark.grain_dataset", "grain")
    from absl import flags

    from tfspark.numpy.grain_batches import GrainBatches

    if not flags.FLAGS.is_parsed():
        # Grain's worker processes read its absl flags, which only an absl app parses: in a
        # script or notebook mp_prefetch failed with "Trying to access flag ... before flags
        # were parsed". Their defaults are what such a program means.
        flags.FLAGS.mark_as_parsed()

    _check(path_or_files, batch_size, kwargs)
    return GrainBatches(path_or_files, batch_size, kwargs)


def _check(path_or_files: Any, batch_size: int, kwargs: dict[str, Any]) -> None:
    """Raise here what read_batches would raise in each loader worker (a column, split or
    option that is wrong), as one line instead of a worker's traceback: a reader is planned
    and dropped. Without its reading processes (not started for this) and without a state
    (it may be a shard's that the workers take: they check it)."""
    from tfspark.numpy.read import read_batches

    args = {k: v for k, v in kwargs.items() if k != "state"}
    if isinstance(args.get("processes"), int) and args["processes"] > 1:
        args["processes"] = None
    read_batches(path_or_files, batch_size, **args)


def _signed() -> None:
    """torch_dataset's and grain_dataset's signatures and option docs: read_batches' options
    (the readers' table), which they pass on."""
    import inspect

    from tfspark.store.options import READ_BATCHES, fill_doc, reader_doc, reader_signature

    first = [inspect.Parameter("path_or_files", inspect.Parameter.POSITIONAL_OR_KEYWORD),
             inspect.Parameter("batch_size", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for fn in (torch_dataset, grain_dataset):
        fn.__signature__ = reader_signature(READ_BATCHES, first)  # type: ignore[attr-defined]
        fill_doc(fn, "{options}", reader_doc(READ_BATCHES))


_signed()
