"""Schema inference for TFRecord files without a tfspark manifest (written by TensorFlow or
other tools).

Every file (up to `schemaSampleFiles`, default 1024, spread evenly over the sorted file list)
contributes its first `schemaSampleRecords` records (default 1000), CRCs checked; never the whole
data. A compiled scan lists each record's entries (key, list kind, length, UTF-8 or not:
wire.example_scan), so covering every file is cheap. Rules, per Example key:

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
  * recordType=SequenceExample: context keys follow the rules above; a feature list of T (its
    steps' lists, widened as above) -> ArrayType(ArrayType(T)), as the JVM connectors read it.
    A key that is both a context feature and a feature list is refused.
  * Columns are sorted by key. A key with bytes in some records and numbers in others cannot
    be read: SchemaError naming it; read such files with an explicit schema without it.

Records beyond the sample that do not fit (a second value for a scalar, floats for a long, a
key the sample never saw) fail the read with an error naming the feature and the file; pass
`.schema(...)` or raise the sample size. The schema maps to a FeatureSpec with
`spec_for_schema`, so the same decoder reads the data.

A key of int64 lists in some records and float lists in others reads into Spark (the ints are
converted), but TensorFlow's parse_example cannot parse it as one feature: such files are
named in a warning; rewrite them with write_tfrecords to train on them with make_dataset.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T

from tfspark.errors import CorruptRecordError, SchemaError
from tfspark.spec import RAGGED_LENGTHS, RAGGED_VALUES, FeatureSpec, infer_spec
from tfspark.wire.example_scan import entries
from tfspark.wire.protobuf import BYTES, FEATURE_LISTS, FLOAT, INT
from tfspark.wire.tfrecord import HEADER_BYTES, TRAILER_BYTES

log = logging.getLogger("tfspark")
# In the metadata of every inferred field: the reader then refuses keys the sample missed.
INFERRED = "tfspark.inferred"
MISSED = ("the schema was inferred from a sample that missed it: raise schemaSampleRecords / "
          "schemaSampleFiles, or pass .schema(...) with the columns to read")


@dataclass
class KeyStats:
    """What the sample says about one Example key."""

    records: int = 0  # sampled records that have the key
    kinds: set[str] = field(default_factory=set)  # int | float | bytes, from non-empty lists
    max_len: int = 0
    min_len: int = 1 << 62
    utf8: bool = True
    files: set[str] = field(default_factory=set)
    steps: bool = False  # a SequenceExample feature list: lengths and kinds are its steps'

    def merge(self, other: KeyStats, key: str = "") -> None:
        """Add what another sample saw of the key."""
        if self.steps != other.steps:
            raise SchemaError(f"feature {key!r} is a context feature in some records and a "
                              f"feature list in others (in {sorted(self.files | other.files)[:3]})"
                              f"; it cannot be one column: read the files with an explicit "
                              f"schema that leaves it out")
        self.records += other.records
        self.kinds |= other.kinds
        self.max_len = max(self.max_len, other.max_len)
        self.min_len = min(self.min_len, other.min_len)
        self.utf8 = self.utf8 and other.utf8
        self.files |= other.files


def sample_stats(records: Iterable[tuple[str, bytes]]) -> tuple[dict[str, KeyStats], int]:
    """({key: stats}, records seen) from (file name, serialized Example) pairs."""
    stats: dict[str, KeyStats] = {}
    by_file: dict[str, list[bytes]] = {}
    n = 0
    for name, data in records:
        by_file.setdefault(name, []).append(data)
        n += 1
    for name, datas in by_file.items():
        buf = np.frombuffer(b"".join(datas) or b"\0", np.uint8)
        offsets = np.cumsum([0] + [len(d) for d in datas]).astype(np.int64)
        merge_stats(stats, buffer_stats(buf, offsets, name, framed=False))
    return stats, n


def merge_stats(into: dict[str, KeyStats], more: dict[str, KeyStats]) -> None:
    """Fold the stats of another sample into `into`."""
    for key, st in more.items():
        if key in into:
            into[key].merge(st, key)
        else:
            into[key] = st


_KINDS = {BYTES: "bytes", FLOAT: "float", INT: "int"}


def buffer_stats(buf: np.ndarray, offsets: np.ndarray, name: str,
                 framed: bool = True, sequence: bool = False) -> dict[str, KeyStats]:
    """{key: stats} of the records between offsets (framed: as in a file) of file `name`;
    sequence: they are SequenceExamples. Entries are listed by a compiled scan and grouped by
    their key bytes with numpy."""
    head, tail = (HEADER_BYTES, TRAILER_BYTES) if framed else (0, 0)
    code, bad, rec, keys, kinds, counts, utf8, steps = entries(buf, offsets, head, tail,
                                                               sequence)
    if code == FEATURE_LISTS:
        raise SchemaError(f"{name}: record {bad} is a tf.train.SequenceExample (it has "
                          f"feature_lists), not a tf.train.Example: read it with "
                          f"recordType=SequenceExample")
    if code:
        what = "tf.train.SequenceExample" if sequence else "tf.train.Example"
        raise CorruptRecordError(f"{name}: record {bad} is not a valid {what}", path=name)
    if not len(rec):
        return {}
    raw = [buf[a:b].tobytes() for a, b in keys]  # keys repeat: one bytes object each
    names, group = np.unique(np.array(raw, dtype=object), return_inverse=True)
    out: dict[str, KeyStats] = {}
    nonempty = counts > 0
    for g, key in enumerate(names):
        mine = group == g
        try:
            text = key.decode("utf-8")
        except UnicodeDecodeError:
            raise SchemaError(f"{name}: feature key {key!r} is not UTF-8; no Spark column can "
                              f"be named after it: read the files with an explicit schema") \
                from None
        for is_step in (False, True):
            part = mine & (steps == is_step)
            if not part.any():
                continue
            st = KeyStats(records=len(np.unique(rec[part])), files={name},
                          max_len=int(counts[part].max()), min_len=int(counts[part].min()),
                          utf8=bool(utf8[part].all()), steps=is_step)
            st.kinds = {_KINDS[int(k)] for k in np.unique(kinds[part & nonempty])
                        if int(k) in _KINDS}
            if text in out:  # context in some records, a feature list in others: raises
                out[text].merge(st, text)
            else:
                out[text] = st
    return out


def schema_from_stats(stats: dict[str, KeyStats], sequence: bool = False) -> T.StructType:
    """The inference rules (see the module docstring) applied to sampled key stats;
    sequence: of SequenceExamples, whose 2-D columns are feature lists (never key pairs)."""
    ragged = {}
    for key in stats:
        if sequence:  # a SequenceExample's 2-D columns are its feature lists
            break
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
        elif stats[key].steps:
            dtype = T.ArrayType(T.ArrayType(_element(key, stats[key])))
        else:
            s = stats[key]
            elem = _element(key, s)
            scalar = s.kinds and s.min_len == 1 and s.max_len == 1
            dtype = elem if scalar else T.ArrayType(elem)
        fields.append(T.StructField(key, dtype, True, {INFERRED: True}))
    return T.StructType(fields)


def _element(key: str, s: KeyStats) -> T.DataType:
    if "bytes" in s.kinds and len(s.kinds) > 1:
        raise SchemaError(f"feature {key!r} holds bytes in some records and numbers in others "
                          f"(in {sorted(s.files)[:3]}); it cannot be one column: read the files "
                          f"with an explicit schema that leaves it out")
    if "float" in s.kinds:
        if "int" in s.kinds:
            log.warning("tfspark: feature %r holds int64 lists in some records and float lists "
                        "in others (in %s): spark.read converts the ints to float, but "
                        "TensorFlow's parse_example cannot parse it as one feature; to train "
                        "on these files with make_dataset, rewrite them with write_tfrecords",
                        key, sorted(s.files)[:3])
        return T.FloatType()
    if "int" in s.kinds:
        return T.LongType()
    if "bytes" in s.kinds:
        return T.StringType() if s.utf8 else T.BinaryType()
    return T.StringType()  # only empty lists seen


def spec_for_schema(schema: T.StructType, record_type: str = "Example") -> FeatureSpec:
    """How to decode files for a Spark schema when no manifest says: each column (struct
    fields flattened to `a.b`) is the Example key of its name, 2-D arrays are ragged (feature
    lists in SequenceExamples)."""
    return infer_spec(schema, record_type=record_type)


def pick_files(files: list[Any], n: int) -> list[Any]:
    """At most n files spread evenly over the list, first and last included."""
    if len(files) <= n:
        return list(files)
    if n == 1:
        return [files[0]]
    step = (len(files) - 1) / (n - 1)
    return [files[round(i * step)] for i in range(n)]


def infer_schema(loc: Any, files: list[Any], opts: Any,
                 record_type: str = "Example") -> tuple[T.StructType, FeatureSpec]:
    """(schema, spec) for files (read.FileEntry) under loc, from the first records of every
    file (up to opts.sample_files files, spread over the list; see module doc)."""
    from tfspark.wire.compression import sniff_gzip
    from tfspark.wire.stream import stream_framed

    if not files:
        raise SchemaError(f"no TFRecord files in {loc.uri!r} (names containing '.tfrecord', "
                          f"not starting with '_' or '.'); give a file or another directory")
    chosen = pick_files(files, opts.sample_files)
    sequence = record_type == "SequenceExample"
    stats: dict[str, KeyStats] = {}
    n = 0
    for entry in chosen:
        name = loc.child_uri(entry.rel) if entry.rel else loc.uri
        with loc.open_input(entry.rel) as raw:
            gz = sniff_gzip(raw) if entry.compression == "auto" else entry.compression == "gzip"
            stream = pa.CompressedInputStream(raw, "gzip") if gz else raw
            left = opts.sample_records
            def scan(buf: np.ndarray, off: np.ndarray, base: int, name: str = name) -> tuple:
                return buffer_stats(buf, off, name, sequence=sequence), len(off) - 1

            for part, got in stream_framed(stream, name, opts.verify, scan, gz,
                                           batch_records=min(left, 10_000)):
                merge_stats(stats, part)
                n += got
                left -= got
                if left <= 0:
                    break
    if not stats:
        raise SchemaError(f"cannot infer a schema for {loc.uri!r}: the {n} sampled records of "
                          f"{len(chosen)} file(s) have no features; pass .schema(...)")
    schema = schema_from_stats(stats, sequence)
    return schema, spec_for_schema(schema, record_type)
