"""Data source options -> one frozen WriteOptions, checked on the driver before any task runs.

Names follow the JVM connectors where they overlap (recordType, codec, maxRecordsPerFile).
Spark hands options over with lower-cased keys; we accept any case.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfspark.encode import NULL_ELEMENT_POLICIES
from tfspark.errors import OptionError
from tfspark.framing import normalize_compression

RECORD_TYPES = ("Example", "ByteArray")
WRITE_MODES = ("errorifexists", "overwrite", "append", "ignore")
_MODE_ALIASES = {"error": "errorifexists", "default": "errorifexists"}

# option (lower case) -> what it is; the listing shown when an option is unknown.
WRITE_OPTIONS = {
    "path": "output directory or URI (what save(path) passes)",
    "compression": "none | gzip",
    "codec": "alias of compression (JVM connector name)",
    "gziplevel": "1 (fastest) .. 9 (smallest); default 6, as zlib and TensorFlow",
    "recordtype": "Example (default) | ByteArray (one binary column written raw)",
    "maxrecordsperfile": "roll to a new file after this many records",
    "partitionby": "comma-separated columns; one col=value/ directory per value",
    "mode": "errorifexists | ignore, for the save modes Spark refuses for Python sources",
    "labelcols": "comma-separated label columns, marked in the spec",
    "spec": "a FeatureSpec as JSON; default: inferred from the DataFrame schema",
    "shapes": 'JSON {"col": [n]}: fixed-length array/vector columns',
    "defaults": 'JSON {"col": value}: fill values of nullable columns',
    "nullelements": "error (default) | drop: nulls inside arrays",
    "splitcolumn": "string column naming each row's split directory (used by write_tfrecords)",
    "stats": "JSON object stored in the manifest (used by write_tfrecords)",
}


@dataclass(frozen=True)
class WriteOptions:
    """The checked write options of the tfrecord data source (see WRITE_OPTIONS for each one)."""

    path: str
    compression: str | None = None
    gzip_level: int = 6
    record_type: str = "Example"
    max_records_per_file: int | None = None
    partition_by: tuple[str, ...] = ()
    mode: str | None = None
    label_cols: tuple[str, ...] = ()
    spec_json: str | None = None
    shapes: Mapping[str, Any] | None = None
    defaults: Mapping[str, Any] | None = None
    null_elements: str = "error"
    split_column: str | None = None
    stats: Mapping[str, Any] | None = None


def known_options(options: Mapping[str, Any], known: Mapping[str, str],
                  what: str) -> dict[str, Any]:
    """Options with lower-cased keys; an unknown key is an error listing the known ones."""
    opts = {str(k).lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - set(known))
    if unknown:
        listing = ", ".join(f"{k} ({v})" for k, v in known.items())
        raise OptionError(f"unknown tfrecord {what}(s) {unknown}; known options: {listing}")
    return opts


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check the data source's write options (keys case-insensitive) into a WriteOptions.

    Raises OptionError for an unknown option, a bad value or a missing path.
    """
    opts = known_options(options, WRITE_OPTIONS, "option")
    if not opts.get("path"):
        raise OptionError("no output path: use df.write.format('tfrecord').save(path)")
    if "compression" in opts and "codec" in opts and \
            normalize_compression(opts["compression"]) != normalize_compression(opts["codec"]):
        raise OptionError(f"options compression={opts['compression']!r} and "
                          f"codec={opts['codec']!r} disagree; give one of them")
    record_type = _choice("recordType", opts.get("recordtype", "Example"), RECORD_TYPES)
    mode = opts.get("mode")
    if mode is not None:
        mode = _choice("mode", _MODE_ALIASES.get(mode.lower(), mode.lower()), WRITE_MODES)
    return WriteOptions(
        path=opts["path"],
        compression=normalize_compression(opts.get("compression", opts.get("codec"))),
        gzip_level=_gzip_level(opts.get("gziplevel")),
        record_type=record_type,
        max_records_per_file=positive_int("maxRecordsPerFile", opts.get("maxrecordsperfile")),
        partition_by=_names(opts.get("partitionby")),
        mode=mode,
        label_cols=_names(opts.get("labelcols")),
        spec_json=opts.get("spec"),
        shapes=_json_object("shapes", opts.get("shapes")),
        defaults=_json_object("defaults", opts.get("defaults")),
        null_elements=_choice("nullElements", opts.get("nullelements", "error"),
                              NULL_ELEMENT_POLICIES),
        split_column=opts.get("splitcolumn") or None,
        stats=_json_object("stats", opts.get("stats")),
    )


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    for a in allowed:
        if str(value).lower() == a.lower():
            return a
    raise OptionError(f"option {name}={value!r} is not valid; use one of {list(allowed)}")


def positive_int(name: str, value: Any, default: int | None = None) -> int | None:
    """An option that must be a positive integer; `default` when it is not given."""
    if value is None or str(value).strip() == "":
        return default
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise OptionError(f"option {name}={value!r} must be a positive integer")
    return n


def _gzip_level(value: str | None) -> int:
    if value is None:
        return 6
    if str(value).strip() not in [str(n) for n in range(1, 10)]:
        raise OptionError(f"option gzipLevel={value!r} must be an integer from 1 to 9")
    return int(value)


def _names(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    names = tuple(v.strip() for v in str(value).split(","))
    if any(not n for n in names):
        raise OptionError(f"column list {value!r} has an empty name; use 'a,b,c'")
    return names


def _json_object(name: str, value: str | None) -> Mapping[str, Any] | None:
    if value is None:
        return None
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} must be a JSON object: {e}") from None
    if not isinstance(doc, dict):
        raise OptionError(f"option {name} must be a JSON object, got {type(doc).__name__}")
    return doc
