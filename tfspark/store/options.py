"""Write and read settings: one frozen WriteOptions / ReadOptions, whatever the entry point.

WriteOptions is the table of write settings: each field after `path` is one setting, and its
metadata (a settings.Setting) gives its names on every surface, default, check, string parser
and help text. Every surface is derived from it, so adding a setting is adding one field:
  * write_tfrecords' keyword arguments, signature and option docs (`from_arguments`,
    `workflow_signature`),
  * the data source's string options (`from_source_options`; names follow the JVM connectors
    where they overlap: recordType, codec, maxRecordsPerFile),
  * the export job's config keys and command-line flags (tfspark.cli.config, tfspark.cli.main),
  * the README's table of data-source options (checked against it by a test).
ReadOptions is the table of the readers' options (make_dataset, read_batches and what reads
through them: torch_dataset, grain_dataset, a converter's readers): each field one option, its
metadata its default, check and help; the readers' checks, the signatures of the readers that
pass options on, their docs and the documentation's table come from it.
SparkReadOptions are spark.read's options. Pure: no pyspark, no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfspark.errors import OptionError, did_you_mean
from tfspark.spec.kinds import DECIMAL_AS, NULL_ELEMENT_POLICIES
from tfspark.spec.kinds import STORED_RECORD_TYPES as RECORD_TYPES
from tfspark.spec.layout import MAX_ROWS_PER_RECORD
from tfspark.store import settings as s
from tfspark.store.settings import WRITE_MODES, Setting, Where
from tfspark.store.uris import absolute
from tfspark.wire.compression import GZIP_LEVELS, normalize_compression

__all__ = ["WRITE_MODES", "ReadOptions", "SparkReadOptions", "WriteOptions", "known_options",
           "read_settings", "write_settings"]


def _setting(default: Any, check: s.Check, help: str, *, field_default: Any = ...,
             **names: Any) -> Any:
    """A WriteOptions field that is a setting (see settings.Setting for `names`)."""
    value = default if field_default is ... else field_default
    return field(default=value, metadata={"setting": Setting(default, check, help, **names)})


_NAMES = s.names_text
_JSON = s.json_text


@dataclass(frozen=True)
class WriteOptions:
    """Checked write settings: data source options, write_tfrecords arguments and export
    config keys alike. A setting with `option=None` is not a data-source option; one with
    `workflow=False` is the data source's only. `mode` None means the save mode Spark passed
    (append or overwrite)."""

    path: str
    mode: str | None = _setting(
        "errorifexists", s.optional_mode, "when the output path exists: errorifexists | "
        "overwrite | append | ignore (the data source: errorifexists or ignore, for the save "
        "modes Spark refuses for Python sources)", option="mode", choices=WRITE_MODES,
        field_default=None)
    label_cols: tuple[str, ...] = _setting(
        (), s.column_names, "label columns, marked in the spec", option="labelCols",
        text=_NAMES)
    compression: str | None = _setting(
        None, s.compression, "none | gzip (option alias: codec)", option="compression",
        choices=("gzip", "none"))
    gzip_level: int = _setting(
        6, s.in_range(GZIP_LEVELS[0], GZIP_LEVELS[-1]),
        "1 (fastest) .. 9 (smallest); default 6, as zlib and TensorFlow", option="gzipLevel",
        text=s.int_text, typed=int)
    record_type: str = _setting(
        "Example", s.choice(RECORD_TYPES), "Example | SequenceExample (array<array<T>> columns "
        "become feature lists, the others context) | ByteArray (one binary column written "
        "raw; the data source only)", option="recordType", choices=RECORD_TYPES)
    max_records_per_file: int | None = _setting(
        None, s.optional_positive, "roll to a new file after this many rows",
        option="maxRecordsPerFile", text=s.int_text, typed=int)
    max_bytes_per_file: int | None = _setting(
        None, s.optional_positive, "roll to a new file at about this many bytes on disk",
        option="maxBytesPerFile", text=s.int_text, typed=int, workflow=False)
    rows_per_record: int = _setting(
        1, s.in_range(1, MAX_ROWS_PER_RECORD, "; 256-4096 is the fast range for training"),
        "1: one row per Example; N: blocks of up to N rows per Example, column by column "
        "(256-4096: the fast layout for training)", option="rowsPerRecord", text=s.int_text,
        typed=int)
    partition_by: tuple[str, ...] = _setting(
        (), s.column_names, "columns with one col=value/ directory per value",
        option="partitionBy", text=_NAMES)
    description: str | None = _setting(
        None, s.optional_str, "a note on the data set kept in its manifest (tfspark inspect "
        "shows it; an append without one keeps the data set's)", option="description")
    spec: str | None = _setting(
        None, s.optional_str, "a FeatureSpec as JSON; default: inferred from the schema",
        option="spec", workflow=False)
    shapes: Mapping[str, Any] | None = _setting(
        None, s.shapes, 'fixed-length array/vector columns, {"col": [n]} (option: JSON)',
        option="shapes", text=_JSON)
    defaults: Mapping[str, Any] | None = _setting(
        None, s.defaults, 'fill values of nullable columns, {"col": value} (option: JSON)',
        option="defaults", text=_JSON)
    null_elements: str = _setting(
        "error", s.choice(NULL_ELEMENT_POLICIES), "a null inside an array: error | drop",
        option="nullElements", choices=NULL_ELEMENT_POLICIES)
    decimal_as: str = _setting(
        "float32", s.choice(DECIMAL_AS), "decimals as float32 (refused when a value would not "
        "come back exactly) | string (exact text)", option="decimalAs", choices=DECIMAL_AS)
    backup_table: str | None = _setting(
        None, s.optional_str, "catalog table of the parquet copy, e.g. db.name",
        text=s.none_text)
    backup_path: str | None = _setting(
        None, s.optional_str, "parquet directory of the copy (default: <path>/_backup)",
        text=s.none_text)
    split: Mapping[str, float] | None = _setting(
        None, s.split, "split fractions, e.g. train=0.8,validation=0.1,test=0.1",
        text=s.split_text)
    split_key: str | None = _setting(
        None, s.optional_str, "column whose hash assigns rows to splits (default: a seeded "
        "random draw)", text=s.none_text)
    seed: int = _setting(0, s.integer, "seed of the split and shuffle draws", typed=int)
    shuffle: bool = _setting(False, s.boolean, "shuffle rows randomly across the files (a "
                                               "Spark shuffle)", typed=bool)
    target_file_bytes: int = _setting(
        128 * 2**20, s.positive, "TFRecord file size at which a task starts its next "
        "file; each task (a partition of the DataFrame) writes files of its own, as Spark's "
        "writers do (config and flag: target_file_mb, in MiB)", typed=int,
        config="target_file_mb", config_default=128.0,
        to_value=lambda mb: int(mb * 2**20))
    detect_fixed_lengths: bool = _setting(
        True, s.boolean, "store arrays whose rows all have n values as FixedLen([n])",
        typed=bool)
    stats: bool = _setting(
        True, s.boolean, "feature statistics in the manifest, gathered by the write's tasks "
        "(keras_preprocessing builds layers from them)", typed=bool)
    stats_exact: bool = _setting(
        False, s.boolean, "true: the statistics from Spark aggregation jobs over the backup "
        "instead (exact top values, deciles to 1/1000; jobs of their own, slower)",
        typed=bool, option=None)
    task_stats: bool = _setting(
        False, s.boolean, "true: the write's tasks gather feature statistics into the "
        "manifest (keras_preprocessing, tfspark stats)", option="featureStats",
        text=s.bool_text, workflow=False)
    dali_index: bool = _setting(
        False, s.boolean, "also write index files for NVIDIA DALI's TFRecord reader (what "
        "tfspark index writes, under <path>/_tfspark_index/), after the commit; "
        "uncompressed files only", typed=bool, option=None)
    stats_top_k: int = _setting(
        10_000, s.positive, "most frequent values kept per string/integer feature",
        option="statsTopK", text=s.int_text, typed=int)

    @classmethod
    def from_arguments(cls, path: Any, *, in_filesystem: bool = False,
                       **arguments: Any) -> WriteOptions:
        """From Python values (write_tfrecords' keyword arguments, the export config). Each is
        checked by its setting; messages name the argument. Raises OptionError (TypeError for
        an unknown argument, as Python does). in_filesystem: the paths are inside a given
        filesystem (not made absolute on the local disk)."""
        table = {t.name: t for t in write_settings()}
        unknown = sorted(set(arguments) - set(table))
        if unknown:
            raise TypeError(f"unexpected write argument(s) {unknown}"
                            f"{did_you_mean(unknown[0], table)}")
        checked = {k: table[k].check(Where(k), v) for k, v in arguments.items()}
        if checked.get("backup_path") and not in_filesystem:
            checked["backup_path"] = absolute(checked["backup_path"])
        path = _path(path)
        return cls(path=path if in_filesystem else absolute(path),
                   **checked)._check_together("")

    @classmethod
    def from_source_options(cls, options: Mapping[str, Any]) -> WriteOptions:
        """From the data source's string options (keys in any case). Raises OptionError for an
        unknown option, a bad value or a missing path."""
        by_option = {t.option.lower(): t for t in write_settings() if t.option}
        opts = known_options(options, {**_OPTION_HELP, "path": _PATH_HELP,
                                       "codec": "alias of compression (JVM connector name)"},
                             "option")
        if not opts.get("path"):
            raise OptionError("no output path: use df.write.format('tfrecord').save(path)")
        if "compression" in opts and "codec" in opts and \
                normalize_compression(opts["compression"]) != normalize_compression(opts["codec"]):
            raise OptionError(f"options compression={opts['compression']!r} and "
                              f"codec={opts['codec']!r} disagree; give one of them")
        if "codec" in opts:
            opts.setdefault("compression", opts.pop("codec"))
        values: dict[str, Any] = {}
        for key, text in opts.items():
            if key == "path":
                continue
            t = by_option[key]
            where = Where(f"option {t.option}")
            values[t.name] = t.check(where, t.parse(where, str(text)))
        return cls(path=str(opts["path"]), **values)._check_together("option ")

    def _check_together(self, prefix: str) -> WriteOptions:
        if self.backup_table and self.backup_path:
            raise OptionError(f"give {prefix}backup_table ({self.backup_table!r}) or "
                              f"{prefix}backup_path ({self.backup_path!r}), not both: the "
                              f"parquet copy goes to one place")
        if self.rows_per_record > 1 and self.record_type != "Example":
            name = "option rowsPerRecord" if prefix else "rows_per_record"
            what = "writes raw records" if self.record_type == "ByteArray" else \
                "has no block layout"
            raise OptionError(f"{name}={self.rows_per_record} packs rows into tf.train.Example "
                              f"blocks; recordType {self.record_type!r} {what}, one record "
                              f"per row: drop one of them")
        if self.task_stats and self.record_type == "ByteArray":
            raise OptionError("option featureStats=true needs a feature spec; recordType "
                              "ByteArray writes raw records: drop one of them")
        if self.dali_index and self.compression:
            name = "option dali_index" if prefix else "dali_index"
            raise OptionError(f"{name}: DALI reads uncompressed TFRecords only, and compression "
                              f"is {self.compression!r}: drop one of them")
        if self.split is None and self.split_key is not None:
            raise OptionError("split_key is given but split is not; pass split={'train': 0.8, "
                              "'validation': 0.2} or drop split_key")
        return self

    def replace(self, **changes: Any) -> WriteOptions:
        """A copy with settings replaced, each checked by its setting."""
        table = {t.name: t for t in write_settings()}
        checked = {k: table[k].check(Where(k), v) for k, v in changes.items()}
        return dataclasses.replace(self, **checked)._check_together("")


def write_settings() -> tuple[Setting, ...]:
    """The table: every WriteOptions field's Setting, in field order, named."""
    return tuple(dataclasses.replace(f.metadata["setting"], name=f.name)
                 for f in dataclasses.fields(WriteOptions) if "setting" in f.metadata)


def workflow_signature(first: list[inspect.Parameter]) -> inspect.Signature:
    """write_tfrecords' signature: `first`, then every workflow setting as a keyword with its
    default (what help() and IDEs show)."""
    return inspect.Signature([*first, *(
        inspect.Parameter(t.name, inspect.Parameter.KEYWORD_ONLY, default=t.default)
        for t in write_settings() if t.workflow)])


def settings_markdown() -> str:
    """The table of write settings as the documentation shows it (generated: docs/writing.md
    holds this text between its markers, checked by a test)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| keyword (config key, `--flag`) | data source option | default | what it does |",
            "|---|---|---|---|"]
    for t in write_settings():
        key = f"`{t.name}`" if t.workflow else "(data source only)"
        if t.workflow and t.config_key != t.name:
            key += f" (`{t.config_key}`)"
        option = f"`{t.option}`" if t.option else ""
        default = t.config_value if t.workflow and t.config else t.default
        rows.append(f"| {key} | {option} | `{default!r}` | {cell(t.help)} |")
    return "\n".join(rows)


def workflow_doc(indent: int = 8) -> str:
    """The settings as entries of write_tfrecords' and write_dataset's Args sections, from the
    table."""
    return "\n".join(arg_doc(t.name, t.help, t.default, indent)
                     for t in write_settings() if t.workflow)


def _path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"output path must be a non-empty string, got {value!r}; pass "
                          f"save(path) or .option('path', ...)")
    return value


# ---------------------------------------------------------------- string options

def known_options(options: Mapping[str, Any], known: Mapping[str, str],
                  what: str) -> dict[str, Any]:
    """Options with lower-cased keys; an unknown key is an error listing the known ones."""
    opts = {str(k).lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - {k.lower() for k in known})
    if unknown:
        listing = ", ".join(f"{k} ({v})" for k, v in known.items())
        raise OptionError(f"unknown tfrecord {what}(s) {unknown}"
                          f"{did_you_mean(unknown[0], known)}; known options: {listing}")
    return opts


_PATH_HELP = "output directory or URI (what save(path) passes)"
# option name as users write it -> help: the data source's options, from the table
_OPTION_HELP = {t.option: t.help for t in write_settings() if t.option}
SPARK_READ_OPTIONS = {
    "path": "a data set directory (with or without _tfspark.json) or one TFRecord file",
    "recordtype": "Example (default) | SequenceExample | ByteArray (each record as one binary "
                  "column 'value')",
    "split": "read only this split of a data set written with splits",
    "compression": "none | gzip: overrides the manifest and gzip detection",
    "schemasamplerecords": "records read per file to infer a schema (default 1000)",
    "schemasamplefiles": "files sampled to infer a schema, spread over the list (default 1024)",
    "verify": "true (default) | false: check both CRCs of every record",
}


@dataclass(frozen=True)
class SparkReadOptions:
    """The checked read options of spark.read.format("tfrecord") (see SPARK_READ_OPTIONS)."""

    path: str
    record_type: str | None = None  # None: the manifest's, else Example
    split: str | None = None
    compression: str | None = "auto"  # "auto": the manifest's, else detected per file
    sample_records: int = 1000
    sample_files: int = 1024
    verify: bool = True

    @classmethod
    def from_source_options(cls, options: Mapping[str, Any]) -> SparkReadOptions:
        """Check spark.read's options (keys case-insensitive). Raises OptionError for an unknown
        option, a bad value or a missing path."""
        opts = known_options(options, SPARK_READ_OPTIONS, "read option")
        if not opts.get("path"):
            raise OptionError("no input path: use spark.read.format('tfrecord').load(path)")

        def number(name: str, default: int) -> int:
            if opts.get(name.lower()) in (None, ""):
                return default
            where = Where(f"option {name}")
            return s.positive(where, s.int_text(where, str(opts[name.lower()])))

        record_type = opts.get("recordtype")
        return cls(
            path=str(opts["path"]),
            record_type=None if record_type is None else s.choice(RECORD_TYPES)(
                Where("option recordType"), record_type),
            split=opts.get("split") or None,
            compression=(normalize_compression(opts["compression"]) if "compression" in opts
                         else "auto"),
            sample_records=number("schemaSampleRecords", 1000),
            sample_files=number("schemaSampleFiles", 1024),
            verify=s.bool_text(Where("verify"), str(opts.get("verify", "true"))))


# ---------------------------------------------------------------- the readers' options

MAKE_DATASET, READ_BATCHES = "make_dataset", "read_batches"
_BOTH = (MAKE_DATASET, READ_BATCHES)
STRING_FORMS = ("object", "bytes", "ids")  # read_batches' strings=
FILE_READERS = ("auto", "tensorflow")  # make_dataset's file_reader=
RAGGED_FORMS = ("ragged", "padded")  # read_batches' ragged=
SHUFFLES = ("window", "global")  # read_batches' shuffle=
AUTOTUNE = -1  # tf.data.AUTOTUNE's value, without importing TensorFlow


def _read(default: Any, check: s.Check, help: str, readers: tuple[str, ...] = _BOTH) -> Any:
    """A ReadOptions field: an option of `readers`."""
    return field(default=default, metadata={"setting": Setting(default, check, help,
                                                               readers=readers)})


def _cache_dir(where: Where, value: Any) -> str | None:
    """A local directory this process may write, made if missing; None: no cache."""
    import os

    from tfspark.store.uris import local_only

    if value is None:
        return None
    path = local_only(value, where.name, "the cache is kept on this machine's disk")
    if os.path.exists(path) and not os.path.isdir(path):
        raise OptionError(f"{where.name} {path!r} is a file, not a directory")
    why = "no permission"
    try:  # now, not when the first file is kept, in a reading thread
        os.makedirs(path, exist_ok=True)
        writable = os.access(path, os.W_OK | os.X_OK)
    except OSError as e:
        writable, why = False, e.strerror or str(e)
    if not writable:
        raise OptionError(f"{where.name} {path!r} cannot be written here ({why}): give a "
                          f"directory this process may write")
    return path


@dataclass(frozen=True)
class ReadOptions:
    """The readers' options, checked: make_dataset's and read_batches' keyword arguments (the
    frameworks' readers and a converter's take read_batches'). A field's metadata says which
    readers take it; each value passes its check whatever reader it is given to."""

    split: str | None = _read(
        None, s.optional_str, "read <path>/<split>/; a data set with splits is read one split at "
        "a time, so training and test rows never mix by accident")
    label_cols: tuple[str, ...] | None = _read(
        None, s.optional_names, "the label columns, overriding the spec's; [] reads features only")
    spec: Any = _read(
        None, s.anything, "a FeatureSpec, its JSON text or dict, or the path of a spec or "
        "manifest file (or a data set): needed for TFRecord files named one by one; with a data "
        "set it overrides the manifest's spec")
    columns: tuple[str, ...] | None = _read(
        None, s.optional_names, "the features to read (a name or a list; the labels come as "
        "well); default every feature of the spec. Other keys are skipped, not parsed")
    shuffle_buffer: int | None = _read(
        None, s.shuffle_buffer, "rows shuffled together: each epoch a new file order, then "
        "windows of this many rows permuted; None: 10 batches; 0: no shuffling")
    seed: int | None = _read(
        None, s.optional_seed, "seeds the file order and the shuffles: the same seed, the same "
        "batches (each pass a new shuffle); None: drawn at random (read_batches keeps the one "
        "drawn in its state)")
    epochs: int | None = _read(1, s.epochs, "passes over the data; None repeats forever (give "
                                            "steps_per_epoch to Keras)")
    shard: tuple[int, int] | None = _read(
        None, s.shard, "(num_workers, index): this worker's share, disjoint from the others' "
        "and together all rows: whole files when there are at least num_workers files "
        "(balanced by their counts), else every num_workers-th record of each file")
    even_shards: bool = _read(
        True, s.boolean, "with shard and a manifest, every worker takes the same number of "
        "batches per epoch (MultiWorkerMirroredStrategy needs it): each reads as many rows as "
        "the smallest share (the last rows of its files are cut, with a warning); False: every "
        "row of the share")
    drop_remainder: bool = _read(False, s.boolean, "drop the last batch of an epoch when it is "
                                                   "short")
    shuffle_files: bool = _read(True, s.boolean, "a new file order each epoch (False: the "
                                                 "manifest's order)")
    compression: str | None = _read(
        None, s.read_compression, "for TFRecord files named one by one: None finds it from each "
        "file's first bytes, 'gzip' or 'none' forces it (a data set's is its manifest's)")
    filesystem: Any = _read(
        None, s.anything, "where the paths are: a pyarrow.fs.FileSystem or an fsspec "
        "filesystem; default from the path (local, or a URI's scheme and query options)")
    io_threads: int | None = _read(
        None, s.optional_count, "files streamed at once from an object store (default 16), "
        "whatever the decoding threads: each file one request, read ahead of its decoding")
    cache_dir: str | None = _read(
        None, _cache_dir, "a local directory where remote files, once read whole and checked, "
        "are kept (per write of the data set), for later epochs and runs")
    # make_dataset's own
    cache: bool | str = _read(
        False, s.cache, "True keeps the serialized records in memory after the first pass; a "
        "path, in a file", (MAKE_DATASET,))
    deterministic: bool = _read(
        False, s.boolean, "keep a reproducible order; False lets parallel reads deliver what "
        "is ready first, which is faster", (MAKE_DATASET,))
    num_parallel_reads: int = _read(
        AUTOTUNE, s.parallel_reads, "files read at once (AUTOTUNE, -1: one per core)",
        (MAKE_DATASET,))
    file_reader: str = _read(
        "auto", s.one_of(FILE_READERS), "who reads the files: 'auto' (TensorFlow's "
        "TFRecordDataset for local files of the block layout, tfspark's own reader for the row "
        "layout and for stores); 'tensorflow': TensorFlow's file reading for every file, a "
        "pipeline of graph ops alone, which tf.data service can serve (local files and gs://)",
        (MAKE_DATASET,))
    # read_batches' own
    num_threads: int | None = _read(
        None, s.optional_count, "files read and decoded at once (default: this process's cores, "
        "at most 8); 1 with shuffle_buffer=0 and shuffle_files=False reads rows in file order",
        (READ_BATCHES,))
    strings: str = _read(
        "object", s.one_of(STRING_FORMS), "'object': strings as object arrays of bytes, as "
        "tf.string; 'bytes': each string's uint8 bytes, a Ragged one level below; 'ids': an "
        "int64 id in its feature's vocabulary (k + 1 for the k-th value, 0 for others, as "
        "StringLookup numbers them), so JAX and PyTorch get numbers", (READ_BATCHES,))
    vocabulary: Any = _read(
        None, s.optional_mapping_or_name, "with strings='ids': {feature: values}, or the split "
        "whose statistics give the vocabularies; default the statistics of all rows",
        (READ_BATCHES,))
    shuffle: str = _read(
        "window", s.one_of(SHUFFLES), "'window': windows of shuffle_buffer rows of the files "
        "being read; 'global': each epoch a permutation of units of about 4,096 rows over every "
        "file, then the windows (uncompressed files)", (READ_BATCHES,))
    ragged: str = _read(
        "ragged", s.one_of(RAGGED_FORMS), "'ragged': a variable-length feature as a Ragged("
        "values, row_splits); 'padded': `name` [batch, width] and `name_mask`", (READ_BATCHES,))
    pad_to: Any = _read(
        None, s.pad_to, "with ragged='padded': the width (an int, or {feature: width}); "
        "default the longest row in the statistics", (READ_BATCHES,))
    stack: Any = _read(
        None, s.stack, "{name: [feature, ...]}: those fixed features (of one dtype) side by "
        "side in one array [batch, k] in place of their columns: a model's input matrix",
        (READ_BATCHES,))
    processes: int | None = _read(
        None, s.optional_count, "N > 1: read and decode in N processes of their own, the "
        "batches handed over in shared memory (end them with close() or `with`)",
        (READ_BATCHES,))
    state: Any = _read(
        None, s.state, "what reader.state_dict() gave: the first iteration resumes there, with "
        "exactly the batches an uninterrupted one would still have given; a list of every "
        "worker's (in shard order) continues their epoch on this reader's shard=(m, j), any m",
        (READ_BATCHES,))

    @classmethod
    def checked(cls, reader: str, **values: Any) -> ReadOptions:
        """The options of `reader` given as keywords, each checked by its setting (OptionError
        naming the argument; TypeError for one the reader does not take)."""
        table = {t.name: t for t in read_settings(reader)}
        unknown = sorted(set(values) - set(table))
        if unknown:
            raise TypeError(f"{reader}() got unexpected keyword argument(s) {unknown}"
                            f"{did_you_mean(unknown[0], table)}")
        done = cls(**{k: table[k].check(Where(k), v) for k, v in values.items()})
        if done.vocabulary is not None and done.strings != "ids":
            raise OptionError(f"vocabulary= is for strings='ids' (strings={done.strings!r} reads "
                              f"the strings themselves)")
        if done.pad_to is not None and done.ragged != "padded":
            raise OptionError("pad_to= is for ragged='padded'")
        return done


def read_settings(reader: str | None = None) -> tuple[Setting, ...]:
    """The readers' table (every ReadOptions field's Setting, in field order, named); with
    `reader`, its options only."""
    found = (dataclasses.replace(f.metadata["setting"], name=f.name)
             for f in dataclasses.fields(ReadOptions))
    return tuple(t for t in found if reader is None or reader in t.readers)


def reader_signature(reader: str, first: list[inspect.Parameter]) -> inspect.Signature:
    """A signature of `first`, then `reader`'s options as keywords with their defaults."""
    return inspect.Signature([*first, *(
        inspect.Parameter(t.name, inspect.Parameter.KEYWORD_ONLY, default=t.default)
        for t in read_settings(reader))])


