"""make_converter(df): a DataFrame to a reader in one call, for notebooks (what Petastorm's
make_spark_converter and Mosaic's dataframe_to_mds + StreamingDataset are used for).

The DataFrame is written once, as write_tfrecords writes it (blocks of rows by default: the
fast layout), into a fresh directory of a managed temporary location; the Converter hands out
make_dataset, read_batches and torch_dataset readers of it, says how many rows it holds, and
deletes its directory on delete(), at the end of a `with` block, or when Python exits.

It sits above the engines (spark, tf, numpy): it only calls their public functions.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from tfspark import paths
from tfspark.errors import OptionError, scrubbed
from tfspark.progress import log as progress_log
from tfspark.store.fs import Location, locate
from tfspark.store.manifest import read_manifest
from tfspark.store.uris import redact

# Where converters write when make_converter gets no location (a Spark conf, as Petastorm's
# petastorm.spark.converter.parentCacheDirUrl): every executor must reach it.
LOCATION_CONF = "spark.tfspark.converter.location"
ROWS_PER_RECORD = 1024  # blocks: the layout every reader of tfspark reads fastest

_live: dict[str, Location] = {}  # directories this process made and has not deleted
_lock = threading.Lock()


class Converter:
    """A DataFrame written for training, in a directory of its own that it deletes.

    len(converter) is its number of rows (of every split); rows(split) one split's. path is
    the directory, a URI with the location's query options (any of tfspark's readers, and
    spark.read.format("tfrecord"), read it; with make_converter's filesystem=, give them that
    filesystem too: the converter's own readers do)."""

    def __init__(self, path: str, loc: Location, filesystem: Any, rows: int,
                 splits: dict[str, int]):
        self.path, self._loc, self._fs = path, loc, filesystem
        self._rows, self._splits = rows, splits

    def __len__(self) -> int:
        return self._rows

    def __repr__(self) -> str:
        state = "deleted" if self.deleted else f"{self._rows:,} rows"
        return f"Converter({redact(self.path)!r}, {state})"

    def __enter__(self) -> Converter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    @property
    def deleted(self) -> bool:
        """True once its directory is deleted (its readers then fail)."""
        with _lock:
            return self._loc.uri not in _live

    def rows(self, split: str | None = None) -> int:
        """Rows of one split (split=None: all of them)."""
        if split is None:
            return self._rows
        if split not in self._splits:
            raise OptionError(f"this converter holds no split {split!r}; its splits: "
                              f"{sorted(self._splits) or 'none (written without split=)'}")
        return self._splits[split]

    def make_dataset(self, batch_size: int, **kwargs: Any) -> Any:
        """tfspark.make_dataset of this data (a tf.data.Dataset; needs tfspark[tf])."""
        from tfspark.tf.dataset import make_dataset

        return make_dataset(self._readable(), batch_size, **self._with_fs(kwargs))

    def read_batches(self, batch_size: int, **kwargs: Any) -> Any:
        """tfspark.read_batches of this data (NumPy batches; no TensorFlow)."""
        from tfspark.numpy import read_batches

        return read_batches(self._readable(), batch_size, **self._with_fs(kwargs))

    def torch_dataset(self, batch_size: int, **kwargs: Any) -> Any:
        """tfspark.torch_dataset of this data (a torch IterableDataset; needs torch)."""
        from tfspark.numpy.frameworks import torch_dataset

        return torch_dataset(self._readable(), batch_size, **self._with_fs(kwargs))

    def delete(self) -> None:
        """Delete the converted data (a second call does nothing). Readers made from it stop
        working: delete after training."""
        with _lock:
            loc = _live.pop(self._loc.uri, None)
        if loc is not None:
            loc.delete_all()

    @staticmethod
    def _signed() -> None:
        """The readers' signatures and option docs: make_dataset's and read_batches' options
        (the readers' table) but filesystem=, which the converter gives."""
        import inspect

        from tfspark.store.options import MAKE_DATASET, READ_BATCHES, read_settings, reader_doc

        first = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                 inspect.Parameter("batch_size", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        for method, reader in ((Converter.make_dataset, MAKE_DATASET),
                               (Converter.read_batches, READ_BATCHES),
                               (Converter.torch_dataset, READ_BATCHES)):
            method.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
                *first, *(inspect.Parameter(t.name, inspect.Parameter.KEYWORD_ONLY,
                                            default=t.default)
                          for t in read_settings(reader) if t.name != "filesystem")])
            method.__doc__ = (method.__doc__ or "") + "\n\n        Args:\n" + \
                "            batch_size: rows per batch.\n" + \
                reader_doc(reader, skip=("filesystem",), indent=12)

    def _with_fs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"filesystem": self._fs, **kwargs}

    def _readable(self) -> str:
        if self.deleted:
            raise OptionError(f"{redact(self.path)!r} was deleted (converter.delete() or the "
                              f"end of its with block); make a new converter")
        return self.path


