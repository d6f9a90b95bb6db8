"""The bad-input matrix: every way the input can be wrong, through every entry point.

Each `Bad` case builds its input (a DataFrame, options, the state of a path), calls one entry
point (write_tfrecords, df.write.format("tfrecord"), spark.read.format("tfrecord"),
make_dataset, verify) and expects one error class and a message naming the column, option, file
or value. Spark hands errors raised in a Python data source or task back inside its own
exception; for those entry points the class is read from the wrapped "tfspark...Error: ..." line.
For every case, nothing half-written survives: the case's directory holds exactly what it held
before the call (same files, same bytes: no new output directory, no temp, probe, part or
backup files).

Each `Edge` case is an input that looks odd but is valid (empty DataFrame, 0-row partitions,
dots/spaces/unicode in names, NaN/inf labels, 1,000 columns, partition values that look like
paths): it is written and read back with TensorFlow, make_dataset and spark.read.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import functions as F
from pyspark.sql import types as T
from tfcheck import read_with_tf

import tfspark
from tfspark.errors import CorruptRecordError, EncodeError, OptionError, SchemaError
from tfspark.store.integrity import verify
from tfspark.store.manifest import ManifestError

pytestmark = [pytest.mark.spark, pytest.mark.tf]

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
ROOT_REASON = "runs as root, which ignores file permissions"


class VerifyFailed(Exception):
    """`verify` collects problems instead of raising; the harness raises this with its report."""



@pytest.fixture(scope="module")
def good(spark_tf, tmp_path_factory) -> Path:
    """A small valid data set: 10 rows in one file; id (long), x (double, nulls), label y."""
    out = tmp_path_factory.mktemp("good") / "data"
    df = spark_tf.range(10).coalesce(1).select(
        "id", F.when(F.col("id") % 3 == 0, None).otherwise(F.col("id") * 1.0).alias("x"),
        (F.col("id") * 0.5).alias("y"))
    df.write.format("tfrecord").mode("overwrite").option("labelCols", "y").save(str(out))
    return out


# ---------------------------------------------------------------- building inputs

_TYPES = {"bigint": T.LongType(), "double": T.DoubleType(), "string": T.StringType()}


def spec_json(ddl: str) -> str:
    """The JSON spec inferred from a flat schema like "id bigint not null, zz bigint" (parsed
    here: Spark's DDL parser needs a session, and these are built at import)."""
    fields = []
    for col in ddl.split(","):
        name, tname, *rest = col.split()
        fields.append(T.StructField(name, _TYPES[tname], nullable=not rest))
    return tfspark.infer_spec(T.StructType(fields)).to_json(indent=None)


def three(spark: Any) -> Any:
    return spark.range(3)


def sql(query: str) -> Callable[[Any], Any]:
    return lambda spark: spark.sql(query)


def rows(data: list, ddl: str) -> Callable[[Any], Any]:
    """The rows in one partition, so errors name a predictable row."""
    return lambda spark: spark.createDataFrame(data, ddl).coalesce(1)


def copy_good(edit: Callable[[dict, Path], Any] | None = None) -> Callable[..., dict]:
    """Setup: a copy of the good data set at tmp/data, its manifest changed by `edit` (which
    returns the new manifest, a str to write as is, or None to keep the manifest)."""
    def setup(tmp: Path, spark: Any, good: Path) -> dict:
        data = tmp / "data"
        shutil.copytree(good, data)
        if edit is not None:
            doc = json.loads((data / "_tfspark.json").read_text())
            new = edit(doc, data)
            if new is not None:
                (data / "_tfspark.json").write_text(new if isinstance(new, str)
                                                    else json.dumps(new))
        return {"path": str(data)}
    return setup


def file_entry(doc: dict, **changes: Any) -> dict:
    doc["files"][0].update(changes)
    return doc


def feature(doc: dict, name: str, **changes: Any) -> dict:
    for f in doc["spec"]["features"]:
        if f["name"] == name:
            f.update(changes)
    return doc


def drop_records(doc: dict, _: Path) -> dict:
    del doc["files"][0]["records"]
    return doc


def write_file(name: str, text: str, key: str | None = None) -> Callable[..., dict]:
    """Setup: tmp/<name> holds `text`; it is the path read, or the argument `key` when given."""
    def setup(tmp: Path, spark: Any, good: Path) -> dict:
        (tmp / name).write_text(text)
        if key is None:
            return {"path": str(tmp / name)}
        return {"path": str(good), key: str(tmp / name)}
    return setup


def under_a_file(tmp: Path, spark: Any, good: Path) -> dict:
    (tmp / "blocker").write_text("a file, not a directory")
    return {"path": str(tmp / "blocker" / "out")}


def existing_file(tmp: Path, spark: Any, good: Path) -> dict:
    (tmp / "out").write_text("a file where the output directory should go")
    return {"path": str(tmp / "out")}


def existing_dir(tmp: Path, spark: Any, good: Path) -> dict:
    (tmp / "out").mkdir()
    (tmp / "out" / "keep.txt").write_text("precious")
    return {"path": str(tmp / "out")}


def read_only_dir(tmp: Path, spark: Any, good: Path) -> dict:
    (tmp / "ro").mkdir()
    (tmp / "ro").chmod(stat.S_IRUSR | stat.S_IXUSR)
    return {"path": str(tmp / "ro" / "out")}


def unreadable_manifest(tmp: Path, spark: Any, good: Path) -> dict:
    kw = copy_good()(tmp, spark, good)
    (tmp / "data" / "_tfspark.json").chmod(0)
    return kw


def missing(tmp: Path, spark: Any, good: Path) -> dict:
    return {"path": str(tmp / "nope")}


def missing_spec_file(tmp: Path, spark: Any, good: Path) -> dict:
    return {**copy_good()(tmp, spark, good), "spec": str(tmp / "nospec.json")}


def manifest_dir(tmp: Path, spark: Any, good: Path) -> dict:
    kw = copy_good()(tmp, spark, good)
    (tmp / "data" / "_tfspark.json").unlink()
    (tmp / "data" / "_tfspark.json").mkdir()
    return kw


def empty_dir(tmp: Path, spark: Any, good: Path) -> dict:
    (tmp / "empty").mkdir()
    return {"path": str(tmp / "empty")}


def nullable_data(tmp: Path, spark: Any, good: Path) -> dict:
    """Setup: tmp/data holds rows whose x is null in row 1 (x nullable as written)."""
    spark.createDataFrame([(0, 1.0), (1, None)], "id long, x double").coalesce(1) \
        .write.format("tfrecord").mode("overwrite").save(str(tmp / "data"))
    return {"path": str(tmp / "data"), "schema": "id bigint not null, x double not null"}


def notebook_filesystem(tmp: Path, spark: Any, good: Path) -> dict:
    """Setup: filesystem= an fsspec filesystem whose class is defined where Spark's executors
    cannot import it (as in a notebook): cloudpickle sends it by value, and fails."""
    import pyarrow.fs as pafs
    from fsspec.implementations.local import LocalFileSystem

    class Mine(LocalFileSystem):
        pass

    return {"path": str(tmp / "out"), "filesystem": pafs.PyFileSystem(pafs.FSSpecHandler(Mine()))}


# ---------------------------------------------------------------- the failing cases

@dataclass(frozen=True)
class Bad:
    id: str
    entry: str  # write_tfrecords | df.write | spark.read | make_dataset | verify
    error: type[BaseException] | str  # a class, or a class name (TensorFlow's errors)
    match: str  # regex searched in the message (DOTALL)
    df: Callable[[Any], Any] = three  # spark -> the DataFrame written
    kw: Mapping[str, Any] = field(default_factory=dict)  # arguments / options
    setup: Callable[[Path, Any, Path], dict] | None = None  # -> {"path": ..., more kw}
    needs_permissions: bool = False  # root ignores them: skipped when running as root


WT, DW, SR, MD, VF = "write_tfrecords", "df.write", "spark.read", "make_dataset", "verify"

BAD = [
    # ---- every unsupported type: refused before anything is written, column named
    Bad("type-map", WT, SchemaError, r"column 'm' has type map<string,bigint>.*to_json",
        sql("select id, map('k', id) as m from range(3)")),
    Bad("type-map-datasource", DW, SchemaError, r"column 'm' has type map<string,bigint>",
        sql("select id, map('k', id) as m from range(3)")),
    Bad("type-map-in-struct", WT, SchemaError, r"column 's\.m' has type map",
        sql("select id, named_struct('m', map('k', id)) as s from range(3)")),
    Bad("type-calendar-interval", WT, SchemaError, r"column 'iv' has type interval\b",
        sql("select id, make_interval(0, 0, 0, 1, 0, 0, 0) as iv from range(3)")),
    Bad("type-day-time-interval", WT, SchemaError, r"column 'iv' has type interval day",
        sql("select id, interval '1' day as iv from range(3)")),
    Bad("type-year-month-interval", DW, SchemaError, r"column 'iv' has type interval year",
        sql("select id, interval '1' year as iv from range(3)")),
    Bad("type-variant", WT, SchemaError, r"column 'v' has type variant",
        sql("""select id, parse_json('{"a": 1}') as v from range(3)""")),
    Bad("type-array-of-struct", WT, SchemaError,
        r"column 'a' has type array<struct<x:bigint>>.*2-D arrays",
        sql("select id, array(named_struct('x', id)) as a from range(3)")),
    Bad("type-array-of-map", WT, SchemaError, r"column 'am' has type array<map<string,bigint>>",
        sql("select id, array(map('k', id)) as am from range(3)")),
    Bad("type-3d-array", WT, SchemaError, r"column 'a3' has type array<array<array<bigint>>>",
        sql("select id, array(array(array(id))) as a3 from range(3)")),
    Bad("type-void", DW, SchemaError, r"column 'n' has type void.*cast",
        sql("select id, null as n from range(3)")),
    Bad("type-time", WT, SchemaError, r"column 't' has type time\(6\)",
        sql("select id, time'12:00:00' as t from range(3)")),
    # ---- nulls where none may be
    Bad("null-in-non-nullable-spec-column", DW, EncodeError,
        r"column 'x' is not nullable in the spec but row 1 is null",
        rows([(0, 1.0), (1, None)], "id long, x double"),
        kw={"spec": spec_json("id bigint not null, x double not null")}),
    Bad("null-in-non-nullable-read-schema", SR, SchemaError,
        r"column 'x' is not nullable in the schema", setup=nullable_data),
    Bad("null-element-in-array", WT, EncodeError,
        r"column 'a' has a null element inside an array at row 1.*null_elements='drop'",
        rows([(0, [1, 2]), (1, [3, None])], "id long, a array<long>")),
    Bad("null-element-in-array-datasource", DW, EncodeError,
        r"column 'a' has a null element inside an array at row 1",
        rows([(0, [1, 2]), (1, [3, None])], "id long, a array<long>")),
    Bad("null-inner-array-2d", WT, EncodeError, r"column 'r' has a null array inside an array",
        rows([(0, [[1], [2]]), (1, [[3], None])], "id long, r array<array<long>>")),
    # ---- column names
    Bad("names-collide-after-struct-flattening", WT, SchemaError,
        r"'a\.b' and 'a\.b' both map to Example key 'a\.b'.*rename",
        sql("select 1 as `a.b`, named_struct('b', 2) as a")),
    Bad("names-collide-with-ragged-key", DW, SchemaError,
        r"'r' and 'r/values' both map to Example key 'r/values'",
        sql("select array(array(1)) as r, 1 as `r/values`")),
    Bad("names-empty", WT, SchemaError, r"empty name.*alias",
        lambda spark: spark.range(3).select("id", F.col("id").alias(""))),
    Bad("names-duplicate", WT, OptionError, r"two columns named 'x'; rename one",
        sql("select id as x, id as x from range(3)")),
    Bad("names-differ-only-in-case", WT, OptionError,
        r"columns 'Label' and 'label' differ only in case.*rename one",
        sql("select id as Label, id as label from range(3)")),
    # ---- option typos
    Bad("option-typo-write", DW, OptionError,
        r"unknown tfrecord option\(s\) \['compresion'\] \(did you mean 'compression'\?\); "
        r"known options: .*compression",
        kw={"compresion": "gzip"}),
    Bad("option-typo-read", SR, OptionError, r"unknown tfrecord read option\(s\) \['verfy'\]",
        kw={"verfy": "true"}, setup=copy_good()),
    Bad("option-typo-keyword", WT, TypeError, r"'compresion'", kw={"compresion": "gzip"}),
    Bad("option-typo-mode-value", WT, OptionError, r"mode 'overwite' is not valid",
        kw={"mode": "overwite"}),
    Bad("option-typo-compression-value", DW, OptionError, r"compression.*'gz'",
        kw={"compression": "gz"}),
    # ---- wrong option types and values
    Bad("option-type-gzip-level", WT, OptionError, r"gzip_level .*got '9'",
        kw={"compression": "gzip", "gzip_level": "9"}),
    Bad("option-type-target-file-bytes", WT, OptionError, r"target_file_bytes .*'big'",
        kw={"target_file_bytes": "big"}),
    Bad("option-type-max-records-per-file", WT, OptionError, r"max_records_per_file .*'10'",
        kw={"max_records_per_file": "10"}),
    Bad("option-value-max-records-negative", WT, OptionError, r"max_records_per_file .*-1",
        kw={"max_records_per_file": -1}),
    Bad("option-value-null-elements", WT, OptionError, r"null_elements='skip'",
        kw={"null_elements": "skip"}),
    Bad("option-type-label-cols", WT, OptionError, r"label_cols must be .*got 5",
        kw={"label_cols": 5}),
    Bad("option-label-col-missing", DW, SchemaError, r"label column\(s\) \['y'\] not found",
        kw={"labelCols": "y"}),
    Bad("option-type-shapes", WT, SchemaError, r"shape for 'a' must be a list of ints.*got 2",
        rows([(0, [1, 2])], "id long, a array<long>"), kw={"shapes": {"a": 2}}),
    Bad("option-type-defaults", WT, SchemaError, r"default for 'x' must be a int64.*'zero'",
        rows([(0, 1)], "id long, x long"), kw={"defaults": {"x": "zero"}}),
    Bad("option-type-max-records-datasource", DW, OptionError, r"maxRecordsPerFile='ten'",
        kw={"maxRecordsPerFile": "ten"}),
    Bad("option-type-shapes-json", DW, OptionError, r"option shapes must be a JSON object",
        kw={"shapes": "[1]"}),
    Bad("option-type-verify", SR, OptionError, r"verify='yes' must be true or false",
        kw={"verify": "yes"}, setup=copy_good()),
    Bad("option-type-batch-size", MD, OptionError, r"batch_size .*'32'",
        kw={"batch_size": "32"}, setup=copy_good()),
    Bad("option-partition-by-double", WT, OptionError,
        r"cannot partition by column 'p' of type double",
        sql("select id, id / 2 as p from range(3)"), kw={"partition_by": ["p"]}),
    Bad("option-partition-by-missing", DW, OptionError, r"partition/split column 'nope'",
        kw={"partitionBy": "nope"}),
    # ---- split fractions
    Bad("backup-table-and-path", WT, OptionError,
        r"backup_table \('t_b'\) or backup_path .*not both",
        kw={"backup_table": "t_b", "backup_path": "elsewhere"}),
    Bad("split-sum-below-one", WT, OptionError, r"must sum to 1, got 0\.9",
        kw={"split": {"train": 0.5, "test": 0.4}}),
    Bad("split-fraction-out-of-range", WT, OptionError,
        r"split fraction for 'train' must be in \[0, 1\], got 1\.2",
        kw={"split": {"train": 1.2, "test": -0.2}}),
    Bad("split-fraction-string", WT, OptionError, r"split fraction for 'train' .*got '0\.5'",
        kw={"split": {"train": "0.5", "test": 0.5}}),
    Bad("split-key-missing", WT, OptionError, r"split_key column 'zz'",
        kw={"split": {"train": 1.0}, "split_key": "zz"}),
    # ---- partition and split names trying to escape the output directory
    Bad("escape-split-name", WT, OptionError, r"split name '\.\./evil'",
        kw={"split": {"../evil": 1.0}}),
    Bad("escape-read-split", MD, OptionError, r"split must be a split name.*'\.\./data'",
        kw={"split": "../data"}, setup=copy_good()),
    # ---- unreadable paths
    Bad("unreadable-missing-path-make-dataset", MD, ManifestError,
        r"'.*nope' does not exist: check the path$", setup=missing),
    Bad("unreadable-missing-path-spark-read", SR, OptionError,
        r"input path '.*nope' does not exist", setup=missing),
    Bad("unreadable-missing-path-verify", VF, ManifestError,  # nothing to verify: raised
        r"'.*nope' does not exist: check the path", setup=missing),
    Bad("unreadable-empty-dir-spark-read", SR, SchemaError, r"no TFRecord files in '.*empty'",
        setup=empty_dir),
    Bad("unreadable-not-a-tfrecord", SR, CorruptRecordError,
        r"notes\.csv: truncated record.* byte offset 0", setup=write_file("notes.csv", "a,b\n")),
    Bad("unreadable-file-without-spec", MD, OptionError, r"needs spec=",
        setup=write_file("notes.csv", "a,b\n")),
    Bad("unreadable-permissions", MD, ManifestError, r"cannot read .*_tfspark\.json",
        setup=unreadable_manifest, needs_permissions=True),
    Bad("unreadable-manifest-is-a-directory", SR, ManifestError,
        r"cannot read .*_tfspark\.json .*check that it is a file", setup=manifest_dir),
    # ---- unwritable paths
    Bad("unwritable-read-only-dir", WT, OptionError, r"cannot write to '.*ro/out'",
        setup=read_only_dir, needs_permissions=True),
    Bad("unwritable-under-a-file", WT, OptionError, r"cannot write to '.*blocker/out'",
        setup=under_a_file),
    Bad("unwritable-under-a-file-datasource", DW, OptionError,
        r"cannot write to '.*blocker/out'", setup=under_a_file),
    Bad("unwritable-output-is-a-file", WT, OptionError, r"cannot write to '.*out'",
        kw={"mode": "overwrite"}, setup=existing_file),
    Bad("unwritable-exists-errorifexists", WT, OptionError, r"output path '.*out' already exists",
        setup=existing_dir),
    # a filesystem= the executors cannot be sent (an fsspec class defined in a notebook): it
    # was Spark's PicklingError about a lock, after the write had begun
    Bad("filesystem-not-sendable", WT, OptionError, r"^filesystem= cannot be sent to Spark's "
        r"executors.*cannot pickle.*an installed package", setup=notebook_filesystem),
    # ---- a spec that does not match the data
    Bad("spec-names-missing-column", DW, SchemaError, r"needs column\(s\) \['zz'\]",
        kw={"spec": spec_json("id bigint not null, zz bigint")}),
    Bad("spec-wrong-dtype", DW, SchemaError,
        r"spec does not fit the DataFrame: column 'id' holds Arrow type int64.*string",
        kw={"spec": spec_json("id string not null")}),
    Bad("spec-lacks-a-column", DW, SchemaError, r"column\(s\) \['y'\] not in the spec",
        sql("select id, 1.0D as y from range(3)"), kw={"spec": spec_json("id bigint not null")}),
    Bad("spec-wrong-dtype-make-dataset", MD, "InvalidArgumentError",
        r"Key: id.*Data types don't match",
        kw={"spec": spec_json("id double not null, x double, y double not null")},
        setup=copy_good()),
    Bad("spec-of-other-keys-make-dataset", MD, SchemaError,
        r"the spec given names none of the keys in '.*part-.*\['zz'\], the records hold "
        r"\['id', 'x', 'y'\]", kw={"spec": spec_json("zz bigint not null")}, setup=copy_good()),
    Bad("spec-missing-feature-make-dataset", MD, "InvalidArgumentError",
        r"part-.*: record 0 has no required feature zz \(the spec has it not nullable",
        # deterministic: every record lacks zz, and unordered parallel parses may report any
        kw={"spec": spec_json("id bigint not null, zz bigint not null"), "deterministic": True},
        setup=copy_good()),
    Bad("spec-file-missing", MD, SchemaError, r"spec path '.*nospec\.json'",
        setup=missing_spec_file),
    Bad("spec-file-invalid-json", MD, SchemaError, r"spec file '.*spec\.json' is not valid JSON",
        setup=write_file("spec.json", "{oops", key="spec")),
    Bad("spec-file-invalid-dtype", MD, SchemaError, r"feature 'id': 'dtype' must be one of",
        setup=write_file("spec.json", spec_json("id bigint").replace('"int64"', '"int32"'),
                         key="spec")),
    # ---- a manifest edited by hand
    Bad("manifest-invalid-json", MD, ManifestError, r"_tfspark\.json is not valid JSON",
        setup=copy_good(lambda d, p: "{not json")),
    Bad("manifest-invalid-json-spark-read", SR, ManifestError,
        r"_tfspark\.json is not valid JSON", setup=copy_good(lambda d, p: "{not json")),
    Bad("manifest-invalid-json-verify", VF, VerifyFailed, r"_tfspark\.json is not valid JSON",
        setup=copy_good(lambda d, p: "{not json")),
    Bad("manifest-file-missing", MD, FileNotFoundError, r"part-gone\.tfrecord.*does not exist",
        setup=copy_good(lambda d, p: file_entry(d, path="part-gone.tfrecord"))),
    Bad("manifest-file-missing-spark-read", SR, FileNotFoundError,
        r"part-gone\.tfrecord: named for reading .*does not exist",
        setup=copy_good(lambda d, p: file_entry(d, path="part-gone.tfrecord"))),
    Bad("manifest-file-missing-verify", VF, VerifyFailed, r"part-gone\.tfrecord: missing",
        setup=copy_good(lambda d, p: file_entry(d, path="part-gone.tfrecord"))),
    Bad("manifest-count-changed", MD, "InvalidArgumentError",
        r"part-[^ ]*\.tfrecord: holds 10 records but the manifest lists 11",
        setup=copy_good(lambda d, p: file_entry(d, records=11))),
    Bad("manifest-count-changed-spark-read", SR, CorruptRecordError,
        r"part-[^ ]*\.tfrecord: holds 10 records but the manifest lists 11",
        setup=copy_good(lambda d, p: file_entry(d, records=11))),
    Bad("manifest-count-changed-verify", VF, VerifyFailed,
        r"part-[^ ]*\.tfrecord: holds 10 readable records but the manifest says 11",
        setup=copy_good(lambda d, p: file_entry(d, records=11))),
    Bad("manifest-spec-wrong-dtype", MD, "InvalidArgumentError",
        r"Key: id.*Data types don't match",
        setup=copy_good(lambda d, p: feature(d, "id", dtype="string", encoding="bytes"))),
    Bad("manifest-spec-wrong-dtype-spark-read", SR, SchemaError,
        r"part-[^ ]*\.tfrecord: feature 'id' \(key 'id'\) holds a int64 list but the spec says "
        r"string", setup=copy_good(lambda d, p: feature(d, "id", dtype="string",
                                                          encoding="bytes"))),
    Bad("manifest-spec-wrong-dtype-verify", VF, VerifyFailed,
        r"part-[^ ]*\.tfrecord: .*does not parse with the spec.*'id'",
        setup=copy_good(lambda d, p: feature(d, "id", dtype="string", encoding="bytes"))),
    Bad("manifest-spec-invalid", MD, ManifestError,
        r"_tfspark\.json: its spec is invalid: feature 'id': 'dtype'",
        setup=copy_good(lambda d, p: feature(d, "id", dtype="int32"))),
    Bad("manifest-spec-invalid-verify", VF, VerifyFailed,
        r"_tfspark\.json: its spec is invalid: feature 'id'",
        setup=copy_good(lambda d, p: feature(d, "id", dtype="int32"))),
    Bad("manifest-path-escapes", SR, ManifestError,
        r"files\[0\] names '\.\./.*', which is not a relative path inside the directory",
        setup=copy_good(lambda d, p: file_entry(d, path="../" + d["files"][0]["path"]))),
    Bad("manifest-path-escapes-make-dataset", MD, ManifestError,
        r"files\[0\] names '/etc/passwd'",
        setup=copy_good(lambda d, p: file_entry(d, path="/etc/passwd"))),
    Bad("manifest-records-removed", MD, ManifestError, r"files\[0\] .*has records=None",
        setup=copy_good(drop_records)),
    Bad("manifest-records-removed-verify", VF, VerifyFailed, r"files\[0\] .*has records=None",
        setup=copy_good(drop_records)),
    Bad("manifest-version-changed", MD, ManifestError, r"has version 99.*upgrade tfspark",
        setup=copy_good(lambda d, p: dict(d, version=99))),
]


# ---------------------------------------------------------------- the harness

def snapshot(root: Path) -> dict[str, Any]:
    """Every directory and file under root, with its bytes (the size of an unreadable one)."""
    out: dict[str, Any] = {}
    for d, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(d, name), root) + "/"] = None
        for name in files:
            p = os.path.join(d, name)
            try:
                with open(p, "rb") as f:
                    out[os.path.relpath(p, root)] = f.read()
            except PermissionError:
                out[os.path.relpath(p, root)] = ("unreadable", os.stat(p).st_size)
    return out


