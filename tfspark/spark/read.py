"""spark.read.format("tfrecord"): the Python Data Source reader.

The driver finds the files (the manifest's, or for a directory without one every file whose
name contains ".tfrecord", skipping names that start with "_" or "."), works out the schema
(the manifest's, a user's `.schema(...)`, or one inferred from a sample: spark.infer), and plans
one partition per file. Each task streams its file in chunks with bounded memory, checks both
CRCs, decodes up to 10,000 records at a time with the numba decoder (arrow.decode), turns
the canonical columns into the Spark schema's Arrow types (spark.to_spark) and yields Arrow batches.

Options: see tfspark.store.options.SPARK_READ_OPTIONS (checked into a SparkReadOptions there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T

from tfspark.errors import CorruptRecordError, scrubbed
from tfspark.spark.versions import DataSourceReader, InputPartition
from tfspark.spec import FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.fs import Location
from tfspark.store.options import SparkReadOptions
from tfspark.store.read_plan import SNIFF, plan_read
from tfspark.wire.compression import sniff_gzip
from tfspark.wire.stream import stream_framed

# ---------------------------------------------------------------- what a path holds

@dataclass(frozen=True)
class FileEntry:
    """One file to read: its path under the data set root, compression, partition values and
    (with a manifest) its expected row count."""

    rel: str  # relative to the data set root ("" when the root is the file itself)
    compression: str | None = SNIFF
    partition: dict[str, Any] = field(default_factory=dict)
    records: int | None = None  # rows, from the manifest: checked after reading


@dataclass(frozen=True)
class Source:
    """What a read path holds: its files, record type, and the spec and schema of its manifest."""

    root: Location  # the data set (or the file) read, on its filesystem
    files: list[FileEntry]
    record_type: str
    spec: FeatureSpec | None  # None: no manifest (inferred or user schema) or ByteArray
    schema: T.StructType | None  # the written schema; None without a manifest
    partition_by: list[str]
    rows_per_record: int = 1  # the manifest's layout


def discover(opts: SparkReadOptions) -> Source:
    """The files, record type, spec and schema at opts.path, as the one read planner
    (store.read_plan) plans a table read: from its manifest when there is one, else from a
    listing of the TFRecord files (a directory) or the path itself (a file).

    Raises OptionError when the path does not exist, the options do not fit what is there, or
    it holds a tfspark write that did not commit (part files or _backup/, no manifest).
    """
    plan = plan_read(opts.path, split=opts.split, whole=True, record_type=opts.record_type,
                     compression=None if opts.compression == "auto" else opts.compression)
    rows = plan.file_rows()
    files = [FileEntry(rel, comp, dict(part), rows[i] if rows is not None else None)
             for i, (rel, comp, part) in enumerate(zip(plan.rels, plan.file_compressions(),
                                                       plan.partitions))]
    m = plan.manifest
    assert plan.home is not None  # a table read always has its directory (or file)
    if m is None:
        return Source(plan.home, files, plan.record_type, None, None, [])
    partition_by = list(m.partition_by)
    return Source(plan.home, files, m.record_type, m.spec,
                  _manifest_schema(m, m.spec, partition_by), partition_by, m.rows_per_record)


def _manifest_schema(m: mf.Manifest, spec: FeatureSpec | None,
                     partition_by: list[str]) -> T.StructType:
    from tfspark.spark.to_spark import spark_type_of

    source = (T.StructType.fromJson(dict(spec.source_schema))
              if spec is not None and spec.source_schema else None)
    if m.schema:
        written = T.StructType.fromJson(dict(m.schema))
        if source is not None:  # write_tfrecords writes from its parquet backup, which
            # makes every column nullable: the spec's source schema has the original fields
            written = T.StructType([source[f.name] if f.name in source.names else f
                                    for f in written.fields])
    elif source is not None:
        written = source
    elif spec is not None:
        written = T.StructType([T.StructField(f.name, spark_type_of(f)) for f in spec.features])
    else:
        written = T.StructType([T.StructField("value", T.BinaryType())])
    have = set(written.names)
    written = T.StructType(list(written.fields) + [T.StructField(p, T.StringType())
                                                   for p in partition_by if p not in have])
    if m.record_type == "ByteArray":
        parts = [f for f in written.fields if f.name in partition_by]
        written = T.StructType([T.StructField("value", T.BinaryType(), False)] + parts)
    return _readable(written)


def _readable(dt: Any) -> Any:
    """char/varchar -> string: Spark hands strings to Python sources, and Arrow has no char."""
    if isinstance(dt, T.StructType):
        return T.StructType([T.StructField(f.name, _readable(f.dataType), f.nullable, f.metadata)
                             for f in dt.fields])
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_readable(dt.elementType), dt.containsNull)
    if isinstance(dt, (T.CharType, T.VarcharType)):
        return T.StringType()
    return dt


def read_schema(opts: SparkReadOptions) -> T.StructType:
    """The schema of what `opts` point at: the manifest's, or inferred from a sample."""
    src = discover(opts)
    if src.schema is not None:
        return src.schema
    if src.record_type == "ByteArray":
        return T.StructType([T.StructField("value", T.BinaryType(), False)])
    from tfspark.spark.infer import infer_schema

    return infer_schema(src.root, src.files, opts, src.record_type)[0]


