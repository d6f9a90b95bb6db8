"""Read a tfspark output directory with TensorFlow only (the oracle) and compare to Spark rows."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

import tfspark
from tfspark.spec import FeatureSpec


def read_with_tf(tf: Any, path: str, split: str | None = None) -> tuple[FeatureSpec, dict]:
    """Parse every file the manifest names with TFRecordDataset + parse_example.

    Returns the spec and {feature: list of per-row python values}.
    """
    root = os.path.join(path, split) if split else path
    with open(os.path.join(root, "_tfspark.json")) as f:
        manifest = json.load(f)
    spec = FeatureSpec.from_dict(manifest["spec"])
    files = [os.path.join(root, e["path"]) for e in manifest["files"]]
    comp = "GZIP" if manifest["compression"] == "gzip" else ""
    out: dict[str, list] = {name: [] for name in spec.names}
    if not files:
        return spec, out
    ds = tf.data.TFRecordDataset(files, compression_type=comp).batch(4096)
    block = (manifest.get("layout") or {}).get("rows_per_record", 1)
    parsing = tfspark.tf.parsing_spec(spec) if block == 1 else _block_parsing(tf, spec)
    for batch in ds:
        parsed = tf.io.parse_example(batch, parsing)
        if block > 1:  # the block dimension merged away: rows (written by hand, as a user would)
            rows = int(tf.reduce_sum(parsed.pop("__rows").values))
            parsed = {f.name: tf.reshape(parsed[f.name].values, [rows, *f.shape])
                      if f.kind == "fixed" else parsed[f.name].values for f in spec.features}
        for name, value in parsed.items():
            if isinstance(value, tf.sparse.SparseTensor):
                value = tf.RaggedTensor.from_sparse(value)
            out[name].extend(value.to_list() if hasattr(value, "to_list") else
                             value.numpy().tolist())
    return spec, out


def _block_parsing(tf: Any, spec: FeatureSpec) -> dict[str, Any]:
    """The block layout's parsing spec, built from design.md's key names (not tfspark's code)."""
    dtypes = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}
    out = {"__rows": tf.io.RaggedFeature(tf.int64, value_key="__rows")}
    for f in spec.features:
        if f.kind == "fixed":
            keys = [f.name]
        elif f.kind == "varlen":
            keys = [f.name, f.name + "/row_lengths"]
        else:
            keys = [f.name + "/values", f.name + "/row_lengths", f.name + "/inner_lengths"]
        out[f.name] = tf.io.RaggedFeature(
            dtypes[f.dtype], value_key=keys[0],
            partitions=[tf.io.RaggedFeature.RowLengths(k) for k in keys[1:]])
    return out


def rows_by(values: dict, key: str) -> dict[Any, dict]:
    """{key value: {feature: value}} from read_with_tf's columns."""
    names = list(values)
    return {row[names.index(key)]: dict(zip(names, row)) for row in zip(*values.values())}


def f32(x: Any) -> Any:
    if x is None:
        return None
    if isinstance(x, list):
        return [f32(v) for v in x]
    return float(np.float32(x))


def check_rich_row(g: dict, r: tuple) -> None:
    """One parsed row `g` against the source tuple `r` of the shared all-types table
    (id, i, s16, b8, flag, f, d, dec, txt, bin, day, ts, arr, emb, rag, st, vec, ...);
    nulls come back as the spec's defaults."""
    import datetime as dt
    import math

    null = r[1] is None
    assert g["i"] == (0 if null else r[1])
    assert g["s16"] == (0 if null else r[2]) and g["b8"] == (0 if null else r[3])
    assert g["flag"] == (0 if null else int(r[4]))
    assert g["f"] == (0.0 if null else f32(r[5])) and g["d"] == (0.0 if null else f32(r[6]))
    assert g["dec"] == (0.0 if null else f32(float(r[7])))
    assert g["txt"] == (b"" if null else r[8].encode())
    assert g["bin"] == (b"" if null else r[9])
    assert g["day"] == (0 if null else (r[10] - dt.date(1970, 1, 1)).days)
    if not null:
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        assert g["ts"] == (r[11] - epoch) // dt.timedelta(microseconds=1)
    assert g["arr"] == ([] if null else r[12])
    assert g["emb"] == f32(r[13]) and math.copysign(1, g["emb"][2]) == -1
    assert g["rag"] == ([] if null else r[14])
    assert g["st.a"] == (0 if null else r[15][0])
    assert g["st.b"] == (b"" if null else r[15][1].encode())
    assert g["vec"] == ([0.0, 0.0] if null else f32(r[16].toArray().tolist()))


def rich_fields() -> list:
    """The StructFields of the shared all-types table that check_rich_row reads (r[0]..r[16])."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql import types as T

    return [
        T.StructField("id", T.LongType(), False),
        T.StructField("i", T.IntegerType()), T.StructField("s16", T.ShortType()),
        T.StructField("b8", T.ByteType()), T.StructField("flag", T.BooleanType()),
        T.StructField("f", T.FloatType()), T.StructField("d", T.DoubleType()),
        T.StructField("dec", T.DecimalType(12, 3)), T.StructField("txt", T.StringType()),
        T.StructField("bin", T.BinaryType()), T.StructField("day", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("arr", T.ArrayType(T.DoubleType(), False)),
        T.StructField("emb", T.ArrayType(T.FloatType(), False)),
        T.StructField("rag", T.ArrayType(T.ArrayType(T.LongType(), False), False)),
        T.StructField("st", T.StructType([T.StructField("a", T.IntegerType()),
                                          T.StructField("b", T.StringType())])),
        T.StructField("vec", VectorUDT()),
    ]