def call(entry: str, spark: Any, df: Any, path: str, kw: dict) -> None:
    kw = dict(kw)
    if entry == WT:
        tfspark.write_tfrecords(df, path, **kw)
    elif entry == DW:
        writer = df.write.format("tfrecord").mode(kw.pop("mode", "overwrite"))
        writer.options(**kw).save(path)
    elif entry == SR:
        reader = spark.read.format("tfrecord")
        if "schema" in kw:
            reader = reader.schema(kw.pop("schema"))
        reader.options(**kw).load(path).collect()
    elif entry == MD:
        for _ in tfspark.make_dataset(path, **{"batch_size": 4, **kw}):
            pass
    elif entry == VF:
        report = verify(path)
        if not report.ok:
            raise VerifyFailed(report.render())
    else:  # pragma: no cover
        raise AssertionError(entry)


# At a line's start (a Python traceback), or after Spark's own prefix (hideTraceback).
_WRAPPED = re.compile(r"(?:^|: )(?:[A-Za-z_][\w.]*\.)?(\w+(?:Error|Exception)): ", re.MULTILINE)


def error_name(e: BaseException, entry: str) -> str:
    """The class of the error: the exception's own, or for Spark's wrapper around an error raised
    in the Python data source (driver or task) the class named in the wrapped traceback."""
    if entry in (DW, SR) and isinstance(e, CapturedException):
        found = _WRAPPED.findall(str(e))
        assert found, f"no wrapped error in {e}"
        return found[-1]
    return type(e).__name__


