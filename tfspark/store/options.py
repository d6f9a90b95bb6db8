"""Write and read options: one frozen WriteOptions / ReadOptions, whatever the entry point.

Every entry point converts what it was given into these and nothing else checks them:
  * the data source's string options (`WriteOptions.from_source_options`, keys in any case; names
    follow the JVM connectors where they overlap: recordType, codec, maxRecordsPerFile),
  * write_tfrecords' keyword arguments and the export config (`WriteOptions.from_arguments`),
  * spark.read's options (`ReadOptions.from_source_options`).
Each field has one check (`_FIELDS`); messages name the argument or option the caller used.
Pure: no pyspark, no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfspark.arrow.encode import NULL_ELEMENT_POLICIES
from tfspark.errors import OptionError
from tfspark.spec.kinds import DECIMAL_AS
from tfspark.spec.kinds import STORED_RECORD_TYPES as RECORD_TYPES
from tfspark.spec.layout import MAX_ROWS_PER_RECORD
from tfspark.store.fs import absolute
from tfspark.wire.tfrecord import GZIP_LEVELS, normalize_compression

WRITE_MODES = ("errorifexists", "overwrite", "append", "ignore")
_MODE_ALIASES = {"error": "errorifexists", "default": "errorifexists"}
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_-]+$")

# option (lower case) -> what it is; the listing shown when an option is unknown.
WRITE_OPTIONS = {
    "path": "output directory or URI (what save(path) passes)",
    "compression": "none | gzip",
    "codec": "alias of compression (JVM connector name)",
    "gziplevel": "1 (fastest) .. 9 (smallest); default 6, as zlib and TensorFlow",
    "recordtype": "Example (default) | SequenceExample (array<array<T>> columns become feature "
                  "lists, the others context) | ByteArray (one binary column written raw)",
    "maxrecordsperfile": "roll to a new file after this many records",
    "maxbytesperfile": "roll to a new file at about this many bytes on disk",
    "rowsperrecord": "1 (default: one row per Example) | N: blocks of up to N rows per "
                     "Example, column by column (256-4096: the fast layout for training)",
    "partitionby": "comma-separated columns; one col=value/ directory per value",
    "mode": "errorifexists | ignore, for the save modes Spark refuses for Python sources",
    "labelcols": "comma-separated label columns, marked in the spec",
    "spec": "a FeatureSpec as JSON; default: inferred from the DataFrame schema",
    "shapes": 'JSON {"col": [n]}: fixed-length array/vector columns',
    "defaults": 'JSON {"col": value}: fill values of nullable columns',
    "nullelements": "error (default) | drop: nulls inside arrays",
    "decimalas": "float32 (default: refused when a value would not come back exactly) | "
                 "string (exact text)",
    "splitcolumn": "string column naming each row's split directory (used by write_tfrecords)",
    "featurestats": "true | false (default): the write's tasks gather feature statistics "
                    "into the manifest (keras_preprocessing, tfspark stats)",
    "statstopk": "most frequent values kept per string/integer feature (default 10000)",
    "stats": "JSON object stored in the manifest (used by write_tfrecords)",
    "backup": "JSON: the manifest's backup entry (used by write_tfrecords)",
}
READ_OPTIONS = {
    "path": "a data set directory (with or without _tfspark.json) or one TFRecord file",
    "recordtype": "Example (default) | SequenceExample | ByteArray (each record as one binary "
                  "column 'value')",
    "split": "read only this split of a data set written with splits",
    "compression": "none | gzip: overrides the manifest and gzip detection",
    "schemasamplerecords": "records read per file to infer a schema (default 1000)",
    "schemasamplefiles": "files sampled to infer a schema, spread over the list (default 1024)",
    "verify": "true (default) | false: check both CRCs of every record",
}


# ---------------------------------------------------------------- one check per kind of value

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_mode(name: str, value: Any) -> str:
    """A save mode (any case; error/default mean errorifexists)."""
    m = str(value).lower()
    m = _MODE_ALIASES.get(m, m)
    if m not in WRITE_MODES:
        raise OptionError(f"{name} {value!r} is not valid; use one of {list(WRITE_MODES)}")
    return m


def _choice(allowed: tuple[str, ...]) -> Callable[[str, Any], str]:
    def check(name: str, value: Any) -> str:
        for a in allowed:
            if str(value).lower() == a.lower():
                return a
        raise OptionError(f"{name}={value!r} is not valid; use one of {list(allowed)}")
    return check


def _positive(name: str, value: Any) -> int:
    if not _is_int(value) or value <= 0:
        raise OptionError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _optional_positive(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or value <= 0:
        raise OptionError(f"{name} must be a positive integer or None, got {value!r}")
    return int(value)


def _rows_per_record(name: str, value: Any) -> int:
    if not _is_int(value) or not 1 <= value <= MAX_ROWS_PER_RECORD:
        raise OptionError(f"{name} must be an integer from 1 (one row per Example) to "
                          f"{MAX_ROWS_PER_RECORD}, got {value!r}; 256-4096 is the fast range "
                          f"for training")
    return int(value)


def _gzip_level(name: str, value: Any) -> int:
    if not _is_int(value) or value not in GZIP_LEVELS:
        raise OptionError(f"{name} must be an integer from {GZIP_LEVELS[0]} to "
                          f"{GZIP_LEVELS[-1]}, got {value!r}")
    return int(value)


def column_names(name: str, value: Any) -> tuple[str, ...]:
    """A column name or an iterable of them, as a tuple; OptionError otherwise."""
    if isinstance(value, str):
        return (value,)
    try:
        names = list(value)
    except TypeError:
        names = None
    if names is None or not all(isinstance(n, str) and n for n in names):
        raise OptionError(f"{name} must be a column name or a list of column names, got "
                          f"{value!r}")
    return tuple(names)


def _optional_str(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise OptionError(f"{name} must be a non-empty string or None, got {value!r}")
    return value


def _optional_mapping(name: str, value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise OptionError(f"{name} must be a dict, got {type(value).__name__} {value!r}")
    return dict(value)


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"{name} must be True or False, got {value!r}")
    return value


def _int(name: str, value: Any) -> int:
    if not _is_int(value):
        raise OptionError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _split(name: str, value: Any) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise OptionError(f"{name} must be a non-empty dict of name -> fraction, got {value!r}")
    for split, frac in value.items():
        if not isinstance(split, str) or not _SPLIT_NAME.match(split):
            raise OptionError(f"split name {split!r} must use letters, digits, '_' or '-' (it "
                              f"becomes a directory name)")
        if not isinstance(frac, (int, float)) or isinstance(frac, bool) or not 0 <= frac <= 1:
            raise OptionError(f"split fraction for {split!r} must be in [0, 1], got {frac!r}")
    total = sum(value.values())
    if abs(total - 1.0) > 1e-6:
        raise OptionError(f"split fractions must sum to 1, got {total:g} for {dict(value)}")
    return {str(k): float(v) for k, v in value.items()}


# ---------------------------------------------------------------- write options

@dataclass(frozen=True)
class WriteOptions:
    """Checked write settings: data source options and write_tfrecords arguments alike.

    The fields from `backup_table` on are used by write_tfrecords only (the data source never
    sees them); `mode` None means the save mode Spark passed (append or overwrite).
    """

    path: str
    mode: str | None = None
    compression: str | None = None
    gzip_level: int = 6
    record_type: str = "Example"
    max_records_per_file: int | None = None
    max_bytes_per_file: int | None = None
    rows_per_record: int = 1
    partition_by: tuple[str, ...] = ()
    label_cols: tuple[str, ...] = ()
    spec_json: str | None = None
    shapes: Mapping[str, Any] | None = None
    defaults: Mapping[str, Any] | None = None
    null_elements: str = "error"
    decimal_as: str = "float32"
    split_column: str | None = None
    stats: Mapping[str, Any] | None = None
    backup_entry: Mapping[str, Any] | None = None
    backup_table: str | None = None
    backup_path: str | None = None
    split: Mapping[str, float] | None = None
    split_key: str | None = None
    seed: int = 0
    shuffle: bool = False
    target_file_bytes: int = 128 * 2**20
    detect_fixed_lengths: bool = True
    feature_stats: bool = True  # write_tfrecords: feature statistics into the manifest
    stats_top_k: int = 10_000
    task_stats: bool = False  # the data source's featureStats: tasks gather them (merged)

    @classmethod
    def from_arguments(cls, path: Any, **arguments: Any) -> WriteOptions:
        """From Python values (write_tfrecords' keyword arguments, the export config). Each is
        checked by its field's rule; messages name the argument. Raises OptionError."""
        unknown = sorted(set(arguments) - set(_FIELDS))
        if unknown:
            raise TypeError(f"unexpected write argument(s) {unknown}")
        checked = {k: _FIELDS[k](k, v) for k, v in arguments.items()}
        if checked.get("backup_path"):
            checked["backup_path"] = absolute(checked["backup_path"])
        return cls(path=absolute(_path(path, "output path")), **checked)._check_together("")

    @classmethod
    def from_source_options(cls, options: Mapping[str, Any]) -> WriteOptions:
        """From the data source's string options (keys in any case). Raises OptionError for an
        unknown option, a bad value or a missing path."""
        opts = known_options(options, WRITE_OPTIONS, "option")
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
            field, parse = _SOURCE_KEYS[key]
            values[field] = _FIELDS[field](f"option {_OPTION_NAMES[key]}",
                                           parse(_OPTION_NAMES[key], text))
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
        if self.split is None and self.split_key is not None:
            raise OptionError("split_key is given but split is not; pass split={'train': 0.8, "
                              "'validation': 0.2} or drop split_key")
        return self

    def source_options(self) -> dict[str, str]:
        """The data source options (strings) that carry this write's settings to it."""
        out = {"nullElements": self.null_elements, "recordType": self.record_type,
               "decimalAs": self.decimal_as}
        if self.compression:
            out.update(compression=self.compression, gzipLevel=str(self.gzip_level))
        if self.max_records_per_file:
            out["maxRecordsPerFile"] = str(self.max_records_per_file)
        if self.max_bytes_per_file:
            out["maxBytesPerFile"] = str(self.max_bytes_per_file)
        if self.rows_per_record != 1:
            out["rowsPerRecord"] = str(self.rows_per_record)
        if self.partition_by:
            out["partitionBy"] = ",".join(self.partition_by)
        if self.label_cols:
            out["labelCols"] = ",".join(self.label_cols)
        for key, value in (("spec", self.spec_json), ("splitColumn", self.split_column)):
            if value:
                out[key] = value
        for key, doc in (("shapes", self.shapes), ("defaults", self.defaults),
                         ("stats", self.stats), ("backup", self.backup_entry)):
            if doc is not None:
                out[key] = json.dumps(doc)
        return out

    def replace(self, **changes: Any) -> WriteOptions:
        """A copy with fields replaced, each checked by its rule."""
        checked = {k: _FIELDS[k](k, v) for k, v in changes.items()}
        return dataclasses.replace(self, **checked)._check_together("")


def _path(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"{what} must be a non-empty string, got {value!r}; pass "
                          f"save(path) or .option('path', ...)")
    return value


_FIELDS: dict[str, Callable[[str, Any], Any]] = {
    "mode": lambda n, v: None if v is None else check_mode(n, v),
    "compression": lambda n, v: normalize_compression(v),
    "gzip_level": _gzip_level,
    "record_type": _choice(RECORD_TYPES),
    "max_records_per_file": _optional_positive,
    "max_bytes_per_file": _optional_positive,
    "rows_per_record": _rows_per_record,
    "feature_stats": _bool,
    "stats_top_k": _positive,
    "task_stats": _bool,
    "partition_by": column_names,
    "label_cols": column_names,
    "spec_json": _optional_str,
    "shapes": _optional_mapping,
    "defaults": _optional_mapping,
    "null_elements": _choice(NULL_ELEMENT_POLICIES),
    "decimal_as": _choice(DECIMAL_AS),
    "split_column": _optional_str,
    "stats": _optional_mapping,
    "backup_entry": _optional_mapping,
    "backup_table": _optional_str,
    "backup_path": _optional_str,
    "split": _split,
    "split_key": _optional_str,
    "seed": _int,
    "shuffle": _bool,
    "target_file_bytes": _positive,
    "detect_fixed_lengths": _bool,
}


# ---------------------------------------------------------------- string options

def known_options(options: Mapping[str, Any], known: Mapping[str, str],
                  what: str) -> dict[str, Any]:
    """Options with lower-cased keys; an unknown key is an error listing the known ones."""
    opts = {str(k).lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - set(known))
    if unknown:
        listing = ", ".join(f"{k} ({v})" for k, v in known.items())
        raise OptionError(f"unknown tfrecord {what}(s) {unknown}; known options: {listing}")
    return opts


def _text(name: str, text: Any) -> str:
    return str(text)


def _int_text(name: str, text: Any) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise OptionError(f"option {name}={text!r} must be an integer") from None


def _names_text(name: str, text: Any) -> tuple[str, ...]:
    if not text:
        return ()
    names = tuple(v.strip() for v in str(text).split(","))
    if any(not n for n in names):
        raise OptionError(f"option {name}: column list {text!r} has an empty name; use 'a,b,c'")
    return names


def _json_text(name: str, text: Any) -> Mapping[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} must be a JSON object: {e}") from None
    if not isinstance(doc, dict):
        raise OptionError(f"option {name} must be a JSON object, got {type(doc).__name__}")
    return doc


def _bool_text(name: str, text: Any) -> bool:
    value = str(text).strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option {name}={text!r} must be true or false")
    return value == "true"


# lower-case option -> (WriteOptions field, string parser); and the name users write.
_SOURCE_KEYS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "compression": ("compression", _text), "gziplevel": ("gzip_level", _int_text),
    "recordtype": ("record_type", _text), "maxrecordsperfile": ("max_records_per_file", _int_text),
    "maxbytesperfile": ("max_bytes_per_file", _int_text),
    "rowsperrecord": ("rows_per_record", _int_text),
    "partitionby": ("partition_by", _names_text), "mode": ("mode", _text),
    "labelcols": ("label_cols", _names_text), "spec": ("spec_json", _text),
    "shapes": ("shapes", _json_text), "defaults": ("defaults", _json_text),
    "nullelements": ("null_elements", _text), "decimalas": ("decimal_as", _text),
    "splitcolumn": ("split_column", lambda n, t: str(t) or None),
    "stats": ("stats", _json_text), "backup": ("backup_entry", _json_text),
    "featurestats": ("task_stats", _bool_text), "statstopk": ("stats_top_k", _int_text),
}
_OPTION_NAMES = {k.lower(): k for k in (
    "compression", "gzipLevel", "recordType", "maxRecordsPerFile", "maxBytesPerFile",
    "rowsPerRecord",
    "partitionBy", "mode",
    "labelCols", "spec", "shapes", "defaults", "nullElements", "decimalAs", "splitColumn",
    "stats", "backup", "featureStats", "statsTopK",
    "verify",
    "split", "schemaSampleRecords", "schemaSampleFiles")}


