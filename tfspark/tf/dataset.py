"""make_dataset(): tfspark output (or TFRecord files + a spec) -> tf.data.Dataset for Keras.

    manifest's files -> shuffled file order -> parallel interleave of TFRecordDataset, read in
    blocks of batch_size records -> cache -> window shuffle -> repeat -> rebatch(batch_size) ->
    parse_example per batch -> VarLen sparse -> ragged, labels split off -> prefetch

Parsing whole batches (one parse_example call per batch) and moving blocks of records instead
of single records are what make it fast: tf.data's cost per element dominates otherwise.
What to read is planned without TensorFlow (tfspark/read_plan.py); Keras inputs are in
tfspark/tf/keras.py. TensorFlow is imported inside the functions, so importing this is cheap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any

from tfspark.read_plan import AUTOTUNE, ReadPlan, check_read_args, plan_read
from tfspark.spec.model import FeatureSpec


def make_dataset(path_or_files: str | os.PathLike | Sequence[str | os.PathLike],
                 batch_size: int, *, split: str | None = None,
                 label_cols: Iterable[str] | str | None = None,
                 spec: FeatureSpec | str | dict | None = None,
                 shuffle_buffer: int | None = None, seed: int | None = None,
                 epochs: int | None = 1, cache: bool | str = False, deterministic: bool = False,
                 drop_remainder: bool = False, num_parallel_reads: int = AUTOTUNE,
                 shuffle_files: bool = True, shard: tuple[int, int] | None = None,
                 compression: str | None = None) -> Any:
    """A tf.data.Dataset of (features, labels) batches read from tfspark output.

    path_or_files: a tfspark directory (only the files its `_tfspark.json` names are read), a
      split directory, or TFRecord files (a list, or one path) together with `spec`.
    split: read `<path>/<split>/`. A directory with splits is read one split at a time, so
      train and test records never mix by accident.
    label_cols: overrides the spec's labels; [] reads features only.
    spec: a FeatureSpec, its JSON text or dict, or the path of a spec or manifest JSON file (or a
      tfspark directory). Needed for explicit files; with a directory it overrides the manifest's
      spec (e.g. a spec with fewer features parses fewer).
    shuffle_buffer: records shuffled together; None = 10 * batch_size, 0 = no shuffling. File
      order is shuffled every pass, then each window of shuffle_buffer records is permuted
      (like tf.data's shuffle buffer of that size, at one op per window instead of per record).
    seed: seeds the file-order and record shuffles (same seed, same order when deterministic).
    epochs: passes over the data; None repeats forever (use steps_per_epoch in model.fit).
    cache: True caches the serialized records in memory after the first pass; a str, in a file.
    deterministic: keep a reproducible order; False (default) lets parallel reads and parses
      deliver whatever is ready first, which is faster.
    num_parallel_reads: files read at once (AUTOTUNE: one per CPU core).
    shard: (num_workers, index) for explicit multi-worker input: by files when there are at
      least num_workers files, else every num_workers-th record of each file. Either way the
      shards are disjoint and cover everything, whatever the read order.
    compression: for explicit files only: None guesses from the suffix (".gz" -> gzip),
      "gzip" or "none" forces it. Directories take it from the manifest.

    Yields (features, labels): features is {name: tensor}; labels is a tensor for one label
    column, a {name: tensor} dict for several; with no label columns, the features dict alone.
    Fixed features are dense ([batch] or [batch, n]; nulls hold the spec's default). VarLen
    features are tf.RaggedTensor [batch, None], not SparseTensor (Keras 3 takes ragged and dense
    inputs more readily); 2-D ragged features are RaggedTensor [batch, None, None]. With a
    manifest, the dataset's cardinality is known (Keras sees the steps per epoch) and each
    file's record count is checked while reading.

    Raises OptionError for bad arguments or a directory with splits read without split=,
    SchemaError for an unusable spec or labels, ManifestError when a directory has no
    _tfspark.json, FileNotFoundError for a missing explicit file; while iterating, corrupt
    records raise tf.errors.DataLossError.
    """
    check_read_args(batch_size, shuffle_buffer, epochs, num_parallel_reads, shard, cache)
    plan = plan_read(path_or_files, split=split, spec=spec, label_cols=label_cols,
                     compression=compression)
    return build_pipeline(plan, batch_size, shuffle_buffer=shuffle_buffer, seed=seed,
                          epochs=epochs, cache=cache, deterministic=deterministic,
                          drop_remainder=drop_remainder, num_parallel_reads=num_parallel_reads,
                          shuffle_files=shuffle_files, shard=shard)


def build_pipeline(plan: ReadPlan, batch_size: int, *, shuffle_buffer: int | None = None,
                   seed: int | None = None, epochs: int | None = 1, cache: bool | str = False,
                   deterministic: bool = False, drop_remainder: bool = False,
                   num_parallel_reads: int = AUTOTUNE, shuffle_files: bool = True,
                   shard: tuple[int, int] | None = None) -> Any:
    """The tf.data pipeline for a ReadPlan (see make_dataset for the arguments)."""
    import tensorflow as tf
    files = list(plan.files)
    counts = list(plan.records) if plan.records is not None else None
    record_shard = None
    if shard is not None:
        n, i = shard
        if len(files) >= n:
            files = files[i::n]
            counts = counts[i::n] if counts is not None else None
        else:
            # Sharding the interleaved stream would overlap between workers whenever the order
            # is not deterministic; every n-th record of each file is disjoint in any order.
            record_shard = (n, i)
            counts = [len(range(i, c, n)) for c in counts] if counts is not None else None
    comp = "GZIP" if plan.compression == "gzip" else ""
    if counts is None:
        counts = [-1] * len(files)

    def read_file(name: Any, count: Any) -> Any:
        records = tf.data.TFRecordDataset(name, compression_type=comp)
        if record_shard:
            records = records.shard(*record_shard)
        if known:
            # Each file must hold the records its manifest says: a truncated or swapped file
            # fails the epoch instead of silently training on the wrong data.
            records = records.apply(tf.data.experimental.assert_cardinality(count))
        # Blocks of records, not single records, travel on: ~2x faster (cost per element).
        return records.batch(batch_size)

    known = bool(files) and min(counts) >= 0
    ds = tf.data.Dataset.from_tensor_slices((tf.constant(files, dtype=tf.string),
                                             tf.constant(counts, dtype=tf.int64)))
    if shuffle_files and len(files) > 1:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(read_file, cycle_length=num_parallel_reads, block_length=1,
                       num_parallel_calls=num_parallel_reads, deterministic=deterministic)
    if cache is True:
        ds = ds.cache()
    elif isinstance(cache, str):
        ds = ds.cache(cache)
    buffer = 10 * batch_size if shuffle_buffer is None else shuffle_buffer
    if buffer > 0:
        # Window shuffle: `buffer` records permuted as one tensor; new permutations every pass.
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
        ds = tf.data.Dataset.zip(ds.rebatch(buffer), seeds).map(
            tf.random.experimental.stateless_shuffle, num_parallel_calls=AUTOTUNE,
            deterministic=deterministic)
    if epochs is None:
        ds = ds.repeat()
    elif epochs > 1:
        ds = ds.repeat(epochs)
    ds = ds.rebatch(batch_size, drop_remainder=drop_remainder)
    if known and epochs is not None and _num_workers() == 1:
        # Keras learns the steps per epoch (progress bars with a total, no "ran out of data"
        # warning). Not with several workers: auto-sharding changes the count after this.
        total = sum(counts) * epochs
        ds = ds.apply(tf.data.experimental.assert_cardinality(
            total // batch_size if drop_remainder else -(-total // batch_size)))
    ds = ds.map(make_parser(plan.spec, plan.labels), num_parallel_calls=AUTOTUNE,
                deterministic=deterministic)
    ds = ds.prefetch(AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = deterministic
    options.experimental_distribute.auto_shard_policy = _auto_shard_policy(
        len(files), explicit=shard is not None)
    return ds.with_options(options)


def make_parser(spec: FeatureSpec, labels: Sequence[str] = ()) -> Any:
    """A function: batch of serialized Examples -> features (and labels), as make_dataset yields."""
    import tensorflow as tf
    parsing = spec.parsing_spec()
    labels = tuple(labels)

    def parse(serialized: Any) -> Any:
        parsed = tf.io.parse_example(serialized, parsing)
        for name, value in parsed.items():
            if isinstance(value, tf.SparseTensor):
                parsed[name] = tf.RaggedTensor.from_sparse(value)
        if not labels:
            return parsed
        ys = {name: parsed.pop(name) for name in labels}
        return parsed, (ys[labels[0]] if len(labels) == 1 else ys)

    return parse


def _auto_shard_policy(n_files: int, explicit: bool) -> Any:
    import tensorflow as tf
    policy = tf.data.experimental.AutoShardPolicy
    if explicit:
        return policy.OFF  # already sharded by the caller's shard=(n, i)
    # FILE sharding gives each worker whole files; with fewer files than workers some would
    # get none, so fall back to DATA (each worker reads all and keeps its part).
    return policy.FILE if n_files >= _num_workers() else policy.DATA


def _num_workers() -> int:  # from TF_CONFIG, as MultiWorkerMirroredStrategy counts them
    try:
        cluster = json.loads(os.environ.get("TF_CONFIG", "") or "{}").get("cluster", {})
    except (ValueError, AttributeError):
        return 1
    return max(1, len(cluster.get("worker", [])) + len(cluster.get("chief", [])))