@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_bad_input(case: Bad, spark_tf, tf, good, tmp_path):
    if case.needs_permissions and IS_ROOT:
        pytest.skip(ROOT_REASON)
    kw = {"path": str(tmp_path / "out"), **case.kw}
    if case.setup is not None:
        kw.update(case.setup(tmp_path, spark_tf, good))
    path = kw.pop("path")
    df = case.df(spark_tf) if case.entry in (WT, DW) else None
    before = snapshot(tmp_path)
    try:
        with pytest.raises(Exception) as info:
            call(case.entry, spark_tf, df, path, kw)
        after = snapshot(tmp_path)
    finally:
        for p in tmp_path.rglob("*"):  # give back what chmod took, so tmp_path can be removed
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IRWXU)
    e = info.value
    want = case.error if isinstance(case.error, str) else case.error.__name__
    got = error_name(e, case.entry)
    assert got == want or (not isinstance(case.error, str) and isinstance(e, case.error)), \
        f"{case.id}: expected {want}, got {got}: {e}"
    assert re.search(case.match, str(e), re.DOTALL), f"{case.id}: message was:\n{e}"
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    assert not (added or removed or changed), \
        f"{case.id} left things behind: added {added}, removed {removed}, changed {changed}"


def test_bad_cases_cover_the_matrix():
    assert len({c.id for c in BAD}) == len(BAD) >= 30
    assert {c.entry for c in BAD} == {WT, DW, SR, MD, VF}


