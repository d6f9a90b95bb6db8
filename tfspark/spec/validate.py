"""A spec's JSON document, checked field by field (mirrors schemas/feature_spec.schema.json).

Returns plain values for spec.model to build Feature and FeatureSpec from, so this module
needs nothing of the model (no import cycle). Every problem is a SchemaError naming the feature
and the field.
"""

from __future__ import annotations

from typing import Any

from tfspark.errors import SchemaError
from tfspark.spec.kinds import (
    DTYPES,
    ENCODINGS,
    FLOAT_WORDS,
    FORMAT,
    KINDS,
    RECORD_TYPES,
    VERSION,
    fits_float32,
)

_REQUIRED = ("name", "path", "kind", "dtype", "encoding", "source_type", "shape", "nullable",
             "label")
_ALLOWED = set(_REQUIRED) | {"default"}


def check_spec_dict(doc: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None, Any]:
    """(keyword arguments of each Feature, source schema, record type) of a spec's JSON object.

    Raises SchemaError naming the feature and field that are wrong (unknown format or version,
    missing or unknown fields, bad kind, dtype, shape or default).
    """
    if not isinstance(doc, dict):
        raise SchemaError(f"feature spec must be a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise SchemaError(f"not a tfspark feature spec: 'format' is {doc.get('format')!r}, "
                          f"expected {FORMAT!r}")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise SchemaError(f"feature spec version {doc.get('version')!r} is not supported by "
                          f"this tfspark (reads version {VERSION}); upgrade tfspark")
    extra = set(doc) - {"format", "version", "features", "source_schema", "record_type"}
    if extra:
        raise SchemaError(f"feature spec has unknown top-level field(s) {sorted(extra)}")
    feats = doc.get("features")
    if not isinstance(feats, list):
        raise SchemaError("feature spec field 'features' must be a list")
    schema = doc.get("source_schema")
    if schema is not None and not isinstance(schema, dict):
        raise SchemaError("feature spec field 'source_schema' must be an object (a Spark "
                          "StructType as JSON)")
    record_type = doc.get("record_type", "Example")
    if record_type not in RECORD_TYPES:
        raise SchemaError(f"feature spec field 'record_type' must be one of "
                          f"{list(RECORD_TYPES)}, got {record_type!r}")
    return [_feature(i, d) for i, d in enumerate(feats)], schema, record_type


def _feature(i: int, d: Any) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise SchemaError(f"features[{i}] must be an object, got {type(d).__name__}")
    label = repr(d.get("name", f"features[{i}]"))
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise SchemaError(f"feature {label} is missing field(s) {missing}")
    extra = set(d) - _ALLOWED
    if extra:
        raise SchemaError(f"feature {label} has unknown field(s) {sorted(extra)}")

    def check(ok: bool, what: str) -> None:
        if not ok:
            raise SchemaError(f"feature {label}: {what}")

    check(isinstance(d["name"], str) and d["name"] != "", "'name' must be a non-empty string")
    check(isinstance(d["path"], list) and len(d["path"]) > 0
          and all(isinstance(p, str) for p in d["path"]), "'path' must be a list of strings")
    check(d["kind"] in KINDS, f"'kind' must be one of {list(KINDS)}, got {d['kind']!r}")
    check(d["dtype"] in DTYPES, f"'dtype' must be one of {list(DTYPES)}, got {d['dtype']!r}")
    check(d["encoding"] in ENCODINGS,
          f"'encoding' must be one of {list(ENCODINGS)}, got {d['encoding']!r}")
    check(isinstance(d["source_type"], str), "'source_type' must be a string")
    shape = d["shape"]
    check(isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)
          and len(shape) <= 1, "'shape' must be [] or [n] with n >= 0")
    check(d["kind"] == "fixed" or shape == [], "'shape' must be [] unless kind is 'fixed'")
    check(type(d["nullable"]) is bool, "'nullable' must be true or false")
    check(type(d["label"]) is bool, "'label' must be true or false")
    default = d.get("default")
    if "default" in d:
        check(d["kind"] == "fixed" and d["nullable"],
              "'default' is only allowed on nullable fixed features")
        default = _default(d["dtype"], default, check)
    else:
        check(not (d["kind"] == "fixed" and d["nullable"]),
              "a nullable fixed feature needs a 'default'")
    return {"name": d["name"], "path": tuple(d["path"]), "kind": d["kind"], "dtype": d["dtype"],
            "encoding": d["encoding"], "source_type": d["source_type"], "shape": tuple(shape),
            "nullable": d["nullable"], "default": default, "label": d["label"]}


def _default(dtype: str, value: Any, check: Any) -> Any:
    if dtype == "float32":
        if isinstance(value, str):
            check(value in FLOAT_WORDS, f"float default must be a number or one of "
                                        f"{list(FLOAT_WORDS)}, got {value!r}")
            return FLOAT_WORDS[value]
        check(isinstance(value, (int, float)) and type(value) is not bool
              and fits_float32(value),
              f"float default must be a number within float32 range, got {value!r}")
        return float(value)
    if dtype == "int64":
        check(type(value) is int and -(2**63) <= value < 2**63,
              f"int64 default must be an integer in int64 range, got {value!r}")
        return value
    check(isinstance(value, str), f"string default must be a string, got {value!r}")
    return value
