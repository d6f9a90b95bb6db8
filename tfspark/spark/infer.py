"""Schema inference for TFRecord files without a tfspark manifest (written by TensorFlow or
other tools).

Up to `schemaSampleFiles` files (default 16), spread evenly over the sorted file list (first,
last and in between, not only the first file), contribute their first `schemaSampleRecords`
records each (default 1000), CRCs checked; never the whole data. Each record is decoded with
the pure-Python decoder (wire/example_py.decode_example). Rules, per Example key:

  * int64 lists -> LongType; float lists -> FloatType (float32 is what is stored); a key holding
    int64 lists in some records and float lists in others -> FloatType (ints are converted).
  * bytes lists -> StringType when every sampled value is valid UTF-8, else BinaryType. (The JVM
    connectors always say StringType; bytes that are not UTF-8 would be mangled there.)
  * Scalar when every sampled record that has the key holds exactly one value; otherwise an
    ArrayType of the element type.
  * A key whose sampled lists are all empty -> ArrayType(StringType) (no type to go by; the
    JVM connectors do the same). Empty lists never decide a key's type.
  * Keys `x/values` and `x/row_lengths` (int64) that always come together, as tfspark writes 2-D
    ragged arrays, become one column `x` of ArrayType(ArrayType(element)).
  * Every inferred column is nullable: a sample cannot prove a key is never absent (keys
    absent from some sampled records are certainly nullable).
  * Columns are sorted by key. A key with bytes in some records and numbers in others cannot
    be read: SchemaError naming it; read such files with an explicit schema without it.

Records beyond the sample that do not fit (a second value for a scalar, floats for a long)
fail the read with an error naming the feature; pass `.schema(...)` or raise the sample size.
The schema maps to a FeatureSpec with `spec_for_schema`, so the same decoder reads the data.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from pyspark.sql import types as T

from tfspark.errors import SchemaError
from tfspark.spec import RAGGED_LENGTHS, RAGGED_VALUES, FeatureSpec, infer_spec


@dataclass
class KeyStats:
    """What the sample says about one Example key."""

    records: int = 0  # sampled records that have the key
    kinds: set[str] = field(default_factory=set)  # int | float | bytes, from non-empty lists
    max_len: int = 0
    min_len: int = 1 << 62
    utf8: bool = True
    files: set[str] = field(default_factory=set)

    def add(self, values: list, name: str) -> None:
        """Count one sampled record's list for this key (`name`: the file it came from)."""
        self.records += 1
        self.max_len = max(self.max_len, len(values))
        self.min_len = min(self.min_len, len(values))
        self.files.add(name)
        if not values:
            return
        first = values[0]
        kind = "bytes" if isinstance(first, bytes) else "float" if isinstance(first, float) \
            else "int"
        self.kinds.add(kind)
        if kind == "bytes" and self.utf8:
            try:
                for v in values:
                    v.decode("utf-8")
            except UnicodeDecodeError:
                self.utf8 = False


def sample_stats(records: Iterable[tuple[str, bytes]]) -> tuple[dict[str, KeyStats], int]:
    """({key: stats}, records seen) from (file name, serialized Example) pairs."""
    from tfspark.wire.example_py import decode_example

    stats: dict[str, KeyStats] = {}
    n = 0
    for name, data in records:
        n += 1
        for key, values in decode_example(data).items():
            stats.setdefault(key, KeyStats()).add(values, name)
    return stats, n


def schema_from_stats(stats: dict[str, KeyStats]) -> T.StructType:
    """The inference rules (see the module docstring) applied to sampled key stats."""
    ragged = {}
    for key in stats:
        if key.endswith(RAGGED_VALUES):
            base = key[:-len(RAGGED_VALUES)]
            lengths = stats.get(base + RAGGED_LENGTHS)
            if (base not in stats and lengths is not None and lengths.kinds <= {"int"}
                    and lengths.records == stats[key].records):
                ragged[base] = stats[key]
    paired = {b + s for b in ragged for s in (RAGGED_VALUES, RAGGED_LENGTHS)}
    fields = []
    for key in sorted(set(stats) - paired | set(ragged)):
        if key in ragged:
            dtype: T.DataType = T.ArrayType(T.ArrayType(_element(key, ragged[key])))
        else:
            s = stats[key]
            elem = _element(key, s)
            scalar = s.kinds and s.min_len == 1 and s.max_len == 1
            dtype = elem if scalar else T.ArrayType(elem)
        fields.append(T.StructField(key, dtype, True))
    return T.StructType(fields)


def _element(key: str, s: KeyStats) -> T.DataType:
    if "bytes" in s.kinds and len(s.kinds) > 1:
        raise SchemaError(f"feature {key!r} holds bytes in some records and numbers in others "
                          f"(in {sorted(s.files)[:3]}); it cannot be one column: read the files "
                          f"with an explicit schema that leaves it out")
    if "float" in s.kinds:
        return T.FloatType()
    if "int" in s.kinds:
        return T.LongType()
    if "bytes" in s.kinds:
        return T.StringType() if s.utf8 else T.BinaryType()
    return T.StringType()  # only empty lists seen


def spec_for_schema(schema: T.StructType) -> FeatureSpec:
    """How to decode files for a Spark schema when no manifest says: each column (struct
    fields flattened to `a.b`) is the Example key of its name, 2-D arrays are ragged."""
    return infer_spec(schema)


def pick_files(files: list[Any], n: int) -> list[Any]:
    """At most n files spread evenly over the list, first and last included."""
    if len(files) <= n:
        return list(files)
    if n == 1:
        return [files[0]]
    step = (len(files) - 1) / (n - 1)
    return [files[round(i * step)] for i in range(n)]


def infer_schema(loc: Any, files: list[Any], opts: Any) -> tuple[T.StructType, FeatureSpec]:
    """(schema, spec) for files (read.FileEntry) under loc, from a sample (see module doc)."""
    from tfspark.wire.stream import read_records

    if not files:
        raise SchemaError(f"no TFRecord files in {loc.uri!r} (names containing '.tfrecord', "
                          f"not starting with '_' or '.'); give a file or another directory")
    chosen = pick_files(files, opts.sample_files)

    def records():
        for entry in chosen:
            path = loc.join(entry.rel) if entry.rel else loc.base
            name = loc.uri.rstrip("/") + "/" + entry.rel if entry.rel else loc.uri
            with loc.fs.open_input_file(path) as raw:
                it = read_records(raw, entry.compression, verify=opts.verify, path=name)
                for data in islice(it, opts.sample_records):
                    yield name, data

    stats, n = sample_stats(records())
    if not stats:
        raise SchemaError(f"cannot infer a schema for {loc.uri!r}: the {n} sampled records of "
                          f"{len(chosen)} file(s) have no features; pass .schema(...)")
    schema = schema_from_stats(stats)
    return schema, spec_for_schema(schema)