# ---------------------------------------------------------------- accepted edges

@dataclass(frozen=True)
class Edge:
    id: str
    entry: str  # write_tfrecords | df.write
    df: Callable[[Any], Any]
    check: Callable[[Any, Any, str, Any], None]  # (spark, tf, path, source df)
    kw: Mapping[str, Any] = field(default_factory=dict)
    setup: Callable[[Path, Path], None] | None = None  # (output path, good data set)


def manifest(path: str) -> dict:
    with open(os.path.join(path, "_tfspark.json")) as f:
        return json.load(f)


def all_records(tf: Any, path: str, **kw: Any) -> list:
    """Every element make_dataset yields, unbatched to python values."""
    out = []
    for batch in tfspark.make_dataset(path, 64, shuffle_buffer=0, deterministic=True, **kw):
        out.append(tf.nest.map_structure(lambda t: t.numpy().tolist(), batch))
    return out


def check_empty(spark: Any, tf: Any, path: str, df: Any) -> None:
    m = manifest(path)
    assert m["records"] == 0 and m["spec"]["features"]
    assert all(f["records"] == 0 for f in m["files"])
    assert all_records(tf, path) == []
    back = spark.read.format("tfrecord").load(path)
    assert back.schema.names == df.schema.names and back.count() == 0
    assert verify(path).ok