# ---------------------------------------------------------------- reading

class FilePartition(InputPartition):
    """One Spark input partition: one file."""

    def __init__(self, index: int, entry: FileEntry):
        super().__init__(index)
        self.entry = entry


class TfrecordReader(DataSourceReader):
    """Planned on the driver, pickled to executors: plain data only; numba and Arrow objects
    are made inside read()."""

    def __init__(self, opts: SparkReadOptions, schema: T.StructType):
        from tfspark.spark.infer import INFERRED, spec_for_schema

        self.opts = opts
        src = discover(self.opts)
        self.root, self.files = src.root, src.files
        self.schema = _readable(schema)
        self.record_type = src.record_type
        self.rows_per_record = src.rows_per_record
        self.partition_by = [p for p in src.partition_by if p in self.schema.names]
        self.partition_types = {p: self.schema[p].dataType for p in self.partition_by}
        data = T.StructType([f for f in self.schema.fields if f.name not in self.partition_by])
        if self.record_type == "ByteArray":
            self.spec = None
        elif src.spec is not None:  # the manifest's encoding, for the columns asked for
            self.spec = dataclasses.replace(src.spec, features=tuple(
                f for f in src.spec.features if f.path[0] in data.names))
        else:
            self.spec = spec_for_schema(data, self.record_type)
        # An inferred schema must hold every key; a schema the user gave picks columns.
        self.strict = any(f.metadata.get(INFERRED) for f in data.fields)

    def partitions(self) -> list[InputPartition]:
        """One input partition per file."""
        return [FilePartition(i, f) for i, f in enumerate(self.files)]

    @scrubbed
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """On an executor: the file of `partition` as Arrow batches of the read schema.

        CRCs are checked unless verify=false; a manifest's record count is checked at the end.
        Raises CorruptRecordError for a damaged file, SchemaError when records do not fit.
        """
        from tfspark.arrow.decode import Decoder, records_column
        from tfspark.arrow.decode_block import BlockDecoder
        from tfspark.spark.infer import MISSED
        from tfspark.spark.to_spark import Restorer

        entry: FileEntry | None = getattr(partition, "entry", None)
        if entry is None:  # no files: Spark still runs one empty partition
            return
        loc = self.root
        name = loc.child_uri(entry.rel) if entry.rel else loc.uri
        restorer = Restorer(self.schema, self._constants(entry))
        missed = MISSED if self.strict else None
        decoder: Decoder | BlockDecoder | None = None
        if self.spec is not None:
            decoder = Decoder(self.spec) if self.rows_per_record == 1 else \
                BlockDecoder(self.spec)

        def to_batch(buf: np.ndarray, offsets: np.ndarray, base: int) -> pa.RecordBatch:
            if decoder is None:
                return restorer.restore({("value",): records_column(buf, offsets)},
                                        len(offsets) - 1)
            canon = decoder.decode(buf, offsets, framed=True, path=name, offset=base,
                                   strict=missed)
            return restorer.restore({f.path: canon.column(i)
                                     for i, f in enumerate(decoder.spec.features)},
                                    canon.num_rows)

        count = 0
        try:  # (on a store a file can go mid-read too: an overwrite's sweep)
            with loc.open_input(entry.rel) as raw:
                gz = sniff_gzip(raw) if entry.compression == SNIFF else \
                    entry.compression == "gzip"
                stream = pa.CompressedInputStream(raw, "gzip") if gz else raw
                for batch in stream_framed(stream, name, self.opts.verify, to_batch, gz):
                    count += batch.num_rows
                    yield batch
        except FileNotFoundError:
            raise FileNotFoundError(f"{name}: named for reading (by the manifest) but it does "
                                    f"not exist; the data set is incomplete (deleted or moved "
                                    f"files?): restore it or rewrite the data set") from None
        if entry.records is not None and count != entry.records:
            what = "records" if self.rows_per_record == 1 else "rows"
            raise CorruptRecordError(f"{name}: holds {count} {what} but the manifest lists "
                                     f"{entry.records}; the file was changed after the write: "
                                     f"rewrite the data set", path=name)

    def _constants(self, entry: FileEntry) -> dict[str, Any]:
        from tfspark.spark.to_spark import partition_value

        return {p: partition_value(entry.partition.get(p), t, p)
                for p, t in self.partition_types.items()}
