"""The jobs' settings: frozen dataclasses loaded from TOML files by one loader (`load_toml`):
ExportConfig (export.toml) and TrainConfig (train.toml): `tfspark export --print-config` and
`tfspark train --print-config` print the commented ones installed with tfspark.

Every key of a file is a field of its dataclass; unknown keys, wrong TOML types and bad values
are refused with an OptionError naming the key and the file, so a typo never silently falls back
to a default. Command-line flags are applied on top (`ExportConfig.with_overrides`). The export
keys are the job's own (source, session) plus every write setting of the table in
tfspark.store.options.WriteOptions (`write_settings()`): keys, defaults and checks come from
there, and `ExportConfig.write_options` checks them once more as every entry point's are.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfspark.errors import OptionError, did_you_mean
from tfspark.store.fs import check_store_table, store_filesystem
from tfspark.store.options import WriteOptions, write_settings
from tfspark.store.settings import Setting, Where, positive_number
from tfspark.store.uris import local_only

SOURCE_FORMATS = ("auto", "table", "parquet", "csv")


class _Export:
    """The methods of ExportConfig, whose fields are the job's keys (_JOB_KEYS) and every
    workflow write setting of the table."""

    def with_overrides(self, **flags: Any) -> Any:
        """A new config with the given fields replaced; None means "not given" and is skipped."""
        given = _check({k: v for k, v in flags.items() if v is not None}, "command line")
        # One backup destination: a flag naming one kind replaces the file's other kind.
        if "backup_path" in given and "backup_table" not in given:
            given["backup_table"] = None
        elif "backup_table" in given and "backup_path" not in given:
            given["backup_path"] = None
        return dataclasses.replace(self, **given)  # type: ignore[type-var]

    def source_kind(self) -> str:
        """table | parquet | csv: source_format, or for "auto" a guess from the name."""
        src = self.source
        if self.source_format != "auto" or src is None:
            return str(self.source_format)
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

    def filesystem(self) -> Any:
        """The output's filesystem from the [store] table (None without one); OptionError for
        a table pyarrow's filesystem refuses."""
        return store_filesystem(self.output or "", self.store,
                                "the export settings (--store FILE, or --config FILE)")

    def write_kwargs(self) -> dict[str, Any]:
        """The write settings of this export: write_tfrecords' keyword arguments (TOML
        tables as plain dicts, shapes as lists)."""
        out = {}
        for key, t in WRITE_KEYS.items():
            value = getattr(self, key)
            if isinstance(value, Mapping):
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}
            out[t.name] = t.to_value(value) if t.to_value else value
        return out

    if TYPE_CHECKING:  # the fields, made from the table below
        def __init__(self, **keys: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...


def _config_rule(t: Setting) -> Callable[[str, Any, str], Any]:
    """The rule of a write setting's config key and flag: TOML strings (and every flag) parsed
    where a string is a natural spelling (never for numbers and booleans), then its check."""
    def rule(key: str, value: Any, where: str) -> Any:
        at = Where.config(key, where)
        if isinstance(value, Mapping) and not value:
            return None  # an empty TOML table: unset
        if t.config:  # a key of its own (target_file_mb): converted when written
            return positive_number(at, value)
        if t.typed is not None and (isinstance(value, bool) != (t.typed is bool)
                                    or not isinstance(value, t.typed)):
            raise _bad(key, value, where, _WANT[t.typed])
        checked = t.check(at, t.parse(at, value))
        if t.name == "shapes" and checked:  # frozen, like every other value here
            checked = {k: tuple(v) for k, v in checked.items()}
        return checked
    return rule


_WANT = {int: "an integer", bool: "true or false"}
# The job's own keys, besides the write settings: (name, default).
_JOB_KEYS: dict[str, Any] = {
    "source": None,  # None: the embedded sample table (tfspark.spark.sample)
    "source_format": "auto",  # auto | table | parquet | csv
    "csv_header": True,
    "csv_infer_schema": True,
    "sample_rows": 100_000,
    "output": None,
    "store": None,  # [store]: pyarrow's filesystem options for an object-store output
    # Local Spark session (ignored under spark-submit, which brings its own session).
    "warehouse": "warehouse",
    "master": "local[*]",
    "app_name": "tfspark-export",
}
WRITE_KEYS = {t.config_key: t for t in write_settings() if t.workflow}
# What `tfspark export` and jobs/export_tfrecords.py do; paths are relative to the CWD.
if TYPE_CHECKING:
    ExportConfig = _Export
else:
    ExportConfig = dataclasses.make_dataclass(
        "ExportConfig", [(k, Any, dataclasses.field(default=v)) for k, v in _JOB_KEYS.items()]
        + [(k, Any, dataclasses.field(default=t.config_value)) for k, t in WRITE_KEYS.items()],
        bases=(_Export,), frozen=True)
    ExportConfig.__module__ = __name__
    ExportConfig.__doc__ = "What `tfspark export` and jobs/export_tfrecords.py do: a frozen " \
        "dataclass of the job's keys and the write settings (paths relative to the CWD)."
KEYS = (*_JOB_KEYS, *WRITE_KEYS)


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


def store_table(path: str | Path) -> dict[str, Any]:
    """The [store] table of a TOML file (`--store FILE`; any config file with one will do)."""
    doc = load_toml(path)
    if "store" not in doc:
        raise OptionError(f"no [store] table in {str(path)!r}: add one whose keys are the "
                          f"options of pyarrow's filesystem for the path (docs/clusters.md)")
    return check_store_table(doc["store"], str(path))


def add_store_arg(p: argparse.ArgumentParser) -> None:
    """--store FILE: pyarrow's filesystem options for an object-store path."""
    p.add_argument("--store", metavar="TOML",
                   help="a TOML file whose [store] table holds the options of pyarrow's "
                        "filesystem for the path's scheme (S3FileSystem, GcsFileSystem, "
                        "AzureFileSystem: endpoint_override, anonymous, account_name, ...); "
                        "overrides a config's [store]")


def filesystem_of(path: str, store_file: str | None) -> Any:
    """The filesystem of a command's path from --store FILE's [store] table; None without
    one (the path opens as it is)."""
    return store_filesystem(path, store_table(store_file), store_file) if store_file else None


def packaged(name: str) -> Path:
    """A config file installed with tfspark ("export.toml", "train.toml"): the settings of the
    demo, commented, which `tfspark export --print-config` prints for a user to start from."""
    return Path(__file__).with_name(name)


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
            raise OptionError(f"unknown key {key!r} in {where}{did_you_mean(key, KEYS)}; "
                              f"allowed keys are {', '.join(KEYS)}")
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


def _choice(choices: tuple[str, ...]) -> Callable[[str, Any, str], str]:
    def rule(key: str, value: Any, where: str) -> str:
        if not isinstance(value, str) or value.lower() not in choices:
            raise _bad(key, value, where, f"one of {', '.join(choices)}")
        return value.lower()
    return rule


def _optional_str(key: str, value: Any, where: str) -> str | None:
    # TOML has no null: "" or "none" is how a file says "unset" for an optional string.
    if isinstance(value, str) and value.strip().lower() in ("", "none"):
        return None
    return _str(key, value, where)


_RULES: dict[str, Callable[[str, Any, str], Any]] = {
    "source": _optional_str,
    "source_format": _choice(SOURCE_FORMATS),
    "csv_header": _bool,
    "csv_infer_schema": _bool,
    "sample_rows": lambda k, v, w: _int(k, v, w, low=1),
    "output": _str,
    "store": lambda k, v, w: check_store_table(v, w),
    "warehouse": _str,
    "master": _str,
    "app_name": _str,
    **{key: _config_rule(t) for key, t in WRITE_KEYS.items()},
}


# ---------------------------------------------------------------- the train job

TRAIN_BACKENDS = ("tensorflow", "jax")  # Keras 3's backends the train job runs on


@dataclass(frozen=True)
class TrainConfig:
    """Settings of the train job (train.toml). Paths are relative to the CWD."""

    data: str = "out/sample_tfrecords"  # a tfspark directory (with or without splits)
    label: str | None = None  # None: the spec's label column (there must be exactly one)
    batch_size: int = 256
    epochs: int = 3
    steps_per_epoch: int | None = None  # None: one full pass over the train split per epoch
    learning_rate: float = 1e-3
    model_out: str = "out/model.keras"
    train_split: str = "train"  # used when the data set has splits
    # None: "validation" or "val", whichever the data set has (none: no validation)
    validation_split: str | None = None
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
    checkpoint_every: int | None = None  # workers > 1: steps between checkpoints; None: epochs
    store: dict[str, Any] | None = None  # [store]: pyarrow's filesystem options for `data`
    backend: str = "tensorflow"  # Keras 3's backend: "tensorflow", or "jax" (no TensorFlow)

    def check_in_process(self, where: str) -> None:
        """OptionError for what a run in this process (not on Spark workers) cannot do."""
        if self.checkpoint_every is not None:
            raise OptionError(f"checkpoint_every in {where} is for training on Spark workers "
                              f"(workers > 1, or a rerun resuming their checkpoints), whose "
                              f"retried stage resumes from the checkpoints; one process takes "
                              f"none: set workers, or leave checkpoint_every out")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "config") -> TrainConfig:
        """A TrainConfig from {key: value}; OptionError names an unknown key or a bad value and
        `where` it came from.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        out: dict[str, Any] = {}
        for key, value in values.items():
            if key not in fields:
                raise OptionError(f"unknown key {key!r} in {where}"
                                  f"{did_you_mean(key, fields)}; allowed keys are "
                                  f"{', '.join(fields)}")
            out[key] = _check_train_value(key, value, where)
        cfg = cls(**out)
        for key in ("model_out", "checkpoint_dir"):  # (found after training, or by Spark)
            local_only(getattr(cfg, key) or "", key, "Keras saves to files", ", or a mounted "
                       "one every worker sees (e.g. /dbfs/... on Databricks); copy the model to "
                       "a store after", where=f" in {where}")
        if not cfg.model_out.endswith(".keras"):
            raise OptionError(f"model_out in {where} must end with '.keras' (the Keras 3 "
                              f"format), got {cfg.model_out!r}")
        return cfg


def load_train_config(path: str | Path, **overrides: Any) -> TrainConfig:
    """Read a train config (TOML); overrides (None = not given) are applied on top."""
    doc = load_toml(path)
    doc.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig.from_mapping(doc, str(path))


def _check_train_value(key: str, value: Any, where: str) -> Any:
    optional = key in ("label", "steps_per_epoch", "shuffle_buffer", "seed", "checkpoint_dir",
                       "checkpoint_every", "validation_split")
    if optional and (value is None or (isinstance(value, str) and
                                       value.strip().lower() in ("", "none"))):
        return None
    if key == "store":
        return check_store_table(value, where)
    if key == "backend":
        if value not in TRAIN_BACKENDS:
            raise OptionError(f"key 'backend' in {where} must be one of {TRAIN_BACKENDS}, got "
                              f"{value!r}")
        return value
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