def check_zero_row_partitions(spark: Any, tf: Any, path: str, df: Any) -> None:
    m = manifest(path)
    assert m["records"] == 3 == sum(f["records"] for f in m["files"])
    _, cols = read_with_tf(tf, path)
    assert sorted(cols["id"]) == [0, 1, 2]
    assert sorted(r.id for r in spark.read.format("tfrecord").load(path).collect()) == [0, 1, 2]
    assert verify(path).ok


ODD_NAMES = ["a.b", "c d", "é名", "x-y", "s.p q"]


def check_odd_names(spark: Any, tf: Any, path: str, df: Any) -> None:
    spec, cols = read_with_tf(tf, path)
    assert sorted(spec.names) == sorted(["id", *ODD_NAMES])
    got = sorted(zip(*[cols[n] for n in ["id", *ODD_NAMES]]))
    assert got == [(i, i + 1, (f"v{i}").encode(), i * 0.5, i * 2, i * 3) for i in range(3)]
    ds_names = set().union(*(b.keys() for b in all_records(tf, path)))
    assert ds_names == {"id", *ODD_NAMES}
    back = spark.read.format("tfrecord").load(path)
    assert back.schema.names == df.schema.names
    assert sorted(back.collect()) == sorted(df.collect())


def check_nan_labels(spark: Any, tf: Any, path: str, df: Any) -> None:
    def same(a: float, b: float) -> bool:
        return (math.isnan(a) and math.isnan(b)) or a == b

    want = {r.id: (r.x, r.y) for r in df.collect()}
    got = {}
    for features, labels in all_records(tf, path):
        got.update({i: (x, y) for i, x, y in zip(features["id"], features["x"], labels)})
    assert got.keys() == want.keys()
    assert all(same(got[i][0], want[i][0]) and same(got[i][1], want[i][1]) for i in want)
    back = {r.id: (r.x, r.y) for r in spark.read.format("tfrecord").load(path).collect()}
    assert all(same(back[i][0], want[i][0]) and same(back[i][1], want[i][1]) for i in want)


