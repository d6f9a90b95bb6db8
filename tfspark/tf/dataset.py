"""make_dataset(): tfspark output (or TFRecord files + a spec) -> tf.data.Dataset for Keras.

    manifest's files -> shuffled file order -> parallel interleave of TFRecordDataset, read in
    blocks of batch_size records -> cache -> window shuffle -> repeat -> rebatch(batch_size) ->
    parse_example per batch -> VarLen sparse -> ragged, labels split off -> prefetch

The block layout (rows_per_record > 1) parses earlier: windows of blocks are shuffled as blocks,
parsed (block_parsing_spec), their rows permuted, then rebatched to batch_size rows.

Parsing whole batches (one parse_example call per batch) and moving blocks of records instead
of single records are what make it fast: tf.data's cost per element dominates otherwise.
What to read is planned without TensorFlow (the read plan); Keras inputs are in
keras.inputs. TensorFlow is imported inside the functions, so importing this is cheap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from tfspark.errors import OptionError, scrubbed
from tfspark.quiet import quiet_import
from tfspark.spec.model import FeatureSpec
from tfspark.store import settings
from tfspark.store.cache import FileCache
from tfspark.store.concurrency import cores
from tfspark.store.fetch import IO_THREADS
from tfspark.store.memory import keep_freed_memory
from tfspark.store.options import AUTOTUNE, MAKE_DATASET, ReadOptions, fill_doc, reader_doc
from tfspark.store.read_plan import ReadPlan, plan_read
from tfspark.store.settings import Where
from tfspark.store.shards import Shard
from tfspark.store.shards import shard as shard_plan
from tfspark.store.uris import redact
from tfspark.tf.records import RecordSource, epoch_blocks, file_blocks

_PARSE_ROWS = 8192  # block layout: rows parsed per parse_example call, at least
_UNSHUFFLED_ROWS = 65536  # the same without a shuffle: 1.2x either reader (bench_own_reader.py)
# Local files are read by TensorFlow's reader from this many rows per record (blocks), where it
# is the faster; many small records (the row layout) go 1.2-1.3x faster through tfspark's
# (docs/benchmarks.md; bench_rows_reader.py and bench_own_reader.py set 1 to compare).
NATIVE_FROM_ROWS = 2
# Up to this many CPU cores tf.data's autotuner is off (measured on 2: docs/benchmarks.md)
_NO_AUTOTUNE_UP_TO_CORES = 2


@scrubbed
def make_dataset(path_or_files: str | os.PathLike | Sequence[str | os.PathLike],
                 batch_size: int, *, split: str | None = None,
                 label_cols: Iterable[str] | str | None = None,
                 spec: FeatureSpec | str | dict | None = None,
                 shuffle_buffer: int | None = None, seed: int | None = None,
                 epochs: int | None = 1, cache: bool | str = False, deterministic: bool = False,
                 drop_remainder: bool = False, num_parallel_reads: int = AUTOTUNE,
                 shuffle_files: bool = True, shard: tuple[int, int] | None = None,
                 even_shards: bool = True, compression: str | None = None,
                 filesystem: Any = None, io_threads: int | None = None,
                 cache_dir: str | os.PathLike | None = None,
                 columns: Iterable[str] | str | None = None,
                 file_reader: str = "auto") -> Any:
    """A tf.data.Dataset of (features, labels) batches read from a data set.

    Only the files a data set's manifest names are read. Files anywhere but the local disk are
    read by tfspark's own reader, not TensorFlow's file systems (stock TensorFlow has no s3://
    or abfs://); so are local files of the row layout. file_reader="tensorflow" has
    TensorFlow read every file (local, gs://): the pipeline is then graph ops alone, which
    tf.data service can run on its workers. On a machine of 2 cores or fewer tf.data's
    autotuner is off (with_options can turn it on).

    Args:
        path_or_files: a data set's directory or URI (or one split's, or one partition's), or
            TFRecord files (a list, or one path) with `spec`.
        batch_size: rows per batch.
{options}

    Returns:
        A tf.data.Dataset of (features, labels): features is {name: tensor}; labels a tensor
        for one label column, a {name: tensor} dict for several; with no label columns the
        features dict alone. Fixed features are dense ([batch] or [batch, n]; nulls hold the
        spec's default); variable-length ones tf.RaggedTensor [batch, None] (2-D ragged ones
        and a SequenceExample's feature lists [batch, None, None]). With a manifest the
        cardinality is known (Keras sees the steps per epoch) and each file's record count is
        checked while reading.

    Raises:
        OptionError: bad arguments, or a directory with splits read without split=.
        SchemaError: an unusable spec or labels.
        ManifestError: a directory that holds no data set.
        FileNotFoundError: a missing file named one by one.
        tf.errors.InvalidArgumentError: while iterating, a corrupt, truncated or miscounted
            file (the message names the file and, for a bad record, its byte offset).

    Examples:
        >>> import pyarrow as pa, tfspark
        >>> table = pa.table({"x": [1.0, 2.0, 3.0], "label": [0, 1, 0]})
        >>> _ = tfspark.write_dataset(table, "ds", label_cols="label")
        >>> ds = tfspark.make_dataset("ds", 2, shuffle_buffer=0, deterministic=True)
        >>> [labels.numpy().tolist() for _, labels in ds]
        [[0, 1], [0]]
    """
    given = dict(locals())
    batch_size = settings.batch_size(Where("batch_size"), batch_size)
    opts = ReadOptions.checked(MAKE_DATASET, **{k: v for k, v in given.items()
                                                 if k not in ("path_or_files", "batch_size")})
    cache_dir, shard = opts.cache_dir, opts.shard
    keep_freed_memory()  # (fewer page faults: store.memory)
    plan = plan_read(path_or_files, split=split, spec=spec, label_cols=label_cols,
                     compression=compression, filesystem=filesystem, columns=columns)
    if file_reader == "tensorflow":
        _tensorflow_reads(plan, cache_dir, filesystem)
    FileCache.swept(cache_dir, plan.locations, plan.versions)  # (None: no cache)
    return build_pipeline(plan, batch_size, shuffle_buffer=shuffle_buffer, seed=seed,
                          epochs=epochs, cache=cache, deterministic=deterministic,
                          drop_remainder=drop_remainder, num_parallel_reads=num_parallel_reads,
                          shuffle_files=shuffle_files, shard=shard, even_shards=even_shards,
                          io=(io_threads or IO_THREADS,
                              None if cache_dir is None else os.fspath(cache_dir)),
                          file_reader=file_reader)


def _tensorflow_reads(plan: ReadPlan, cache_dir: Any, filesystem: Any) -> None:
    """file_reader="tensorflow": every file where TensorFlow's own file systems reach it."""
    if cache_dir is not None:
        raise OptionError("file_reader='tensorflow' reads with TensorFlow's file systems, "
                          "cache_dir is tfspark's reader's: leave one of them out")
    for loc in plan.locations:
        if loc.is_local:
            continue
        scheme = loc.uri.split("://", 1)[0] if "://" in loc.uri else ""
        if scheme != "gs" or filesystem is not None or "?" in loc.uri:
            raise OptionError(
                f"file_reader='tensorflow': TensorFlow reads local files and gs:// with its "
                f"own credentials, not {redact(loc.uri)}"
                f"{' with filesystem=' if filesystem is not None else ''}; leave file_reader "
                f"out (tfspark's reader reads every store)")


def build_pipeline(plan: ReadPlan, batch_size: int, *, shuffle_buffer: int | None = None,
                   seed: int | None = None, epochs: int | None = 1, cache: bool | str = False,
                   deterministic: bool = False, drop_remainder: bool = False,
                   num_parallel_reads: int = AUTOTUNE, shuffle_files: bool = True,
                   shard: tuple[int, int] | None = None, even_shards: bool = True,
                   io: tuple[int, str | None] = (IO_THREADS, None),
                   file_reader: str = "auto") -> Any:
    """The tf.data pipeline for a ReadPlan (see make_dataset for the arguments; io:
    io_threads and cache_dir)."""
    quiet_import("tensorflow")
    import tensorflow as tf

    from tfspark.tf.parsing import labeler, make_block_parser, make_parser, required_check

    part = shard_plan(plan, shard, even_shards)
    block = plan.rows_per_record
    # Blocks: parse_example on several blocks per call is ~2x cheaper per row than on one
    # (measured at N=1024), so a read carries at least _PARSE_ROWS rows; without a shuffle
    # (which windows reads, so larger reads would mix fewer files) _UNSHUFFLED_ROWS.
    buffer = 10 * batch_size if shuffle_buffer is None else shuffle_buffer
    least = _PARSE_ROWS if buffer > 0 else _UNSHUFFLED_ROWS
    per_read = batch_size if block == 1 else -(-max(batch_size, least) // block)
    # A spec given by the caller may require features the files lack: each file's records are
    # checked for them, so the error names the file and record (the manifest's spec fits).
    spec = plan.example_spec
    required = [f for f in spec.features if f.required] if plan.spec_given else []
    ds = _records(part, per_read, shuffle_files=shuffle_files, seed=seed,
                  num_parallel_reads=num_parallel_reads, deterministic=deterministic,
                  check=required_check(spec, required, per_read), block=block, io=io,
                  tensorflow_reads=file_reader == "tensorflow")
    if cache is True:
        ds = ds.cache()
    elif isinstance(cache, str):
        ds = ds.cache(cache)
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    if block > 1:
        # Blocks -> rows, whole batches of blocks per parse: a window of `buffer` rows' blocks
        # is shuffled as blocks, parsed, and its rows permuted (new permutations every pass).
        parse = make_block_parser(spec)
        if buffer > 0:
            ds = tf.data.Dataset.zip(ds.rebatch(-(-buffer // block)), seeds).map(
                lambda blocks, s: _permute_rows(parse(
                    tf.random.experimental.stateless_shuffle(blocks, s)), s + 1),
                num_parallel_calls=AUTOTUNE, deterministic=deterministic)
        else:
            ds = ds.map(parse, num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    elif buffer > 0:
        # Window shuffle: `buffer` records permuted as one tensor; new permutations every pass.
        ds = tf.data.Dataset.zip(ds.rebatch(buffer), seeds).map(
            tf.random.experimental.stateless_shuffle, num_parallel_calls=AUTOTUNE,
            deterministic=deterministic)
    if part.keep is not None:  # even shards: each epoch its rows exactly, batches end with it
        if block > 1:
            ds = _with_cut_blocks(ds, part, spec, block)
        ds = ds.rebatch(batch_size, drop_remainder=drop_remainder)
    ds = ds.repeat() if epochs is None else ds.repeat(epochs) if epochs > 1 else ds
    if part.keep is None:
        ds = ds.rebatch(batch_size, drop_remainder=drop_remainder)
    known = part.total
    if known is not None and epochs is not None and (shard is not None or _num_workers() == 1):
        # Keras learns the steps per epoch (progress bars with a total, no "ran out of data"
        # warning). Not with several workers auto-sharding: that changes the count after this.
        every = _steps(known, batch_size, drop_remainder) if part.keep is not None else None
        total = every * epochs if every is not None else _steps(known * epochs, batch_size,
                                                                drop_remainder)
        ds = ds.apply(tf.data.experimental.assert_cardinality(total))
    ds = ds.map(make_parser(spec, plan.labels) if block == 1 else labeler(plan.labels),
                num_parallel_calls=AUTOTUNE, deterministic=deterministic)
    ds = ds.prefetch(AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = deterministic
    if cores() <= _NO_AUTOTUNE_UP_TO_CORES:
        # On 2 cores tf.data's autotuner ran some epochs at a third of the rate; without it,
        # AUTOTUNE means one call per core (docs/benchmarks.md). A caller's with_options wins.
        options.autotune.enabled = False
    options.experimental_distribute.auto_shard_policy = _auto_shard_policy(
        len(part.files), explicit=shard is not None)
    return ds.with_options(options)


def _steps(records: int | None, batch_size: int, drop_remainder: bool) -> int | None:
    if records is None:
        return None
    return records // batch_size if drop_remainder else -(-records // batch_size)


def _records(part: Shard, batch_size: int, *, shuffle_files: bool, seed: int | None,
             num_parallel_reads: int, deterministic: bool, check: Any = None,
             block: int = 1, io: tuple[int, str | None] = (IO_THREADS, None),
             tensorflow_reads: bool = False) -> Any:
    """Blocks of up to batch_size serialized records, files read in parallel, each file's
    records checked: a corrupt, truncated or miscounted file fails naming itself; `check`
    (name, block index, block) -> block, when given, looks at every block of a file.

    Local files of the block layout (every file with tensorflow_reads) are read by
    TensorFlow's TFRecordDataset; every other file, and any with a cache directory (io:
    io_threads, cache_dir), by tfspark's own reader (tf.records)."""
    quiet_import("tensorflow")
    import tensorflow as tf

    counts = list(part.records if part.records is not None else (-1,) * len(part.files))
    if part.keep is not None:  # even shards: the records whose rows are all kept
        counts = [_whole_records(part, f, block) for f in range(len(part.files))]
    comps = ["GZIP" if c == "gzip" else "" for c in part.compressions]
    strides = [part.stride(f) for f in range(len(part.files))]
    native = tensorflow_reads or (io[1] is None and block >= NATIVE_FROM_ROWS and
                                  all(loc.is_local for loc in part.files))
    source = None if native else RecordSource(part, counts, batch_size, *io)
    names = [loc.base if loc.is_local else loc.uri for loc in part.files]

    def read_file(f: Any, name: Any, comp: Any, count: Any, stride: Any) -> Any:
        records = tf.data.TFRecordDataset(name, compression_type=comp)
        if part.every:
            records = records.skip(stride[1]).shard(stride[0], 0)
        if part.keep is not None:
            records = records.take(count)
        # TensorFlow's own read errors name no file: they end the file's blocks here (per
        # block, not per record: cheaper), and the count check at its end says which file
        # failed, and where.
        blocks = records.batch(batch_size).ignore_errors()
        if check is not None:
            blocks = blocks.enumerate().map(lambda i, block: check(name, i, block, stride))
        return _checked(blocks, name, comp, count, stride)

    names_t = tf.constant(names, dtype=tf.string)
    strides_t = tf.constant(strides, dtype=tf.int64, shape=[len(strides), 2])
    ds = tf.data.Dataset.from_tensor_slices((tf.range(len(names), dtype=tf.int64), names_t,
                                             tf.constant(comps, dtype=tf.string),
                                             tf.constant(counts, dtype=tf.int64), strides_t))
    if shuffle_files and len(part.files) > 1:
        ds = ds.shuffle(len(part.files), seed=seed, reshuffle_each_iteration=True)
    if source is not None:  # the epoch's file order -> one generator fed by our threads
        slots = num_parallel_reads if num_parallel_reads > 0 else max(2, cores())
        # (no files: none; do_not_convert: AutoGraph would warn about the generator inside)
        ds = ds.map(lambda f, *_: f).batch(max(1, len(names))).flat_map(
            tf.autograph.experimental.do_not_convert(
                lambda order: epoch_blocks(source, order, slots, deterministic)))
        if check is None:
            return ds.map(lambda f, i, block: block)
        # in the generator's order, as the native path checks a file's blocks: a file's
        # first record without a required feature is the one its error names
        return ds.map(lambda f, i, block: check(tf.gather(names_t, f), i, block,
                                                tf.gather(strides_t, f)),
                      num_parallel_calls=AUTOTUNE, deterministic=True)
    # Blocks of records, not single records, travel on: ~2x faster (cost per element).
    return ds.interleave(read_file, cycle_length=num_parallel_reads, block_length=1,
                         num_parallel_calls=num_parallel_reads, deterministic=deterministic)


def _whole_records(part: Shard, f: int, block: int) -> int:
    """Even shards: how many of this shard's records of file f have all their rows kept."""
    assert part.keep is not None and part.records is not None
    rows = part.file_rows()
    if rows is not None and part.keep[f] == rows[f]:
        return part.records[f]
    return part.keep[f] // block


def _with_cut_blocks(ds: Any, part: Shard, spec: FeatureSpec, block: int) -> Any:
    """Even shards, block layout: the parsed rows, then the kept rows of each block the cut
    goes through (at most one per file: the first rows of the block after the whole ones)."""
    quiet_import("tensorflow")
    import tensorflow as tf

    from tfspark.tf.parsing import make_block_parser

    parse = make_block_parser(spec)
    rows = part.file_rows() or ()
    for f, (loc, comp) in enumerate(zip(part.files, part.compressions)):
        assert part.keep is not None
        whole, kept = divmod(part.keep[f], block)
        if not kept or part.keep[f] == rows[f]:
            continue
        n, start = part.stride(f)
        if loc.is_local:
            one = tf.data.TFRecordDataset(loc.base,
                                          compression_type="GZIP" if comp == "gzip" else "")
            one = one.skip(start + n * whole).take(1).batch(1).map(parse)
        else:  # the block after the whole ones, through tfspark's reader
            one = file_blocks(RecordSource(replace(part, keep=None), [-1] * len(part.files),
                                           1, IO_THREADS, None), tf.constant(f, tf.int64))
            one = one.skip(whole).take(1).map(parse)  # (the source applies the stride)
        ds = ds.concatenate(one.map(lambda r, k=kept: {key: v[:k] for key, v in r.items()}))
    return ds


def _checked(blocks: Any, name: Any, comp: Any, count: Any, stride: Any) -> Any:
    """blocks, then a check at the file's end: it held `count` records (-1: as many as our own
    reader finds in it), else an error naming the file and what is wrong with it. The check
    rides on an empty block after the file's last (it flows on: later stages skip it)."""
    quiet_import("tensorflow")
    import tensorflow as tf

    end = tf.data.Dataset.from_tensors(tf.zeros([0], tf.string))  # never a real block

    def check(seen: Any, block: Any) -> Any:
        fine = tf.logical_and(tf.greater_equal(count, 0), tf.equal(seen, count))
        problem = tf.cond(fine, lambda: tf.constant(""), lambda: tf.py_function(
            _diagnose, [name, comp, seen, count, stride], tf.string))
        with tf.control_dependencies([tf.debugging.Assert(tf.equal(problem, ""), [problem])]):
            return tf.identity(block)

    def step(seen: Any, block: Any) -> Any:
        size = tf.size(block, out_type=tf.int64)
        return seen + size, tf.cond(tf.equal(size, 0), lambda: check(seen, block),
                                    lambda: block)

    return blocks.concatenate(end).scan(tf.constant(0, tf.int64), step)


def _diagnose(name: Any, comp: Any, seen: Any, count: Any, stride: Any) -> str:
    """What is wrong with a file TensorFlow read `seen` records of ("" when nothing is)."""
    from tfspark.errors import CorruptRecordError
    from tfspark.store.fs import locate
    from tfspark.wire.stream import read_records

    path = name.numpy().decode()
    n, i = (int(v) for v in stride.numpy())
    loc = locate(path)
    total = 0
    try:
        with loc.open_stream() as f:
            for _ in read_records(f, "gzip" if comp.numpy() else None, path=path):
                total += 1
    except CorruptRecordError as e:
        return str(e)
    mine = len(range(i, total, n))
    if int(count) >= 0 and mine != int(count):
        listed = f"lists {int(count)}" if n == 1 else "lists another number"
        return (f"{path}: holds {total} records but the manifest {listed}; the file was "
                f"changed after the write: rewrite the data set")
    if mine != int(seen):
        return (f"{path}: TensorFlow read {int(seen)} of its {mine} records; it may have changed "
                f"while being read")
    return ""


def _permute_rows(rows: Any, seed: Any) -> Any:
    """The same random permutation of the rows of every feature."""
    quiet_import("tensorflow")
    import tensorflow as tf

    first = next(iter(rows.values()))
    n = first.nrows() if isinstance(first, tf.RaggedTensor) else tf.shape(first, tf.int64)[0]
    order = tf.random.experimental.stateless_shuffle(tf.range(n), seed)
    return {name: tf.gather(value, order) for name, value in rows.items()}


def _auto_shard_policy(n_files: int, explicit: bool) -> Any:
    quiet_import("tensorflow")
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


fill_doc(make_dataset, "{options}", reader_doc(MAKE_DATASET))
