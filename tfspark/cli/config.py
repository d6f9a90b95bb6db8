"""The jobs' settings: frozen dataclasses loaded from TOML files by one loader (`load_toml`):
ExportConfig (conf/export.toml) and TrainConfig (conf/train.toml).

Every key of a file is a field of its dataclass; unknown keys, wrong TOML types and bad values
are refused with an OptionError naming the key and the file, so a typo never silently falls back
to a default. Command-line flags are applied on top (`ExportConfig.with_overrides`). The export
keys that are write settings end up in a tfspark.store.options.WriteOptions, which checks them once
more as every entry point's write settings are checked (`ExportConfig.write_options`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfspark.arrow.encode import NULL_ELEMENT_POLICIES as NULL_ELEMENTS
from tfspark.errors import OptionError
from tfspark.spec.kinds import DECIMAL_AS, RECORD_TYPES
from tfspark.store.options import WRITE_MODES as MODES
from tfspark.store.options import WriteOptions

SOURCE_FORMATS = ("auto", "table", "parquet", "csv")


@dataclass(frozen=True)
class ExportConfig:
    """What `tfspark export` and jobs/export_tfrecords.py do. Paths are relative to the CWD."""

    # Input: None means the embedded sample table (tfspark.cli.sample), else a catalog table,
    # a parquet/CSV file or a directory of them.
    source: str | None = None
    source_format: str = "auto"  # auto | table | parquet | csv
    csv_header: bool = True
    csv_infer_schema: bool = True
    sample_rows: int = 100_000
    # Output.
    output: str | None = None
    mode: str = "errorifexists"
    label_cols: tuple[str, ...] = ()
    compression: str | None = None  # None | "gzip"
    backup_table: str | None = None
    backup_path: str | None = None
    split: Mapping[str, float] | None = None
    split_key: str | None = None
    seed: int = 0  # of the split/shuffle draws, and of the embedded sample
    shuffle: bool = False
    target_file_mb: float = 128.0
    max_records_per_file: int | None = None
    rows_per_record: int = 1
    record_type: str = "Example"  # Example | SequenceExample
    stats: bool = True  # feature statistics in the manifest (keras_preprocessing builds on them)
    stats_top_k: int = 10_000
    partition_by: tuple[str, ...] = ()
    shapes: Mapping[str, tuple[int, ...]] | None = None
    defaults: Mapping[str, Any] | None = None
    null_elements: str = "error"
    decimal_as: str = "float32"
    # Local Spark session (ignored under spark-submit, which brings its own session).
    warehouse: str = "warehouse"
    master: str = "local[*]"
    app_name: str = "tfspark-export"

    def with_overrides(self, **flags: Any) -> ExportConfig:
        """A new config with the given fields replaced; None means "not given" and is skipped."""
        given = _check({k: v for k, v in flags.items() if v is not None}, "command line")
        # One backup destination: a flag naming one kind replaces the file's other kind.
        if "backup_path" in given and "backup_table" not in given:
            given["backup_table"] = None
        elif "backup_table" in given and "backup_path" not in given:
            given["backup_path"] = None
        return dataclasses.replace(self, **given)

    def source_kind(self) -> str:
        """table | parquet | csv: source_format, or for "auto" a guess from the name."""
        src = self.source
        if self.source_format != "auto" or src is None:
            return self.source_format
        low = src.lower().rstrip("/")
        if low.endswith(".parquet"):
            return "parquet"
        if low.endswith((".csv", ".csv.gz")):
            return "csv"
        path = Path(src)
        if "://" not in src and path.is_dir():
            names = [p.name.lower() for p in path.rglob("*") if p.is_file()]
            csv = any(n.endswith((".csv", ".csv.gz")) for n in names)
            return "csv" if csv and not any(n.endswith(".parquet") for n in names) else "parquet"
        # Table names never hold "/"; a path may live on the cluster's filesystem, not here.
        return "parquet" if "/" in src or path.exists() else "table"

    def write_options(self) -> WriteOptions:
        """The checked write settings of this export (OptionError for a bad one, or none)."""
        if not self.output:
            raise OptionError("no output path: pass --output, or set 'output' in the --config "
                              "file")
        return WriteOptions.from_arguments(self.output, **self.write_kwargs())

    def write_kwargs(self) -> dict[str, Any]:
        """The WriteOptions fields of this export (everything but path): write_tfrecords'
        keyword arguments, but for stats=, which is the field feature_stats."""
        return {
            "label_cols": self.label_cols, "compression": self.compression, "mode": self.mode,
            "backup_table": self.backup_table, "backup_path": self.backup_path,
            "split": dict(self.split) if self.split else None, "split_key": self.split_key,
            "seed": self.seed, "shuffle": self.shuffle,
            "target_file_bytes": int(self.target_file_mb * 2**20),
            "max_records_per_file": self.max_records_per_file,
            "rows_per_record": self.rows_per_record, "record_type": self.record_type,
            "feature_stats": self.stats, "stats_top_k": self.stats_top_k,
            "partition_by": self.partition_by,
            "shapes": {k: list(v) for k, v in self.shapes.items()} if self.shapes else None,
            "defaults": dict(self.defaults) if self.defaults else None,
            "null_elements": self.null_elements, "decimal_as": self.decimal_as,
        }


KEYS = tuple(f.name for f in dataclasses.fields(ExportConfig))


def load_toml(path: str | Path) -> dict[str, Any]:
    """The top-level table of a TOML file; OptionError names a missing or invalid file."""
    toml = _toml_module()
    try:
        with open(path, "rb") as f:
            return toml.load(f)
    except FileNotFoundError:
        raise OptionError(f"config file {str(path)!r} not found") from None
    except toml.TOMLDecodeError as e:
        raise OptionError(f"config file {str(path)!r} is not valid TOML: {e}") from None


def load_config(path: str | Path) -> ExportConfig:
    """Read a TOML file whose top-level keys are ExportConfig fields."""
    return ExportConfig(**_check(load_toml(path), str(path)))


def _toml_module() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:  # pragma: no cover - Python 3.10 only
        import tomli

        return tomli
    except ImportError:  # pragma: no cover
        raise OptionError("reading TOML config files on Python 3.10 needs the 'tomli' package "
                          "(pip install tomli), or use Python 3.11+") from None


# ---------------------------------------------------------------- validation, one rule per key

def _check(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        rule = _RULES.get(key)
        if rule is None:
            raise OptionError(f"unknown key {key!r} in {where}; allowed keys are "
                              f"{', '.join(KEYS)}")
        out[key] = rule(key, value, where)
    return out


def _bad(key: str, value: Any, where: str, want: str) -> OptionError:
    return OptionError(f"key {key!r} in {where} must be {want}, got {type(value).__name__} "
                       f"{value!r}")


def _str(key: str, value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(key, value, where, "a non-empty string")
    return value


def _bool(key: str, value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _bad(key, value, where, "true or false")
    return value


def _int(key: str, value: Any, where: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _bad(key, value, where, f"an integer >= {low}")
    return value


def _positive(key: str, value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
            or math.isinf(value):
        raise _bad(key, value, where, "a positive number")
    return float(value)


def _choice(choices: tuple[str, ...]):
    def rule(key: str, value: Any, where: str) -> str:
        if not isinstance(value, str) or value.lower() not in choices:
            raise _bad(key, value, where, f"one of {', '.join(choices)}")
        return value.lower()
    return rule


def _record_type(key: str, value: Any, where: str) -> str:
    """Example | SequenceExample, in any case."""
    for name in RECORD_TYPES:
        if isinstance(value, str) and value.lower() == name.lower():
            return name
    raise _bad(key, value, where, f"one of {', '.join(RECORD_TYPES)}")


def _compression(key: str, value: Any, where: str) -> str | None:
    if not isinstance(value, str) or value.lower() not in ("none", "", "gzip"):
        raise _bad(key, value, where, "'gzip' or 'none'")
    return "gzip" if value.lower() == "gzip" else None


def _names(key: str, value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):  # "a,b" from the command line, or one name
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise _bad(key, value, where, "a list of column names")
    return tuple(value)


def _split(key: str, value: Any, where: str) -> dict[str, float] | None:
    if isinstance(value, str):  # "train=0.8,test=0.2" from the command line
        pairs = [p.split("=", 1) for p in value.split(",") if p.strip()]
        if not all(len(p) == 2 for p in pairs):
            raise _bad(key, value, where, "name=fraction pairs like 'train=0.8,test=0.2'")
        try:
            value = {n.strip(): float(f) for n, f in pairs}
        except ValueError:
            raise _bad(key, value, where, "name=fraction pairs like 'train=0.8,test=0.2'") \
                from None
    if not isinstance(value, Mapping):
        raise _bad(key, value, where, "a table of split name = fraction")
    if not value:
        return None  # an empty table means no split
    return {str(k): _positive(f"{key}.{k}", v, where) for k, v in value.items()}


def _shapes(key: str, value: Any, where: str) -> dict[str, tuple[int, ...]]:
    if not isinstance(value, Mapping):
        raise _bad(key, value, where, "a table of column = [n]")
    out = {}
    for name, shape in value.items():
        if not isinstance(shape, (list, tuple)):
            raise _bad(f"{key}.{name}", shape, where, "a list of ints like [8]")
        out[str(name)] = tuple(_int(f"{key}.{name}", n, where) for n in shape)
    return out


def _defaults(key: str, value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(key, value, where, "a table of column = default value")
    for name, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise _bad(f"{key}.{name}", v, where, "a number or a string")
    return dict(value)


def _optional(rule):
    # TOML has no null: "" or "none" is how a file says "unset" for an optional string.
    def wrapped(key: str, value: Any, where: str):
        if isinstance(value, str) and value.strip().lower() in ("", "none"):
            return None
        return rule(key, value, where)
    return wrapped


_RULES = {
    "source": _optional(_str),
    "source_format": _choice(SOURCE_FORMATS),
    "csv_header": _bool,
    "csv_infer_schema": _bool,
    "sample_rows": lambda k, v, w: _int(k, v, w, low=1),
    "output": _str,
    "mode": _choice(MODES),
    "label_cols": _names,
    "compression": _compression,
    "backup_table": _optional(_str),
    "backup_path": _optional(_str),
    "split": _split,
    "split_key": _optional(_str),
    "seed": _int,
    "shuffle": _bool,
    "target_file_mb": _positive,
    "max_records_per_file": _optional(lambda k, v, w: _int(k, v, w, low=1)),
    "rows_per_record": lambda k, v, w: _int(k, v, w, low=1),
    "record_type": _record_type,
    "stats": _bool,
    "stats_top_k": lambda k, v, w: _int(k, v, w, low=1),
    "partition_by": _names,
    "shapes": _shapes,
    "defaults": _defaults,
    "null_elements": _choice(NULL_ELEMENTS),
    "decimal_as": _choice(DECIMAL_AS),
    "warehouse": _str,
    "master": _str,
    "app_name": _str,
}


# ---------------------------------------------------------------- the train job

@dataclass(frozen=True)
class TrainConfig:
    """Settings of the train job (conf/train.toml). Paths are relative to the CWD."""

    data: str = "out/sample_tfrecords"  # a tfspark directory (with or without splits)
    label: str | None = None  # None: the spec's label column (there must be exactly one)
    batch_size: int = 256
    epochs: int = 3
    steps_per_epoch: int | None = None  # None: one full pass over the train split per epoch
    learning_rate: float = 1e-3
    model_out: str = "out/model.keras"
    train_split: str = "train"  # used when the data set has splits
    validation_split: str = "validation"  # used when present
    exclude: tuple[str, ...] = ()  # features never used (e.g. row ids)
    max_vocab: int = 1000  # most frequent values kept per category (the rest: out of vocabulary)
    one_hot_max: int = 10  # categories with at most this many values are one-hot, else embedded
    categorical: tuple[str, ...] = ()  # integer features that are categories (ids, codes)
    use_stats: bool = True  # preprocessing from the export's statistics; false: adapt on a sample
    embedding_dim: int = 8
    hidden_units: tuple[int, ...] = (64, 32)
    adapt_batches: int = 20  # batches read to adapt Normalization and vocabularies
    bench_batches: int = 50  # batches read to measure input examples/s
    shuffle_buffer: int | None = None  # None: 10 * batch_size
    seed: int | None = 0
    verbose: int = 2  # Keras fit verbosity
    # Distributed training (tfspark.train_on_spark): workers > 1 trains on that many Spark
    # tasks at once, under MultiWorkerMirroredStrategy; batch_size is then the global batch.
    workers: int = 1
    master: str = "local[*]"  # the Spark master when no session is running (spark-submit sets it)
    checkpoint_dir: str | None = None  # shared; None: <model_out without .keras>.checkpoints

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "config") -> TrainConfig:
        """A TrainConfig from {key: value}; OptionError names an unknown key or a bad value and
        `where` it came from.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        out: dict[str, Any] = {}
        for key, value in values.items():
            if key not in fields:
                raise OptionError(f"unknown key {key!r} in {where}; allowed keys are "
                                  f"{', '.join(fields)}")
            out[key] = _check_train_value(key, value, where)
        cfg = cls(**out)
        if not cfg.model_out.endswith(".keras"):
            raise OptionError(f"model_out in {where} must end with '.keras' (the Keras 3 "
                              f"format), got {cfg.model_out!r}")
        return cfg


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read conf/train.toml; overrides (None = not given) are applied on top."""
    doc = load_toml(path)
    doc.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig.from_mapping(doc, str(path))


def _check_train_value(key: str, value: Any, where: str) -> Any:
    optional = key in ("label", "steps_per_epoch", "shuffle_buffer", "seed", "checkpoint_dir")
    if optional and (value is None or (isinstance(value, str) and
                                       value.strip().lower() in ("", "none"))):
        return None
    if key == "use_stats":
        if not isinstance(value, bool):
            raise OptionError(f"key {key!r} in {where} must be true or false, got {value!r}")
        return value
    if key in ("exclude", "hidden_units", "categorical"):
        kind = int if key == "hidden_units" else str
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, kind) and not isinstance(v, bool) for v in value):
            raise OptionError(f"key {key!r} in {where} must be a list of {kind.__name__}, "
                              f"got {value!r}")
        return tuple(value)
    if key == "learning_rate":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
            and math.isfinite(value)
        if not ok:
            raise OptionError(f"key {key!r} in {where} must be a positive number, got {value!r}")
        return float(value)
    if key in ("label", "data", "model_out", "train_split", "validation_split", "master",
               "checkpoint_dir"):
        if not isinstance(value, str) or not value:
            raise OptionError(f"key {key!r} in {where} must be a non-empty string, got "
                              f"{value!r}")
        return value
    low = 0 if key in ("shuffle_buffer", "seed", "verbose", "adapt_batches",
                       "bench_batches", "one_hot_max") else 1
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise OptionError(f"key {key!r} in {where} must be an integer >= {low}, got {value!r}")
    return value
