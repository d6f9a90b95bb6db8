"""read_batches(): the NumPy reader's entry point: its arguments checked, the read planned
(store.read_plan, as make_dataset), and the BatchReader (numpy.batches) that yields the
batches, or the reading processes (numpy.processes) that feed it. Needs neither TensorFlow nor
pyspark."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from tfspark.errors import OptionError, scrubbed
from tfspark.numpy import state as states
from tfspark.numpy.batches import BatchReader
from tfspark.numpy.columns import pad_lengths, plan_stacks
from tfspark.numpy.processes import ProcessBatches
from tfspark.spec.model import FeatureSpec
from tfspark.store import settings
from tfspark.store.fetch import IO_THREADS
from tfspark.store.memory import keep_freed_memory
from tfspark.store.options import READ_BATCHES, ReadOptions, fill_doc, reader_doc
from tfspark.store.read_plan import plan_read
from tfspark.store.settings import Where
from tfspark.store.vocabulary import string_vocabularies

_OWN = ("path_or_files", "batch_size", "state", "processes")  # not a reading process's


@scrubbed
def read_batches(path_or_files: str | os.PathLike | Sequence[str | os.PathLike],
                 batch_size: int, *, split: str | None = None,
                 label_cols: Iterable[str] | str | None = None,
                 spec: FeatureSpec | str | dict | None = None,
                 shuffle_buffer: int | None = None, seed: int | None = None,
                 epochs: int | None = 1, shard: tuple[int, int] | None = None,
                 even_shards: bool = True, drop_remainder: bool = False,
                 num_threads: int | None = None, shuffle_files: bool = True,
                 compression: str | None = None, strings: str = "object",
                 filesystem: Any = None, io_threads: int | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 columns: Iterable[str] | str | None = None,
                 state: dict[str, Any] | list[dict[str, Any]] | None = None,
                 vocabulary: str | dict[str, Any] | None = None,
                 shuffle: str = "window", ragged: str = "ragged",
                 pad_to: int | dict[str, int] | None = None,
                 stack: dict[str, Sequence[str]] | None = None,
                 processes: int | None = None) -> BatchReader | ProcessBatches:
    """Batches of NumPy arrays read from a data set, like make_dataset without TensorFlow.

    Reads the row or the block layout, on the local disk or a store. The order of the batches
    depends on the data, the arguments and the seed only: with a seed, every run yields the
    same batches (each pass over the reader a new shuffle).

    Args:
        path_or_files: a data set's directory or URI (or one split's, or one partition's), or
            TFRecord files (a list, or one path) with `spec`.
        batch_size: rows per batch.
{options}

    Returns:
        A reader to iterate (a BatchReader; with processes=N, a ProcessBatches): each item is
        (features, labels) as make_dataset yields them (features alone without label
        columns). features is {name: column}: a fixed feature an array [batch] or [batch, n]
        (strings: an object array of bytes; null rows hold the spec's default), a
        variable-length one a tfspark.numpy.Ragged(values, row_splits) (row i:
        values[row_splits[i]:row_splits[i+1]]), a 2-D ragged one a Ragged of a Ragged.
        len(reader) is the number of batches when the manifest gives the counts and epochs is
        not None; reader.state_dict() is where it is, for state=.

    Raises:
        OptionError: a bad option (TypeError: an unknown one), before reading.
        SchemaError: an unusable spec.
        ManifestError: a directory that holds no data set.
        CorruptRecordError: while iterating, a damaged record (its file and byte offset) or a
            file whose record count disagrees with the manifest.
        AccessError: while iterating, a file the store refuses.

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> table = pa.table({"x": [1.0, 2.0, 3.0], "label": [0, 1, 0]})
        >>> tfspark.write_dataset(table, "ds", label_cols="label").rows
        3
        >>> for features, labels in tfspark.read_batches("ds", 2, shuffle_buffer=0):
        ...     print(features["x"], labels)
        [1. 2.] [0 1]
        [3.] [0]
    """
    given = dict(locals())  # the arguments, for the reading processes of processes=N
    batch_size = settings.batch_size(Where("batch_size"), batch_size)
    opts = ReadOptions.checked(READ_BATCHES, **{k: v for k, v in given.items()
                                                 if k not in ("path_or_files", "batch_size")})
    cache_dir, shard = opts.cache_dir, opts.shard
    keep_freed_memory()  # (fewer page faults: store.memory)
    plan = plan_read(path_or_files, split=split, spec=spec, label_cols=label_cols,
                     compression=compression, filesystem=filesystem, columns=columns)
    widths = pad_lengths(plan.example_spec, tuple(plan.labels), plan.manifest, strings,
                         pad_to) if ragged == "padded" else {}
    vocabularies = string_vocabularies(plan.example_spec, plan.manifest, vocabulary) \
        if strings == "ids" else None
    num_threads, seed = states.given_back(state, num_threads, seed, processes)
    reader = BatchReader(plan, batch_size, shuffle_buffer=shuffle_buffer, seed=seed,
                         epochs=epochs, shard=shard, even_shards=even_shards,
                         drop_remainder=drop_remainder, num_threads=num_threads,
                         shuffle_files=shuffle_files, strings=strings,
                         io_threads=io_threads or IO_THREADS,
                         cache_dir=None if cache_dir is None else os.fspath(cache_dir),
                         vocabularies=vocabularies, shuffle=shuffle)
    reader.pad_widths = widths
    reader.stacks = plan_stacks(stack, plan.example_spec, plan.labels, strings)
    if processes is not None and processes > 1:
        if isinstance(state, list):
            raise OptionError("state: a list (every worker's state, resumed on another number "
                              "of workers) is read in this process: leave processes out "
                              "until that epoch ends, then save a state and give it back "
                              "with processes=")
        kwargs = {k: v for k, v in given.items() if k not in _OWN} | {
            "num_threads": num_threads, "seed": seed}
        spread = ProcessBatches(reader, (path_or_files, batch_size, kwargs), processes)
        if state is not None:
            spread.load_state_dict(state)
        spread.start()
        return spread
    if state is not None:
        reader.load_state_dict(state)
    return reader


fill_doc(read_batches, "{options}", reader_doc(READ_BATCHES))