# ---------------------------------------------------------------- read options

@dataclass(frozen=True)
class ReadOptions:
    """The checked read options of spark.read.format("tfrecord") (see READ_OPTIONS)."""

    path: str
    record_type: str | None = None  # None: the manifest's, else Example
    split: str | None = None
    compression: str | None = "auto"  # "auto": the manifest's, else detected per file
    sample_records: int = 1000
    sample_files: int = 1024
    verify: bool = True

    @classmethod
    def from_source_options(cls, options: Mapping[str, Any]) -> ReadOptions:
        """Check spark.read's options (keys case-insensitive). Raises OptionError for an unknown
        option, a bad value or a missing path."""
        opts = known_options(options, READ_OPTIONS, "read option")
        if not opts.get("path"):
            raise OptionError("no input path: use spark.read.format('tfrecord').load(path)")

        def number(key: str, default: int) -> int:
            if opts.get(key) in (None, ""):
                return default
            name = f"option {_OPTION_NAMES[key]}"
            return _positive(name, _int_text(_OPTION_NAMES[key], opts[key]))

        record_type = opts.get("recordtype")
        return cls(
            path=str(opts["path"]),
            record_type=None if record_type is None else _choice(RECORD_TYPES)(
                "option recordType", record_type),
            split=opts.get("split") or None,
            compression=(normalize_compression(opts["compression"]) if "compression" in opts
                         else "auto"),
            sample_records=number("schemasamplerecords", 1000),
            sample_files=number("schemasamplefiles", 1024),
            verify=_bool_text("verify", opts.get("verify", "true")))

