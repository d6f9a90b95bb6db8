"""make_dataset(): tfspark output (or TFRecord files + a spec) -> tf.data.Dataset for Keras.

    manifest's files -> shuffled file order -> parallel interleave of TFRecordDataset, read in
    blocks of batch_size records -> cache -> window shuffle -> repeat -> rebatch(batch_size) ->
    parse_example per batch -> VarLen sparse -> ragged, labels split off -> prefetch

Parsing whole batches (one parse_example call per batch) and moving blocks of records instead
of single records are what make it fast: tf.data's cost per element dominates otherwise.
TensorFlow is imported inside functions: `import tfspark.dataset` and `plan_read` work without it.
Keras inputs are in tfspark.kerasio.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tfspark import manifest as mf
from tfspark.errors import OptionError, SchemaError
from tfspark.framing import normalize_compression
from tfspark.fs import Location, locate
from tfspark.spec import FeatureSpec

AUTOTUNE = -1  # the value of tf.data.AUTOTUNE, without importing TensorFlow


@dataclass(frozen=True)
class ReadPlan:
    """What make_dataset will read: full file paths/URIs, the spec, compression, labels."""

    files: tuple[str, ...]
    spec: FeatureSpec
    compression: str | None  # None | "gzip"
    labels: tuple[str, ...]
    records: tuple[int, ...] | None = None  # per file, from the manifest; None: unknown


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
    _check_args(batch_size, shuffle_buffer, epochs, num_parallel_reads, shard, cache)
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
        tf, len(files), explicit=shard is not None)
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


def _auto_shard_policy(tf: Any, n_files: int, explicit: bool) -> Any:
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


# ---------------------------------------------------------------- planning (no TensorFlow)

def plan_read(path_or_files: Any, *, split: str | None = None,
              spec: FeatureSpec | str | dict | None = None,
              label_cols: Iterable[str] | str | None = None, compression: str | None = None,
              check_files: bool = True) -> ReadPlan:
    """Files, spec, compression and labels to read; errors come here, before any training.
    check_files: every file must exist (a missing one is named in the error)."""
    if isinstance(path_or_files, (str, os.PathLike)):
        path = os.fspath(path_or_files)
        loc = locate(path)
        if _is_file(loc):
            return plan_read([path], split=split, spec=spec, label_cols=label_cols,
                             compression=compression, check_files=check_files)
        return _plan_directory(path, loc, split, spec, label_cols, compression, check_files)
    if isinstance(path_or_files, (bytes, dict)) or not isinstance(path_or_files, Iterable):
        raise OptionError(f"make_dataset needs a directory or a list of TFRecord files, got "
                          f"{type(path_or_files).__name__}")
    files = [os.fspath(f) for f in path_or_files]
    if split is not None:
        raise OptionError("split= only applies to a tfspark directory, not to a list of files")
    if spec is None:
        raise OptionError(f"reading {len(files)} explicit file(s) needs spec=: a FeatureSpec, "
                          f"its JSON, or the path of a spec or _tfspark.json file")
    feature_spec, hint = _load_spec(spec)
    if compression is None:
        comp = hint if hint is not None else _compression_from_suffix(files)
    else:
        comp = normalize_compression(compression)
    if check_files:
        _check_exist(files, None)
    return ReadPlan(tuple(files), feature_spec, comp, _labels(feature_spec, label_cols))


def _plan_directory(path: str, loc: Location, split: str | None, spec: Any, label_cols: Any,
                    compression: str | None, check_files: bool) -> ReadPlan:
    root_uri, root, manifest = _resolve_split(path, loc, split)
    if manifest.get("record_type", "Example") != "Example" or manifest.get("spec") is None:
        raise SchemaError(f"{root_uri!r} holds raw records (record_type "
                          f"{manifest.get('record_type')!r}), not tf.train.Example: there is no "
                          f"spec to parse them with. Read them with tf.data.TFRecordDataset")
    comp = manifest.get("compression")
    if compression is not None and normalize_compression(compression) != comp:
        raise OptionError(f"compression={compression!r} disagrees with the manifest of "
                          f"{root_uri!r} ({comp or 'none'}); leave compression unset for "
                          f"directories")
    feature_spec = _load_spec(spec)[0] if spec is not None else \
        FeatureSpec.from_dict(manifest["spec"])
    rels = [_safe_rel(e["path"], root_uri) for e in manifest.get("files", [])]
    if root.is_local:
        files = [os.path.join(root.base, r) for r in rels]
    else:
        files = [f"{root_uri.rstrip('/')}/{r}" for r in rels]
    if check_files:
        _check_exist(files, root if not root.is_local else None, rels)
    counts = tuple(int(e["records"]) for e in manifest.get("files", []))
    return ReadPlan(tuple(files), feature_spec, comp, _labels(feature_spec, label_cols), counts)


def _resolve_split(path: str, loc: Location, split: str | None) -> tuple[str, Location, dict]:
    """(uri, location, manifest) of the directory to read."""
    if split is None:
        manifest = mf.read_manifest(loc)
        if manifest.get("splits"):
            raise OptionError(f"{path!r} holds the splits {manifest['splits']}; read one at a "
                              f"time with split='{manifest['splits'][0]}' (or another)")
        return path, loc, manifest
    if not isinstance(split, str) or not split or "/" in split or split in (".", ".."):
        raise OptionError(f"split must be a split name like 'train', got {split!r}")
    sub_uri = f"{path.rstrip('/')}/{split}"
    sub = locate(sub_uri)
    if sub.exists(mf.NAME):
        return sub_uri, sub, mf.read_manifest(sub)
    if loc.exists(mf.NAME):
        manifest = mf.read_manifest(loc)
        if manifest.get("split") == split:  # the path is that split's directory already
            return path, loc, manifest
        have = manifest.get("splits") or []
        raise mf.ManifestError(f"{path!r} has no split {split!r}; "
                               + (f"its splits are {have}" if have else
                                  "it was written without splits: leave split unset"))
    return sub_uri, sub, mf.read_manifest(sub)  # raises: no manifest here


def _safe_rel(rel: str, where: str) -> str:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or ".." in parts or "://" in rel:
        raise mf.ManifestError(f"the manifest of {where!r} names {rel!r}, which is not a "
                               f"relative path inside the directory; the manifest is damaged")
    return rel


def _is_file(loc: Location) -> bool:
    import pyarrow.fs as pafs

    try:
        return loc.fs.get_file_info(loc.base).type == pafs.FileType.File
    except OSError:
        return False


def _check_exist(files: list[str], remote_root: Location | None,
                 rels: list[str] | None = None) -> None:
    if remote_root is not None and rels is not None:  # one listing, not a request per file
        present = set(remote_root.list_files())
        missing = [f for f, r in zip(files, rels) if r not in present]
    else:
        missing = [f for f in files if not _exists(f)]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise FileNotFoundError(f"TFRecord file {missing[0]!r}{more} named for reading does not "
                                f"exist; the data set is incomplete (deleted or moved files?): "
                                f"rewrite it or fix the file list")


def _exists(path: str) -> bool:
    if "://" in path and not path.startswith("file://"):
        import tensorflow as tf  # TF reads the file, so ask TF's filesystem

        return bool(tf.io.gfile.exists(path))
    return os.path.isfile(path[len("file://"):] if path.startswith("file://") else path)


def _compression_from_suffix(files: list[str]) -> str | None:
    gz = {f.endswith(".gz") for f in files}
    if len(gz) > 1:
        raise OptionError("the files mix gzip ('.gz') and uncompressed names; read them in two "
                          "calls, or pass compression='gzip' or 'none'")
    return "gzip" if gz == {True} else None


def _load_spec(spec: Any) -> tuple[FeatureSpec, str | None]:
    """(FeatureSpec, compression from a manifest or None) from the forms `spec=` accepts."""
    if isinstance(spec, FeatureSpec):
        return spec, None
    if isinstance(spec, (str, os.PathLike)) and not str(spec).lstrip().startswith("{"):
        return _spec_from_path(os.fspath(spec))
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise SchemaError(f"spec is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise SchemaError(f"spec must be a FeatureSpec, JSON text, a dict or a path, got "
                          f"{type(spec).__name__}")
    if spec.get("format") == mf.FORMAT:
        if spec.get("spec") is None:
            raise SchemaError("the manifest given as spec has no spec (record_type "
                              f"{spec.get('record_type')!r}): its records are not Examples")
        return FeatureSpec.from_dict(spec["spec"]), spec.get("compression")
    return FeatureSpec.from_dict(spec), None


def _spec_from_path(path: str) -> tuple[FeatureSpec, str | None]:
    loc = locate(path)
    if not _is_file(loc):
        if loc.exists(mf.NAME):
            return _load_spec(mf.read_manifest(loc))
        raise SchemaError(f"spec path {path!r} is neither a JSON file nor a tfspark directory")
    with loc.fs.open_input_stream(loc.base, compression=None) as f:
        text = f.read()
    try:
        return _load_spec(json.loads(text))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"spec file {path!r} is not valid JSON: {e}") from None


def _labels(spec: FeatureSpec, label_cols: Iterable[str] | str | None) -> tuple[str, ...]:
    if label_cols is None:
        return tuple(spec.label_names)
    cols = [label_cols] if isinstance(label_cols, str) else list(label_cols)
    missing = [c for c in cols if c not in spec.names]
    if missing:
        raise SchemaError(f"label column(s) {missing} not in the spec; features are "
                          f"{spec.names}")
    return tuple(cols)


def _check_args(batch_size: Any, shuffle_buffer: Any, epochs: Any, num_parallel_reads: Any,
                shard: Any, cache: Any) -> None:
    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not is_int(batch_size) or batch_size < 1:
        raise OptionError(f"batch_size must be a positive int, got {batch_size!r}")
    if shuffle_buffer is not None and (not is_int(shuffle_buffer) or shuffle_buffer < 0):
        raise OptionError(f"shuffle_buffer must be an int >= 0 (0: no shuffling) or None, got "
                          f"{shuffle_buffer!r}")
    if epochs is not None and (not is_int(epochs) or epochs < 1):
        raise OptionError(f"epochs must be a positive int, or None to repeat forever, got "
                          f"{epochs!r}")
    if not is_int(num_parallel_reads) or (num_parallel_reads < 1 and
                                          num_parallel_reads != AUTOTUNE):
        raise OptionError(f"num_parallel_reads must be a positive int or AUTOTUNE (-1), got "
                          f"{num_parallel_reads!r}")
    if shard is not None:
        ok = (isinstance(shard, (tuple, list)) and len(shard) == 2 and all(map(is_int, shard))
              and shard[0] >= 1 and 0 <= shard[1] < shard[0])
        if not ok:
            raise OptionError(f"shard must be (num_workers, index) with 0 <= index < "
                              f"num_workers, got {shard!r}")
    if not isinstance(cache, (bool, str)):
        raise OptionError(f"cache must be True/False or a file path, got {cache!r}")