def reader_doc(reader: str, skip: tuple[str, ...] = (), indent: int = 8) -> str:
    """A reader's options as entries of its docstring's Args section, from the table."""
    return "\n".join(arg_doc(t.name, t.help, t.default, indent)
                     for t in read_settings(reader) if t.name not in skip)


def fill_doc(fn: Any, placeholder: str, text: str) -> None:
    """Put the generated `text` in place of `placeholder` in fn's docstring, and in that of
    the function it wraps (help() shows one, the API reference the other)."""
    while fn is not None:
        fn.__doc__ = (fn.__doc__ or "").replace(placeholder, text)
        fn = getattr(fn, "__wrapped__", None)


def arg_doc(name: str, text: str, default: Any, indent: int = 8) -> str:
    """One Args entry of a docstring in the Google style: `name: text. Default: value.`"""
    import textwrap

    text = text.rstrip(". ")
    return textwrap.fill(f"{name}: {text}. Default: {default!r}.", 96,
                         initial_indent=" " * indent, subsequent_indent=" " * (indent + 4))


def read_settings_markdown() -> str:
    """The readers' table as the documentation shows it (docs/reading.md, generated)."""
    rows = ["| keyword | make_dataset | read_batches | default | what it does |",
            "|---|---|---|---|---|"]
    for t in read_settings():
        rows.append(f"| `{t.name}` | {'yes' if MAKE_DATASET in t.readers else ''} | "
                    f"{'yes' if READ_BATCHES in t.readers else ''} | `{t.default!r}` | "
                    f"{t.help.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)
