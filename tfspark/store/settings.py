"""What a setting is, and the value checks and parsers the tables of settings (store.options:
WriteOptions, the writers'; ReadOptions, the readers') are written with. No pyspark, no
TensorFlow.

A `Setting` knows its names on every surface (write_tfrecords keyword = config key = export
flag with dashes; the data source's option name), its default, its check (every value passes
it, whatever the surface), how a string becomes a value (data-source options, command-line
flags, TOML strings where a string is a natural spelling) and its help text. A `Where` names the
place a value came from in error messages, so a message names the argument, option, flag or
config key the caller used.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfspark.errors import OptionError

WRITE_MODES = ("errorifexists", "overwrite", "append", "ignore")
_MODE_ALIASES = {"error": "errorifexists", "default": "errorifexists"}
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class Where:
    """Where a value came from: `name` as its message names it ("gzip_level", "option gzipLevel",
    "key 'gzip_level' in export.toml"), and how to name an entry of a table value."""

    name: str
    key: str = ""  # a config key: entries are named "key 'split.train' in <file>"
    file: str = ""

    def sub(self, sub: str) -> str:
        """The name of an entry of a table value: "shapes['emb']" or "key 'shapes.emb' in f"."""
        return f"key '{self.key}.{sub}' in {self.file}" if self.key else f"{self.name}[{sub!r}]"

    def entry(self, sub: str) -> str:
        """An entry of a table value: "" for Python arguments, else " (key 'x.sub' in f)"."""
        return f" (key '{self.key}.{sub}' in {self.file})" if self.key else ""

    @classmethod
    def config(cls, key: str, where: str) -> Where:
        """A key of a config file (or of "command line")."""
        return cls(f"key {key!r} in {where}", key, where)


Check = Callable[[Where, Any], Any]
Parse = Callable[[Where, str], Any]


@dataclass(frozen=True)
class Setting:
    """One write setting: its names, default, check, string parser and help (module docstring).

    `workflow`: a write_tfrecords keyword, an export config key and flag. `option`: the data
    source's option name (None: not an option). `typed`: a number or a boolean, which TOML and
    argparse give typed (a TOML string is an error, not parsed). `config`: the config key and
    flag when they differ from `name` (a positive number with `config_default`, which
    `to_value` converts to the setting's value).
    """

    default: Any
    check: Check
    help: str
    option: str | None = None
    text: Parse | None = None  # None: the string as it is
    workflow: bool = True
    typed: type | None = None  # int, float or bool
    choices: tuple[str, ...] | None = None  # shown by --help and argparse
    config: str | None = None
    config_default: Any = None  # the config key's default, when it is a key of its own
    to_value: Callable[[Any], Any] | None = None  # config value -> the setting's value
    source_default: Any = None  # the data source's default, when it differs ("mode")
    readers: tuple[str, ...] = ()  # a read option: the readers that take it
    name: str = field(default="", compare=False)  # set from the table

    @property
    def config_key(self) -> str:
        """The export config key and flag name (with dashes) of this setting."""
        return self.config or self.name

    @property
    def config_value(self) -> Any:
        """The export config key's default."""
        return self.config_default if self.config else self.default

    def parse(self, where: Where, text: Any) -> Any:
        """A string (or an already typed value) from an option, a flag or a TOML file."""
        if self.text is None or not isinstance(text, str):
            return text
        return self.text(where, text)


# ---------------------------------------------------------------- checks: Python values

def is_int(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def mode(where: Where, value: Any) -> str:
    """A save mode (any case; error/default mean errorifexists)."""
    m = _MODE_ALIASES.get(str(value).lower(), str(value).lower())
    if m not in WRITE_MODES:
        raise OptionError(f"{where.name} {value!r} is not valid; use one of {list(WRITE_MODES)}")
    return m


def optional_mode(where: Where, value: Any) -> str | None:
    """A save mode, or None (the data source: the mode Spark passes)."""
    return None if value is None else mode(where, value)


def choice(allowed: tuple[str, ...]) -> Check:
    """One of `allowed`, in any case, returned as spelled there."""
    def check(where: Where, value: Any) -> str:
        for a in allowed:
            if str(value).lower() == a.lower():
                return a
        raise OptionError(f"{where.name}={value!r} is not valid; use one of {list(allowed)}")
    return check


def positive(where: Where, value: Any) -> int:
    """An int > 0."""
    if not is_int(value) or value <= 0:
        raise OptionError(f"{where.name} must be a positive integer, got {value!r}")
    return int(value)


def optional_positive(where: Where, value: Any) -> int | None:
    """An int > 0, or None."""
    if value is None:
        return None
    if not is_int(value) or value <= 0:
        raise OptionError(f"{where.name} must be a positive integer or None, got {value!r}")
    return int(value)


def in_range(low: int, high: int, hint: str = "") -> Check:
    """An int from low to high."""
    def check(where: Where, value: Any) -> int:
        if not is_int(value) or not low <= value <= high:
            raise OptionError(f"{where.name} must be an integer from {low} to {high}, got "
                              f"{value!r}{hint}")
        return int(value)
    return check


def integer(where: Where, value: Any) -> int:
    """Any int."""
    if not is_int(value):
        raise OptionError(f"{where.name} must be an integer, got {value!r}")
    return int(value)


def boolean(where: Where, value: Any) -> bool:
    """True or False."""
    if not isinstance(value, bool):
        raise OptionError(f"{where.name} must be True or False, got {value!r}")
    return value


def column_names(where: Where, value: Any) -> tuple[str, ...]:
    """A column name or an iterable of them, as a tuple."""
    if isinstance(value, str):
        return (value,)
    try:
        names = list(value)
    except TypeError:
        names = None
    if names is None or not all(isinstance(n, str) and n for n in names):
        raise OptionError(f"{where.name} must be a column name or a list of column names, got "
                          f"{value!r}")
    return tuple(names)


def optional_str(where: Where, value: Any) -> str | None:
    """A non-empty string, or None."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise OptionError(f"{where.name} must be a non-empty string or None, got {value!r}")
    return value


def shapes(where: Where, value: Any) -> dict[str, Any] | None:
    """{column: [n]} or None; each shape a list of ints (infer_spec checks them further)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise OptionError(f"{where.name} must be a dict, got {type(value).__name__} {value!r}")
    out = {}
    for name, shape in value.items():
        if where.key and (not isinstance(shape, (list, tuple)) or not all(map(is_int, shape))):
            raise OptionError(f"{where.sub(str(name))} must be a list of ints like [8], got "
                              f"{shape!r}")
        out[str(name)] = shape
    return out


def defaults(where: Where, value: Any) -> dict[str, Any] | None:
    """{column: fill value} or None; each a number or a string (infer_spec checks its type)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise OptionError(f"{where.name} must be a dict, got {type(value).__name__} {value!r}")
    for name, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise OptionError(f"{where.sub(str(name))} must be a number or a string, got "
                              f"{type(v).__name__} {v!r}")
    return dict(value)


def split(where: Where, value: Any) -> dict[str, float] | None:
    """{split name: fraction} with fractions in [0, 1] summing to 1, or None."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise OptionError(f"{where.name} must be a non-empty dict of name -> fraction, got "
                          f"{value!r}")
    for name, frac in value.items():
        if not isinstance(name, str) or not _SPLIT_NAME.match(name):
            raise OptionError(f"split name {name!r} must use letters, digits, '_' or '-' (it "
                              f"becomes a directory name){where.entry(str(name))}")
        if not isinstance(frac, (int, float)) or isinstance(frac, bool) or not 0 <= frac <= 1:
            raise OptionError(f"split fraction for {name!r} must be in [0, 1], got "
                              f"{frac!r}{where.entry(name)}")
    total = sum(value.values())
    if abs(total - 1.0) > 1e-6:
        raise OptionError(f"split fractions must sum to 1, got {total:g} for {dict(value)}"
                          f"{' (' + where.name + ')' if where.key else ''}")
    return {str(k): float(v) for k, v in value.items()}


def compression(where: Where, value: Any) -> str | None:
    """None | "gzip" from None, "", "none" or "gzip" (any case)."""
    if value is None or (isinstance(value, str) and value.lower() in ("", "none", "gzip")):
        return "gzip" if value and value.lower() == "gzip" else None
    raise OptionError(f"{where.name}={value!r} is not valid; use 'gzip' or 'none' (also None "
                      f"or '')")


def positive_number(where: Where, value: Any) -> float:
    """A finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
            or math.isinf(value):
        raise OptionError(f"{where.name} must be a positive number, got "
                          f"{type(value).__name__} {value!r}")
    return float(value)


# ---------------------------------------------------------------- checks: the readers' values

def optional_names(where: Where, value: Any) -> tuple[str, ...] | None:
    """None, or a column name or a list of them (as a tuple)."""
    return None if value is None else column_names(where, value)


def batch_size(where: Where, value: Any) -> int:
    """An int >= 1."""
    if not is_int(value) or value < 1:
        raise OptionError(f"{where.name} must be a positive int, got {value!r}")
    return int(value)


def shuffle_buffer(where: Where, value: Any) -> int | None:
    """None (10 batches) or an int >= 0 (0: no shuffling)."""
    if value is not None and (not is_int(value) or value < 0):
        raise OptionError(f"{where.name} must be an int >= 0 (0: no shuffling) or None, got "
                          f"{value!r}")
    return value


def optional_seed(where: Where, value: Any) -> int | None:
    """None or an int."""
    if value is not None and not is_int(value):
        raise OptionError(f"{where.name} must be an int or None, got {value!r}")
    return value


def epochs(where: Where, value: Any) -> int | None:
    """An int >= 1, or None (repeat forever)."""
    if value is not None and (not is_int(value) or value < 1):
        raise OptionError(f"{where.name} must be a positive int, or None to repeat forever, got "
                          f"{value!r}")
    return value


def optional_count(where: Where, value: Any) -> int | None:
    """None or an int >= 1."""
    if value is not None and (not is_int(value) or value < 1):
        raise OptionError(f"{where.name} must be a positive int or None, got {value!r}")
    return value


def parallel_reads(where: Where, value: Any) -> int:
    """An int >= 1, or AUTOTUNE (-1)."""
    if not is_int(value) or (value < 1 and value != -1):
        raise OptionError(f"{where.name} must be a positive int or AUTOTUNE (-1), got {value!r}")
    return int(value)


def shard(where: Where, value: Any) -> tuple[int, int] | None:
    """None or (num_workers, index) with 0 <= index < num_workers."""
    if value is None:
        return None
    ok = (isinstance(value, (tuple, list)) and len(value) == 2 and all(map(is_int, value))
          and value[0] >= 1 and 0 <= value[1] < value[0])
    if not ok:
        raise OptionError(f"{where.name} must be (num_workers, index) with 0 <= index < "
                          f"num_workers, got {value!r}")
    return (int(value[0]), int(value[1]))


def read_compression(where: Where, value: Any) -> str | None:
    """None (found from each file's first bytes), "gzip" or "none"."""
    if value is not None and (not isinstance(value, str) or
                              value.lower() not in ("gzip", "none", "")):
        raise OptionError(f"{where.name}={value!r} is not valid; use 'gzip' or 'none', or None "
                          f"to find it from each file's first bytes")
    return value


def cache(where: Where, value: Any) -> bool | str:
    """True/False, or a file path."""
    if not isinstance(value, (bool, str)):
        raise OptionError(f"{where.name} must be True/False or a file path, got {value!r}")
    return value


def anything(where: Where, value: Any) -> Any:
    """Any value: what takes it checks it (a filesystem, a spec, a state)."""
    return value


def optional_mapping_or_name(where: Where, value: Any) -> Any:
    """None, a name (a split), or a mapping."""
    if value is not None and not isinstance(value, (str, Mapping)):
        raise OptionError(f"{where.name} must be a split's name or a dict, got "
                          f"{type(value).__name__}")
    return value


def pad_to(where: Where, value: Any) -> Any:
    """None, an int >= 1, or {feature: int >= 1}."""
    widths = value.values() if isinstance(value, Mapping) else [value]
    if value is not None and not all(is_int(w) and w >= 1 for w in widths):
        raise OptionError(f"{where.name} must be a positive int or a dict of them, got {value!r}")
    return value


def stack(where: Where, value: Any) -> Any:
    """None or {name: [feature, ...]} (what each names is checked against the data)."""
    if value is not None and not isinstance(value, Mapping):
        raise OptionError(f"{where.name} must be a dict {{name: [feature, ...]}}, got {value!r}")
    return value


def state(where: Where, value: Any) -> Any:
    """None, a saved state (a dict: the reader checks it), or the saved states of every worker
    of a run (a list of dicts), to resume on another number of workers."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, Mapping) for v in value):
        return list(value)
    if value is not None and not isinstance(value, Mapping):
        raise OptionError(f"{where.name}: not a read_batches state (a dict from "
                          f"reader.state_dict(), or a list of every worker's); got "
                          f"{type(value).__name__}")
    return value


def one_of(allowed: tuple[str, ...]) -> Check:
    """One of `allowed`, exactly."""
    def check(where: Where, value: Any) -> str:
        if value not in allowed:
            raise OptionError(f"{where.name} must be one of {list(allowed)}, got {value!r}")
        return str(value)
    return check


# ---------------------------------------------------------------- parsers: strings

def int_text(where: Where, text: str) -> int:
    """A string holding an integer."""
    try:
        return int(text.strip())
    except ValueError:
        raise OptionError(f"{where.name}={text!r} must be an integer") from None


def bool_text(where: Where, text: str) -> bool:
    """"true" or "false", in any case."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"{where.name}={text!r} must be true or false")
    return value == "true"


def names_text(where: Where, text: str) -> tuple[str, ...]:
    """"a,b,c" -> ("a", "b", "c"); "" -> ()."""
    if not text.strip():
        return ()
    names = tuple(v.strip() for v in text.split(","))
    if any(not n for n in names):
        raise OptionError(f"{where.name}: column list {text!r} has an empty name; use 'a,b,c'")
    return names


def json_text(where: Where, text: str) -> dict[str, Any]:
    """A JSON object."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"{where.name} must be a JSON object: {e}") from None
    if not isinstance(doc, dict):
        raise OptionError(f"{where.name} must be a JSON object, got {type(doc).__name__}")
    return doc


def split_text(where: Where, text: str) -> dict[str, float] | None:
    """"train=0.8,test=0.2" -> {"train": 0.8, "test": 0.2}; "" -> None."""
    pairs = [p.split("=", 1) for p in text.split(",") if p.strip()]
    if not pairs:
        return None
    try:
        if not all(len(p) == 2 for p in pairs):
            raise ValueError
        return {n.strip(): float(f) for n, f in pairs}
    except ValueError:
        raise OptionError(f"{where.name} must be name=fraction pairs like 'train=0.8,test=0.2', "
                          f"got {text!r}") from None


def none_text(where: Where, text: str) -> str | None:
    """A string, with "" and "none" (any case) meaning unset (TOML has no null)."""
    return None if text.strip().lower() in ("", "none") else text
