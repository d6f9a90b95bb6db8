"""Feature and FeatureSpec: what each column becomes in a tf.train.Example, and its JSON form.

Pure data: no pyspark, no TensorFlow. The Spark type mapping is in spec.from_spark, the JSON
checks in spec.validate; the tf.io parsing spec of a spec is built on the TensorFlow side
(tfspark.tf.parsing: tfspark.tf.parsing_spec(spec)).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tfspark.errors import SchemaError
from tfspark.spec.kinds import (
    FORMAT,
    RAGGED_LENGTHS,
    RAGGED_VALUES,
    VERSION,
    DType,
    Encoding,
    Kind,
    RecordType,
    json_float,
)


@dataclass(frozen=True)
class Feature:
    """One feature of the Example. `path` is the column path in the source schema."""

    name: str
    path: tuple[str, ...]
    kind: Kind
    dtype: DType
    encoding: Encoding  # how the source values become dtype (see kinds.Encoding)
    source_type: str  # Spark simpleString of the source column, e.g. "decimal(10,2)"
    shape: tuple[int, ...] = ()  # fixed: () scalar or (n,) array
    nullable: bool = True
    default: Any = None  # fill value at parse time for nullable fixed features
    label: bool = False

    @property
    def required(self) -> bool:
        """Every record must hold it: a fixed feature with no default to fill in (what
        tf.io.FixedLenFeature without default_value means); readers refuse a record without."""
        return self.kind == "fixed" and self.default is None

    @property
    def keys(self) -> tuple[str, ...]:
        """The Example feature keys this feature is stored under."""
        if self.kind == "ragged":
            return (self.name + RAGGED_VALUES, self.name + RAGGED_LENGTHS)
        return (self.name,)

    def to_dict(self) -> dict[str, Any]:
        """The feature as its JSON object in the spec format (see FeatureSpec.to_dict)."""
        out = {
            "name": self.name,
            "path": list(self.path),
            "kind": self.kind,
            "dtype": self.dtype,
            "encoding": self.encoding,
            "source_type": self.source_type,
            "shape": list(self.shape),
            "nullable": self.nullable,
            "label": self.label,
        }
        if self.default is not None:
            out["default"] = json_float(self.default) if self.dtype == "float32" else self.default
        return out


@dataclass(frozen=True)
class FeatureSpec:
    """The immutable description of a TFRecord data set: features in Example key order.

    record_type "SequenceExample": the sequence features are the feature_lists, the others the
    context (each map in key order).
    """

    features: tuple[Feature, ...]
    source_schema: Mapping[str, Any] | None = field(default=None, compare=False)
    record_type: RecordType = "Example"

    def __post_init__(self) -> None:
        check_unique_keys(self.features)
        seq = [f.name for f in self.features if f.kind == "sequence"]
        if seq and self.record_type != "SequenceExample":
            raise SchemaError(f"feature(s) {seq} are feature lists (kind 'sequence'), which only "
                              f"a SequenceExample holds; use record_type='SequenceExample'")

    @property
    def is_sequence(self) -> bool:
        """Whether records are tf.train.SequenceExamples."""
        return self.record_type == "SequenceExample"

    @property
    def names(self) -> list[str]:
        """Feature names, in spec order."""
        return [f.name for f in self.features]

    @property
    def label_names(self) -> list[str]:
        """Names of the label features, in spec order."""
        return [f.name for f in self.features if f.label]

    def check_names(self, names: Iterable[str], what: str,
                    error: type[Exception] = SchemaError) -> None:
        """`error` naming those of `names` (`what` they are, e.g. "columns") that are not
        features of this spec, with its features."""
        known = set(self.names)
        unknown = [n for n in names if n not in known]
        if unknown:
            raise error(f"{what} {unknown} are not features of the data set; its features "
                        f"are {self.names}")

    def __getitem__(self, name: str) -> Feature:
        for f in self.features:
            if f.name == name:
                return f
        raise KeyError(f"no feature {name!r} in the spec; features are {self.names}")

    def with_labels(self, label_cols: Iterable[str]) -> FeatureSpec:
        """A copy whose labels are exactly `label_cols` (SchemaError for a name not in the spec)."""
        wanted = check_labels(self.features, label_cols)
        return replace(self, features=tuple(replace(f, label=f.name in wanted)
                                            for f in self.features))

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready dict: format, version and the features in order."""
        out: dict[str, Any] = {"format": FORMAT, "version": VERSION}
        if self.is_sequence:  # absent means Example: specs written before stay valid
            out["record_type"] = self.record_type
        out["features"] = [f.to_dict() for f in self.features]
        if self.source_schema is not None:
            out["source_schema"] = dict(self.source_schema)
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """The spec as JSON text; FeatureSpec.from_json(spec.to_json()) == spec."""
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> FeatureSpec:
        """Parse a spec from JSON text; raises SchemaError for invalid JSON or an invalid spec."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise SchemaError(f"feature spec is not valid JSON: {e}") from None
        return cls.from_dict(doc)

    @classmethod
    def from_dict(cls, doc: Any) -> FeatureSpec:
        """Parse a spec from its JSON object (as in a manifest's "spec"); raises SchemaError naming
        the field that is wrong.
        """
        from tfspark.spec.validate import check_spec_dict

        features, schema, record_type = check_spec_dict(doc)
        return cls(tuple(Feature(**f) for f in features), source_schema=schema,
                   record_type=record_type)


def check_labels(features: Iterable[Feature], label_cols: Iterable[str]) -> set[str]:
    """The label names, each checked to be a feature (SchemaError listing the columns if not)."""
    if isinstance(label_cols, str):
        label_cols = [label_cols]
    names = {f.name for f in features}
    wanted = list(label_cols)
    missing = [c for c in wanted if c not in names]
    if missing:
        raise SchemaError(f"label column(s) {missing} not found; columns are {sorted(names)}")
    return set(wanted)


def check_unique_keys(features: Iterable[Feature]) -> None:
    """SchemaError when two features map to the same Example key."""
    seen: dict[str, str] = {}
    for f in features:
        for key in f.keys:
            if key in seen:
                raise SchemaError(f"features {seen[key]!r} and {f.name!r} both map to Example "
                                  f"key {key!r}; rename one of the columns")
            seen[key] = f.name