WIDE = 1000


def check_wide(spark: Any, tf: Any, path: str, df: Any) -> None:
    want = {i: [i] + [i * WIDE + k for k in range(WIDE)] for i in range(3)}
    spec, cols = read_with_tf(tf, path)
    assert len(spec.features) == WIDE + 1
    names = ["id"] + [f"c{k}" for k in range(WIDE)]
    assert {row[0]: list(row) for row in zip(*[cols[n] for n in names])} == want
    back = spark.read.format("tfrecord").load(path)
    assert back.schema.names == names
    assert {r.id: list(r) for r in back.collect()} == want


def damaged(out: Path, good: Path) -> None:
    shutil.copytree(good, out)
    (out / "_tfspark.json").write_text("{not json")


def check_repaired(spark: Any, tf: Any, path: str, df: Any) -> None:
    assert manifest(path)["records"] == 3 and verify(path).ok
    assert sorted(r.id for r in spark.read.format("tfrecord").load(path).collect()) == [0, 1, 2]
    assert sorted(i for b in all_records(tf, path) for i in b["id"]) == [0, 1, 2]


ESCAPES = ["../../evil", "..", ".", "/abs", "a/b", "x=y", "%2F", None]


def check_escaping_partitions(spark: Any, tf: Any, path: str, df: Any) -> None:
    out = Path(path)
    outside = sorted(p.name for p in out.parent.iterdir())
    assert outside == ["out"], f"partition values wrote outside the output: {outside}"
    for rel in (e["path"] for e in manifest(path)["files"]):
        assert (out / rel).resolve().is_relative_to(out.resolve())
    back = spark.read.format("tfrecord").load(path)
    assert sorted((r.id, r.p) for r in back.collect()) == \
        sorted((i, v) for i, v in enumerate(ESCAPES))
    assert verify(path).ok


