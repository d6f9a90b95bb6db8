"""read_batches(): the NumPy reader's entry point: its arguments checked, the read planned
(store/read_plan.py, as make_dataset), and the BatchReader (batches.py) that yields the
batches, or the reading processes (processes.py) that feed it. Needs neither TensorFlow nor
pyspark."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from tfspark.errors import scrubbed
from tfspark.numpy import state as states
from tfspark.numpy.arguments import check_batch_args
from tfspark.numpy.batches import BatchReader
from tfspark.numpy.padding import pad_lengths
from tfspark.numpy.processes import ProcessBatches
from tfspark.numpy.stacking import plan_stacks
from tfspark.spec.model import FeatureSpec
from tfspark.store.fetch import IO_THREADS
from tfspark.store.memory import keep_freed_memory
from tfspark.store.read_args import check_io_args, check_read_args
from tfspark.store.read_plan import plan_read
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
                 state: dict[str, Any] | None = None,
                 vocabulary: str | dict[str, Any] | None = None,
                 shuffle: str = "window", ragged: str = "ragged",
                 pad_to: int | dict[str, int] | None = None,
                 stack: dict[str, Sequence[str]] | None = None,
                 processes: int | None = None) -> BatchReader | ProcessBatches:
    """Batches of NumPy arrays read from tfspark output (row or block layout), like make_dataset
    without TensorFlow: the same arguments mean the same (see make_dataset), and

    num_threads: files read and decoded at once (default: the CPU cores this process may use,
      at most 8); 1 with shuffle_buffer=0 and shuffle_files=False reads rows in file order,
      deterministically.
    strings: "object" (default): string features as object arrays of bytes, as tf.string;
      "bytes": each string as its uint8 bytes, a Ragged one level below the feature's shape
      (a scalar string column is Ragged(uint8 values, row_splits)); "ids": each string as an
      int64 id of its feature's vocabulary (k + 1 for the k-th value, 0 for one outside it, as
      keras.layers.StringLookup numbers them), so JAX and PyTorch get numbers. "bytes" and
      "ids" create no Python object per value, so they decode faster and scale with threads.
    shuffle: "window" (default): each epoch a new file order, files read num_threads at a
      time, windows of shuffle_buffer rows permuted; "global": each epoch a permutation of
      units of about 4,096 rows (whole records) over every file, then the same windows, so a
      batch draws rows from all over the data set (uncompressed files only: the units are
      found by one scan of the files' framing when the reader first runs).
    vocabulary: with strings="ids": {feature: values} (a StringLookup's get_vocabulary()
      without its OOV token, say), or a split whose statistics give the vocabularies; default:
      the statistics of all rows (the top values, most frequent first, nulls as the default).
      Every string feature read needs one (columns= leaves features out).
    ragged: "ragged" (default): a variable-length feature is a Ragged(values, row_splits)
      (row_splits[:-1] are the offsets torch.nn.EmbeddingBag takes); "padded": it is two arrays,
      `name` [batch, width] (the rest of a row 0, or b"") and `name_mask` [batch, width] (True
      where a value is), one shape for every batch (numpy/padding.py).
    pad_to: with ragged="padded", the width (an int for every feature, or {feature: width});
      default: the longest row in the data set's statistics. Longer rows are cut.
    filesystem: where the paths are (a pyarrow.fs.FileSystem, or an fsspec filesystem); default:
      from the path (local, or a URI's scheme and query options).
    io_threads: files streamed at once when they are on an object store (default 16),
      whatever num_threads is: each file is one request, read up to 4 x 8 MiB ahead of its
      decoding, and the next files are opened while one is decoded (store/fetch.py).
    cache_dir: a local directory where remote files, once read whole and checked, are kept
      (per write of the data set, so a rewritten data set is fetched anew); later epochs and
      runs read them from there.
    columns: the features to read (a name or a list; the labels come as well); default: every
      feature of the spec.
    stack: {name: [feature, ...]}: those fixed int64 or float32 features (of one dtype; strings
      with strings="ids") as one array `name` [batch, k], side by side in that order, in place
      of their own columns: a model's input matrix, made by the reader's threads.
    processes: N > 1 reads and decodes in N processes of their own (numpy/processes.py), each
      with num_threads threads (default: this process's cores / N, at most 8), the batches
      handed over in shared memory: for a training loop that one process's reader cannot keep
      fed. The processes start at once; batches come from them in turn, their arrays valid for
      as long as they are referenced. close() (or `with`) ends the processes.
    state: what reader.state_dict() gave (saved with a checkpoint, e.g. as JSON): the first
      iteration then resumes there, yielding exactly the batches an uninterrupted iteration
      would still have yielded. The data set and the arguments that shape the batches must be
      the same (else OptionError says which differ); num_threads and seed, when not given,
      are the state's.

    The order of the batches depends on the data, the arguments and the seed only: with a
    seed, every run yields the same batches (each pass over the reader a new shuffle).

    Yields (features, labels) as make_dataset does (features alone without label columns):
    features is {name: column}. A fixed feature is an array [batch] or [batch, n] (strings: an
    object array of bytes; null rows hold the spec's default); a variable-length one is a
    tfspark.numpy.Ragged(values, row_splits) (row i: values[row_splits[i]:row_splits[i+1]]),
    a 2-D ragged one a Ragged whose values are a Ragged. len() is the number of batches when
    the manifest gives the counts and epochs is not None.

    Raises as make_dataset does, before reading; while iterating, CorruptRecordError names the
    file and byte offset of a damaged record, or the file whose count disagrees.
    """
    given = dict(locals())  # the arguments, for the reading processes of processes=N
    check_read_args(batch_size, shuffle_buffer, epochs, 1, shard, False, seed)
    check_batch_args(num_threads=num_threads, strings=strings, shuffle=shuffle,
                     vocabulary=vocabulary, ragged=ragged, pad_to=pad_to, processes=processes)
    cache_dir = check_io_args(io_threads, cache_dir)
    keep_freed_memory()  # (fewer page faults: store/memory.py)
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