@scrubbed
def make_converter(df: Any, location: str | None = None, *, filesystem: Any = None,
                   progress: bool = True, **settings: Any) -> Converter:
    """Write a DataFrame for training into a fresh directory, and hand out its readers.

    The directory, its parquet copy included, is deleted by converter.delete(), at the end of
    `with make_converter(df) as c:`, or when Python exits.

    Args:
        df: a Spark DataFrame.
        location: a directory every Spark executor can write and this process can read (a URI
            on a cluster: s3://, gs://, abfs://, dbfs:/...). Default: the Spark conf
            spark.tfspark.converter.location, else, with a local master, the temporary
            directory.
        filesystem: a pyarrow or fsspec filesystem for `location`. Default: from the URI.
        progress: say on stderr where it writes and each stage of the write as it ends (a
            first Spark job takes tens of seconds), unless the "tfspark.progress" logger has
            handlers of your own already.
        **settings: write_tfrecords' settings (label_cols, split, rows_per_record (default
            1024 here), stats, ...); mode is always a new directory.

    Returns:
        A Converter: its make_dataset / read_batches / torch_dataset readers, len(), delete().

    Raises:
        OptionError: not a Spark DataFrame, mode=/backup_path=/backup_table= given, or no
            location on a cluster.

    Examples:
        >>> df = spark.range(10).selectExpr("CAST(id AS DOUBLE) AS x", "id % 2 AS y")
        >>> with tfspark.make_converter(df, label_cols="y", progress=False) as conv:
        ...     print(len(conv), sum(len(y) for _, y in conv.read_batches(4)))
        10 10
    """
    from tfspark.spark.export import write_tfrecords
    from tfspark.spark.hadoop_stores import hadoop_store

    if "mode" in settings or "backup_path" in settings or "backup_table" in settings:
        raise OptionError("make_converter writes a new directory and its backup of its own: "
                          "leave out mode=, backup_path= and backup_table= (write_tfrecords "
                          "takes them)")
    spark = getattr(df, "sparkSession", None)
    if spark is None:
        raise OptionError(f"make_converter needs a Spark DataFrame, got {type(df).__name__}")
    parent = location or spark.conf.get(LOCATION_CONF, None) or _local_default(spark)
    if filesystem is None:  # s3a://, abfss://, gs://: with Spark's own Hadoop settings
        parent, filesystem, _ = hadoop_store(spark, str(parent), {})
    name = f"tfspark-{uuid.uuid4().hex[:12]}"
    loc = locate(parent, filesystem).child(name)
    # what the writer and readers are given: a URI as given (its password and query options
    # say how to reach the store), a local path made absolute
    path = paths.with_child(str(parent), name) if paths.is_store_uri(str(parent)) else loc.uri
    with _lock:
        _live[loc.uri] = loc
    try:
        with _shown(progress):
            progress_log.info("tfspark: make_converter: writing the DataFrame to %s (deleted "
                              "by converter.delete() or at exit)", redact(path))
            write_tfrecords(df, path, filesystem=filesystem, **{
                "rows_per_record": ROWS_PER_RECORD, **settings})
        manifest = read_manifest(loc)
    except BaseException:
        with _lock:
            _live.pop(loc.uri, None)
        loc.delete_all()  # nothing half-written stays behind
        raise
    return Converter(path, loc, filesystem, manifest.rows,
                     {name: manifest.rows_of_split(name) for name in manifest.splits})


@contextlib.contextmanager
def _shown(on: bool) -> Iterator[None]:
    """The write's progress lines on stderr for the block, when asked and nobody set up the
    progress logger."""
    if not on or progress_log.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    level, propagate = progress_log.level, progress_log.propagate
    progress_log.addHandler(handler)
    progress_log.setLevel(logging.INFO)
    progress_log.propagate = False  # a root handler of the notebook's would print it twice
    try:
        yield
    finally:
        progress_log.removeHandler(handler)
        progress_log.setLevel(level)
        progress_log.propagate = propagate


def _local_default(spark: Any) -> str:
    """The temporary directory, when executors share this machine's disk (a local master)."""
    master = str(spark.conf.get("spark.master", "") or "")
    if not master.startswith("local"):
        raise OptionError(f"make_converter on a cluster (master {master or 'unknown'}) needs a "
                          f"location every executor can write: make_converter(df, location="
                          f"'s3://bucket/tmp') or set {LOCATION_CONF}")
    return tempfile.gettempdir()


@atexit.register
def _delete_live() -> None:
    """Delete what this process converted and did not delete (best effort: the store may be
    gone at exit)."""
    with _lock:
        left = list(_live.values())
        _live.clear()
    for loc in left:
        try:
            loc.delete_all()
        except Exception:  # noqa: BLE001 - exiting; nothing to report to
            pass


Converter._signed()