def odd_names_df(spark: Any) -> Any:
    return spark.sql("select id, id + 1 as `a.b`, concat('v', id) as `c d`, id * 0.5 as `é名`, "
                     "id * 2 as `x-y`, named_struct('p q', id * 3) as s from range(3)")


def wide_df(spark: Any) -> Any:  # one selectExpr call: 1,000 Column objects cost 3,000 py4j calls
    return spark.range(3).selectExpr("id", *[f"id * {WIDE} + {k} as c{k}" for k in range(WIDE)])


NAN_ROWS = [(0, 1.0, float("nan")), (1, float("nan"), float("inf")),
            (2, float("-inf"), float("-inf")), (3, 0.5, 2.0)]

EDGES = [
    Edge("empty-dataframe", WT, lambda s: s.range(0).select("id", (F.col("id") * 1.0).alias("y")),
         check_empty, {"label_cols": ["y"]}),
    Edge("empty-dataframe-datasource", DW, lambda s: s.range(0), check_empty),
    Edge("zero-row-partitions", WT, lambda s: s.range(0, 3, numPartitions=6),
         check_zero_row_partitions),
    Edge("zero-row-partitions-datasource", DW,
         lambda s: s.range(0, 3, numPartitions=6).where("id >= 0"), check_zero_row_partitions),
    Edge("odd-column-names", WT, odd_names_df, check_odd_names),
    Edge("odd-column-names-datasource", DW, odd_names_df, check_odd_names),
    Edge("nan-inf-labels", WT, lambda s: s.createDataFrame(NAN_ROWS, "id long, x double, y double"),
         check_nan_labels, {"label_cols": ["y"]}),
    Edge("thousand-columns", DW, wide_df, check_wide),
    Edge("partition-values-look-like-paths", WT,
         lambda s: s.createDataFrame(list(enumerate(ESCAPES)), "id long, p string"),
         check_escaping_partitions, {"partition_by": ["p"]}),
    Edge("overwrite-repairs-damaged-manifest", DW, three, check_repaired, setup=damaged),
    Edge("overwrite-repairs-damaged-manifest-write-tfrecords", WT, three, check_repaired,
         {"mode": "overwrite"}, setup=damaged),
]


@pytest.mark.parametrize("case", EDGES, ids=[c.id for c in EDGES])
def test_accepted_edge(case: Edge, spark_tf, tf, good, tmp_path):
    out = str(tmp_path / "out")
    if case.setup is not None:
        case.setup(tmp_path / "out", good)
    df = case.df(spark_tf)
    if case.entry == WT:
        result = tfspark.write_tfrecords(df, out, **case.kw)
        assert result.rows == result.source_rows == result.backup_rows
    else:
        df.write.format("tfrecord").mode("overwrite").save(out)
    case.check(spark_tf, tf, out, df)


@pytest.mark.spark
def test_wrong_argument_types_are_named(spark, tmp_path):
    spec = tfspark.infer_spec(spark.range(1).schema)
    with pytest.raises(OptionError, match=r"needs a Spark DataFrame, got DataFrame; make one "
                                          r"with spark.createDataFrame"):
        tfspark.write_tfrecords(pd.DataFrame({"a": [1]}), str(tmp_path / "p"))
    with pytest.raises(EncodeError, match="needs a pyarrow RecordBatch or Table, got list"):
        tfspark.arrow.encode_batch([1, 2], spec)
    with pytest.raises(OptionError, match="register needs a SparkSession .*got NoneType"):
        tfspark.register(None)
    out = str(tmp_path / "d")
    tfspark.write_tfrecords(spark.range(5), out, stats=False)
    for read in (tfspark.read_batches, tfspark.make_dataset):
        with pytest.raises(OptionError, match="seed must be an int or None, got 'x'"):
            read(out, 2, seed="x")
    assert not (tmp_path / "p").exists()


@pytest.mark.spark
def test_gzip_damage_is_named_at_its_record_by_every_reader(spark, tmp_path, tf):
    out = str(tmp_path / "d")
    tfspark.write_tfrecords(spark.range(0, 20_000, numPartitions=1).selectExpr(
        "id", "concat('value ', id) as s"), out, compression="gzip", stats=False)
    name = os.path.join(out, next(f for f in os.listdir(out) if f.endswith(".gz")))
    data = bytearray(open(name, "rb").read())  # damage the compressed stream in the middle
    data[len(data) // 2] ^= 0xFF
    open(name, "wb").write(bytes(data))
    report = tfspark.verify(out)
    offset = int(re.search(r"byte offset (\d+)", report.problems[0]).group(1))
    assert offset > 0
    with pytest.raises(CorruptRecordError, match=f"byte offset {offset}"):
        list(tfspark.read_batches(out, 1000))
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"byte offset {offset}"):
        list(tfspark.make_dataset(out, 1000))

