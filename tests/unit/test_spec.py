"""Spark schema -> FeatureSpec, and the spec's JSON form (no Spark session, no TensorFlow)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import types as T

from tfspark.errors import SchemaError, TfsparkError
from tfspark.spec import Feature, FeatureSpec, infer_spec

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "schemas" / "feature_spec.schema.json"


def schema_of(*fields: tuple) -> T.StructType:
    """schema_of(("a", T.IntegerType()), ("b", T.StringType(), False)) -> StructType."""
    return T.StructType([T.StructField(f[0], f[1], f[2] if len(f) > 2 else True)
                         for f in fields])


def one(dt: T.DataType, nullable: bool = True, **kw) -> Feature:
    spec = infer_spec(schema_of(("c", dt, nullable)), **kw)
    assert len(spec.features) == 1
    return spec.features[0]


# ---------------------------------------------------------------- the type table

# Spark type -> (kind, dtype, encoding, source_type, default when nullable)
SCALAR_TABLE = [
    (T.BooleanType(), "fixed", "int64", "bool", "boolean", 0),
    (T.ByteType(), "fixed", "int64", "int", "tinyint", 0),
    (T.ShortType(), "fixed", "int64", "int", "smallint", 0),
    (T.IntegerType(), "fixed", "int64", "int", "int", 0),
    (T.LongType(), "fixed", "int64", "int", "bigint", 0),
    (T.FloatType(), "fixed", "float32", "float", "float", 0.0),
    (T.DoubleType(), "fixed", "float32", "float", "double", 0.0),
    (T.DecimalType(10, 2), "fixed", "float32", "decimal", "decimal(10,2)", 0.0),
    (T.DecimalType(38, 18), "fixed", "float32", "decimal", "decimal(38,18)", 0.0),
    (T.StringType(), "fixed", "string", "bytes", "string", ""),
    (T.CharType(3), "fixed", "string", "bytes", "char(3)", ""),
    (T.VarcharType(5), "fixed", "string", "bytes", "varchar(5)", ""),
    (T.BinaryType(), "fixed", "string", "bytes", "binary", ""),
    (T.DateType(), "fixed", "int64", "date", "date", 0),
    (T.TimestampType(), "fixed", "int64", "timestamp", "timestamp", 0),
    (T.TimestampNTZType(), "fixed", "int64", "timestamp", "timestamp_ntz", 0),
]


@pytest.mark.parametrize("dt, kind, dtype, encoding, source_type, default", SCALAR_TABLE,
                         ids=[row[4] for row in SCALAR_TABLE])
def test_scalar_type_table(dt, kind, dtype, encoding, source_type, default):
    f = one(dt)
    assert (f.name, f.path, f.kind, f.dtype, f.encoding, f.source_type, f.shape) == (
        "c", ("c",), kind, dtype, encoding, source_type, ())
    assert f.nullable is True and f.label is False
    assert f.default == default and type(f.default) is type(default)
    assert f.keys == ("c",)

    g = one(dt, nullable=False)
    assert g.nullable is False and g.default is None
    assert (g.kind, g.dtype, g.encoding, g.source_type) == (kind, dtype, encoding, source_type)


@pytest.mark.parametrize("dt, kind, dtype, encoding, source_type, default", SCALAR_TABLE,
                         ids=[row[4] for row in SCALAR_TABLE])
def test_array_of_each_scalar_is_varlen(dt, kind, dtype, encoding, source_type, default):
    f = one(T.ArrayType(dt))
    assert (f.kind, f.dtype, f.encoding, f.source_type, f.shape, f.default) == (
        "varlen", dtype, encoding, f"array<{source_type}>", (), None)
    assert f.keys == ("c",)


@pytest.mark.parametrize("dt, kind, dtype, encoding, source_type, default", SCALAR_TABLE,
                         ids=[row[4] for row in SCALAR_TABLE])
def test_array_of_arrays_of_each_scalar_is_ragged(dt, kind, dtype, encoding, source_type,
                                                   default):
    f = one(T.ArrayType(T.ArrayType(dt)))
    assert (f.kind, f.dtype, f.encoding, f.source_type, f.shape, f.default) == (
        "ragged", dtype, encoding, f"array<array<{source_type}>>", (), None)
    assert f.keys == ("c/values", "c/row_lengths")


def test_array_with_shape_is_fixed_with_a_fill_default():
    f = one(T.ArrayType(T.DoubleType()), shapes={"c": [3]})
    assert (f.kind, f.dtype, f.shape, f.default) == ("fixed", "float32", (3,), 0.0)
    g = one(T.ArrayType(T.StringType()), nullable=False, shapes={"c": (2,)})
    assert (g.kind, g.dtype, g.shape, g.default) == ("fixed", "string", (2,), None)
    h = one(T.ArrayType(T.LongType()), shapes={"c": [4]}, defaults={"c": -1})
    assert (h.kind, h.shape, h.default) == ("fixed", (4,), -1)


def test_vector_is_float32_varlen_or_fixed_with_a_shape():
    f = one(VectorUDT())
    assert (f.kind, f.dtype, f.encoding, f.source_type, f.default) == (
        "varlen", "float32", "vector", "vector", None)
    g = one(VectorUDT(), shapes={"c": [5]}, defaults={"c": -1.5})
    assert (g.kind, g.dtype, g.encoding, g.shape, g.default) == (
        "fixed", "float32", "vector", (5,), -1.5)


# ---------------------------------------------------------------- structs, order, nullability

def test_structs_flatten_two_levels_and_nullability_propagates():
    inner = T.StructType([T.StructField("x", T.IntegerType(), False),
                          T.StructField("tags", T.ArrayType(T.StringType()), True)])
    outer_nullable = T.StructType([T.StructField("a", T.DoubleType(), False),
                                   T.StructField("in", inner, False)])
    outer_required = T.StructType([T.StructField("a", T.DoubleType(), False),
                                   T.StructField("in", inner, False)])
    spec = infer_spec(schema_of(("s", outer_nullable, True), ("r", outer_required, False),
                                ("z", T.LongType(), False)))
    by = {f.name: f for f in spec.features}
    assert spec.names == ["r.a", "r.in.tags", "r.in.x", "s.a", "s.in.tags", "s.in.x", "z"]
    assert by["s.in.x"].path == ("s", "in", "x")
    # Leaves under a nullable struct are nullable (a null struct makes them absent).
    assert by["s.a"].nullable and by["s.in.x"].nullable
    assert by["s.a"].default == 0.0 and by["s.in.x"].default == 0
    # Under non-nullable structs they keep their own nullability.
    assert not by["r.a"].nullable and by["r.a"].default is None
    assert not by["r.in.x"].nullable
    assert by["r.in.tags"].nullable and by["r.in.tags"].kind == "varlen"


def test_features_are_sorted_by_example_key():
    spec = infer_spec(schema_of(("b", T.IntegerType()), ("a", T.ArrayType(T.ArrayType(
        T.IntegerType()))), ("a0", T.StringType()), ("B", T.StringType())))
    assert spec.names == ["B", "a", "a0", "b"]
    keys = [k for f in spec.features for k in f.keys]
    assert keys[0] == "B" and keys[1:3] == ["a/values", "a/row_lengths"]
    assert spec["a0"].dtype == "string"
    with pytest.raises(KeyError, match="nope"):
        spec["nope"]


def test_struct_with_no_fields_is_refused():
    with pytest.raises(SchemaError, match=r"'s'.*empty struct"):
        infer_spec(schema_of(("s", T.StructType([]))))


def test_infer_spec_needs_a_struct_type():
    with pytest.raises(SchemaError, match="StructType"):
        infer_spec(T.IntegerType())  # type: ignore[arg-type]


# ---------------------------------------------------------------- labels

def test_labels():
    schema = schema_of(("x", T.DoubleType()), ("y", T.IntegerType()),
                       ("s", T.StructType([T.StructField("t", T.LongType())])))
    spec = infer_spec(schema, label_cols=["y", "s.t"])
    assert spec.label_names == ["s.t", "y"]
    assert not spec["x"].label
    assert infer_spec(schema, label_cols="y").label_names == ["y"]
    assert spec.with_labels(["x"]).label_names == ["x"]


@pytest.mark.parametrize("labels, missing", [(["nope"], "nope"), (["y", "s"], "'s'"),
                                             ("zz", "zz")])
def test_missing_label_is_named(labels, missing):
    schema = schema_of(("x", T.DoubleType()), ("y", T.IntegerType()),
                       ("s", T.StructType([T.StructField("t", T.LongType())])))
    with pytest.raises(SchemaError, match=f"label column.*{missing}") as e:
        infer_spec(schema, label_cols=labels)
    assert isinstance(e.value, ValueError) and isinstance(e.value, TfsparkError)
    with pytest.raises(SchemaError, match=missing):
        infer_spec(schema).with_labels(labels)


# ---------------------------------------------------------------- shapes and defaults

BAD_OPTIONS = [
    ("shape 2-D", T.ArrayType(T.IntegerType()), {"shapes": {"c": [2, 3]}}, r"shape.*'c'.*\[2, 3\]"),
    ("shape negative", T.ArrayType(T.IntegerType()), {"shapes": {"c": [-1]}}, r"shape.*'c'"),
    ("shape empty", T.ArrayType(T.IntegerType()), {"shapes": {"c": []}}, r"shape.*'c'"),
    ("shape not a list", T.ArrayType(T.IntegerType()), {"shapes": {"c": 3}}, r"shape.*'c'.*3"),
    ("shape of text", T.ArrayType(T.IntegerType()), {"shapes": {"c": ["3"]}}, r"shape.*'c'"),
    ("shape of floats", T.ArrayType(T.IntegerType()), {"shapes": {"c": [2.5]}}, r"shape.*'c'"),
    ("shape on scalar", T.IntegerType(), {"shapes": {"c": [1]}}, r"'c'.*scalar.*int"),
    ("shape on ragged", T.ArrayType(T.ArrayType(T.IntegerType())), {"shapes": {"c": [2]}},
     r"'c'.*ragged"),
    ("shape unknown name", T.ArrayType(T.IntegerType()), {"shapes": {"d": [2]}},
     r"shapes.*unknown.*'d'"),
    ("default unknown name", T.IntegerType(), {"defaults": {"d": 1}}, r"defaults.*unknown.*'d'"),
    ("default on varlen", T.ArrayType(T.IntegerType()), {"defaults": {"c": 1}},
     r"'c'.*variable-length.*shapes"),
    ("default on ragged", T.ArrayType(T.ArrayType(T.IntegerType())), {"defaults": {"c": 1}},
     r"'c'.*ragged.*no default"),
    ("default str for int", T.IntegerType(), {"defaults": {"c": "1"}}, r"default.*'c'.*int64"),
    ("default bool for int", T.LongType(), {"defaults": {"c": True}}, r"default.*'c'.*bool"),
    ("default float for int", T.LongType(), {"defaults": {"c": 1.5}}, r"default.*'c'.*1\.5"),
    ("default int too big", T.LongType(), {"defaults": {"c": 2**63}}, r"default.*'c'.*int64"),
    ("default int too small", T.LongType(), {"defaults": {"c": -(2**63) - 1}}, r"'c'"),
    ("default int for string", T.StringType(), {"defaults": {"c": 1}}, r"default.*'c'.*str"),
    ("default bytes for string", T.BinaryType(), {"defaults": {"c": b"x"}}, r"default.*'c'"),
    ("default str for float", T.DoubleType(), {"defaults": {"c": "NaN"}}, r"default.*'c'"),
    ("default over float32", T.DoubleType(), {"defaults": {"c": 1e300}},
     r"default.*'c'.*float32 range"),
    ("default huge int for float", T.FloatType(), {"defaults": {"c": 10**400}},
     r"default.*'c'.*float32"),
    ("default on non-nullable", T.IntegerType(), {"defaults": {"c": 1}, "nullable": False},
     r"'c'.*not nullable"),
]


@pytest.mark.parametrize("dt, options, match", [c[1:] for c in BAD_OPTIONS],
                         ids=[c[0] for c in BAD_OPTIONS])
def test_bad_shapes_and_defaults_are_refused(dt, options, match):
    options = dict(options)
    nullable = options.pop("nullable", True)
    with pytest.raises(SchemaError, match=match):
        one(dt, nullable=nullable, **options)


@pytest.mark.parametrize("dt, value, stored", [
    (T.IntegerType(), -7, -7),
    (T.LongType(), 2**63 - 1, 2**63 - 1),
    (T.LongType(), -(2**63), -(2**63)),
    (T.BooleanType(), 1, 1),
    (T.DateType(), -1, -1),
    (T.DoubleType(), 2, 2.0),
    (T.FloatType(), -0.0, -0.0),
    (T.FloatType(), float("inf"), float("inf")),
    (T.DoubleType(), 3.4028234663852886e38, 3.4028234663852886e38),
    (T.DecimalType(5, 1), 0.5, 0.5),
    (T.StringType(), "n/a ü", "n/a ü"),
    (T.BinaryType(), "", ""),
])
def test_custom_defaults(dt, value, stored):
    f = one(dt, defaults={"c": value})
    assert f.default == stored and type(f.default) is type(stored)
    if isinstance(stored, float):
        assert math.copysign(1, f.default) == math.copysign(1, stored)


def test_nan_default():
    assert math.isnan(one(T.FloatType(), defaults={"c": float("nan")}).default)


def test_numpy_ints_are_fine_in_shapes():
    np = pytest.importorskip("numpy")
    assert one(T.ArrayType(T.IntegerType()), shapes={"c": np.array([3])}).shape == (3,)


# ---------------------------------------------------------------- refused types

REFUSED = [
    ("map", T.MapType(T.StringType(), T.IntegerType()), "map<string,int>"),
    ("array of struct", T.ArrayType(T.StructType([T.StructField("a", T.IntegerType())])),
     "array<struct<a:int>>"),
    ("3-D array", T.ArrayType(T.ArrayType(T.ArrayType(T.IntegerType()))),
     "array<array<array<int>>>"),
    ("array of map", T.ArrayType(T.MapType(T.StringType(), T.StringType())),
     "array<map<string,string>>"),
    ("null", T.NullType(), "void"),
    ("array of null", T.ArrayType(T.NullType()), "array<void>"),
    ("day-time interval", T.DayTimeIntervalType(), "interval day to second"),
    ("year-month interval", T.YearMonthIntervalType(), "interval year to month"),
    ("calendar interval", T.CalendarIntervalType(), "interval"),
]
for _name, _type in (("variant", "VariantType"), ("time", "TimeType")):
    if hasattr(T, _type):
        _dt = getattr(T, _type)()
        REFUSED.append((_name, _dt, _dt.simpleString()))


@pytest.mark.parametrize("dt, type_name", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_types_name_column_and_type(dt, type_name):
    with pytest.raises(SchemaError) as e:
        infer_spec(schema_of(("ok", T.IntegerType()), ("bad_col", dt)))
    msg = str(e.value)
    assert "'bad_col'" in msg and type_name in msg
    assert "cannot" in msg  # says it is not supported, and (below) what to do
    assert len(msg.split(":", 1)[-1].strip()) > 10

    nested = T.StructType([T.StructField("inner", T.StructType([T.StructField("leaf", dt)]))])
    with pytest.raises(SchemaError, match=r"'outer\.inner\.leaf'") as e:
        infer_spec(schema_of(("outer", nested)))
    assert type_name in str(e.value)


def test_map_error_says_what_to_do():
    with pytest.raises(SchemaError, match="to_json|map_keys"):
        one(T.MapType(T.StringType(), T.IntegerType()))


# ---------------------------------------------------------------- key clashes

def test_struct_leaf_clashes_with_dotted_column():
    schema = schema_of(("a", T.StructType([T.StructField("b", T.IntegerType())])),
                       ("a.b", T.StringType()))
    with pytest.raises(SchemaError, match=r"'a\.b'.*rename"):
        infer_spec(schema)


def test_ragged_keys_clash_with_a_column_named_like_them():
    schema = schema_of(("r", T.ArrayType(T.ArrayType(T.IntegerType()))),
                       ("r/row_lengths", T.LongType()))
    with pytest.raises(SchemaError, match=r"'r/row_lengths'"):
        infer_spec(schema)


def test_hand_made_spec_with_duplicate_names_is_refused():
    f = one(T.IntegerType())
    with pytest.raises(SchemaError, match="'c'"):
        FeatureSpec((f, dataclasses.replace(f, dtype="string")))


# ---------------------------------------------------------------- immutability

def test_spec_and_feature_are_frozen():
    spec = infer_spec(schema_of(("x", T.IntegerType())))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.features = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.features[0].default = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.features[0].name = "y"  # type: ignore[misc]
    assert isinstance(spec.features, tuple) and isinstance(spec.features[0].shape, tuple)
    spec2 = infer_spec(schema_of(("x", T.ArrayType(T.IntegerType()))), shapes={"x": [2]})
    assert isinstance(spec2.features[0].shape, tuple)
    assert hash(spec2.features[0]) == hash(dataclasses.replace(spec2.features[0]))


def test_spec_module_is_pure():
    code = ("import sys, tfspark.spec, tfspark.spec.validate, tfspark.errors;"
            "assert 'pyspark' not in sys.modules, 'the spec imports pyspark';"
            "from pyspark.sql import types as T;"
            "tfspark.spec.infer_spec(T.StructType([T.StructField('a', T.IntegerType())]));"
            "from pyspark import SparkContext;"
            "assert SparkContext._active_spark_context is None;"
            "bad = [m for m in ('tensorflow', 'pyarrow', 'numba') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


# ---------------------------------------------------------------- JSON form

@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def rich_spec() -> FeatureSpec:
    vec_struct = T.StructType([
        T.StructField("v", VectorUDT(), True),
        T.StructField("deep", T.StructType([T.StructField("t", T.TimestampType(), False),
                                            T.StructField("n", T.LongType(), True)]), False),
    ])
    schema = schema_of(
        ("b", T.BooleanType()), ("i8", T.ByteType(), False), ("i16", T.ShortType()),
        ("i32", T.IntegerType()), ("i64", T.LongType()), ("f", T.FloatType()),
        ("d", T.DoubleType()), ("dneg", T.DoubleType()), ("dinf", T.DoubleType()),
        ("dninf", T.DoubleType()), ("dec", T.DecimalType(12, 4)), ("s", T.StringType()),
        ("bin", T.BinaryType()), ("day", T.DateType()), ("ts", T.TimestampType()),
        ("ntz", T.TimestampNTZType(), False), ("arr", T.ArrayType(T.IntegerType())),
        ("fixed", T.ArrayType(T.DoubleType())), ("grid", T.ArrayType(T.ArrayType(T.StringType()))),
        ("vec", VectorUDT()), ("st", vec_struct), ("y", T.DoubleType(), False),
        ("weird name ü/é", T.StringType()),
    )
    return infer_spec(
        schema, label_cols=["y", "b"],
        shapes={"fixed": [4], "st.v": [3]},
        defaults={"d": float("nan"), "dneg": -0.0, "dinf": float("inf"),
                  "dninf": float("-inf"), "f": 1.25, "i64": -(2**63), "s": "ünknown",
                  "fixed": -1.0, "st.v": 2.5e-30, "weird name ü/é": ""},
    )


def test_json_round_trip_is_lossless(validator):
    spec = rich_spec()
    text = spec.to_json()
    back = FeatureSpec.from_json(text)
    assert back.to_json() == text
    assert FeatureSpec.from_json(text.encode()).to_json() == text
    assert back.to_json(indent=None) == spec.to_json(indent=None)
    # NaN != NaN, so compare the features without it; the text above covers it.
    assert [f for f in back.features if f.name != "d"] == \
        [f for f in spec.features if f.name != "d"]
    assert math.isnan(back["d"].default)
    assert math.copysign(1, back["dneg"].default) == -1
    assert back["dinf"].default == math.inf and back["dninf"].default == -math.inf
    assert back.source_schema == spec.source_schema
    assert back.label_names == ["b", "y"]
    doc = json.loads(text)  # strict JSON: no NaN/Infinity tokens
    assert {f["name"]: f.get("default") for f in doc["features"]}["d"] == "NaN"
    validator.validate(doc)


@pytest.mark.parametrize("dt", [r[0] for r in SCALAR_TABLE] + [
    T.ArrayType(T.LongType()), T.ArrayType(T.ArrayType(T.BinaryType())), VectorUDT()])
@pytest.mark.parametrize("nullable", [True, False])
def test_every_to_json_output_validates(validator, dt, nullable):
    spec = infer_spec(schema_of(("c", dt, nullable), ("y", T.IntegerType())), label_cols=["y"])
    for indent in (2, None):
        doc = json.loads(spec.to_json(indent=indent))
        validator.validate(doc)
        assert FeatureSpec.from_dict(doc) == spec


def test_spec_without_source_schema_round_trips(validator):
    spec = FeatureSpec(rich_spec().features)
    doc = json.loads(spec.to_json())
    assert "source_schema" not in doc
    validator.validate(doc)
    assert FeatureSpec.from_json(spec.to_json()).to_json() == spec.to_json()


def _base_doc() -> dict:
    spec = infer_spec(schema_of(("a", T.IntegerType()), ("b", T.ArrayType(T.StringType())),
                                ("c", T.DoubleType(), False)))
    return json.loads(spec.to_json())


def _feat(doc: dict, name: str) -> dict:
    return next(f for f in doc["features"] if f["name"] == name)


def _set(name, key, value):
    def edit(doc):
        _feat(doc, name)[key] = value
    return edit


def _del(name, key):
    def edit(doc):
        del _feat(doc, name)[key]
    return edit


def _top(key, value):
    def edit(doc):
        doc[key] = value
    return edit


# (id, edit of a valid document, word the from_json message must contain)
MALFORMED = [
    ("wrong format", _top("format", "tfx.spec"), "format"),
    ("version 2", _top("version", 2), "version"),
    ("version as text", _top("version", "1"), "version"),
    ("version true", _top("version", True), "version"),
    ("missing format", lambda d: d.pop("format"), "format"),
    ("missing version", lambda d: d.pop("version"), "version"),
    ("missing features", lambda d: d.pop("features"), "features"),
    ("features not a list", _top("features", {"a": 1}), "features"),
    ("unknown top-level field", _top("colour", "red"), "colour"),
    ("source_schema not an object", _top("source_schema", "struct<a:int>"), "source_schema"),
    ("feature not an object", _top("features", ["a"]), "features[0]"),
    ("unknown feature field", _set("a", "colour", "red"), "colour"),
    ("missing name", _del("a", "name"), "name"),
    ("missing path", _del("a", "path"), "path"),
    ("missing kind", _del("a", "kind"), "kind"),
    ("missing dtype", _del("a", "dtype"), "dtype"),
    ("missing encoding", _del("a", "encoding"), "encoding"),
    ("missing source_type", _del("a", "source_type"), "source_type"),
    ("missing shape", _del("a", "shape"), "shape"),
    ("missing nullable", _del("a", "nullable"), "nullable"),
    ("missing label", _del("a", "label"), "label"),
    ("empty name", _set("a", "name", ""), "name"),
    ("name not a string", _set("a", "name", 3), "name"),
    ("empty path", _set("a", "path", []), "path"),
    ("path of numbers", _set("a", "path", [1]), "path"),
    ("bad kind", _set("a", "kind", "dense"), "kind"),
    ("bad dtype", _set("a", "dtype", "float64"), "dtype"),
    ("bad encoding", _set("a", "encoding", "json"), "encoding"),
    ("source_type not a string", _set("a", "source_type", 1), "source_type"),
    ("shape 2-D", _set("a", "shape", [2, 3]), "shape"),
    ("shape negative", _set("a", "shape", [-1]), "shape"),
    ("shape of text", _set("a", "shape", ["2"]), "shape"),
    ("shape not a list", _set("a", "shape", 2), "shape"),
    ("shape on varlen", _set("b", "shape", [3]), "shape"),
    ("nullable not a bool", _set("a", "nullable", "yes"), "nullable"),
    ("nullable as 1", _set("a", "nullable", 1), "nullable"),
    ("label not a bool", _set("a", "label", 0), "label"),
    ("default on non-nullable", _set("c", "default", 0.0), "default"),
    ("nullable fixed without default", _del("a", "default"), "default"),
    ("default on varlen", _set("b", "default", "x"), "default"),
    ("null default on varlen", _set("b", "default", None), "default"),
    ("null default on fixed", _set("a", "default", None), "default"),
    ("bool default", _set("a", "default", True), "default"),
    ("list default", _set("a", "default", [0]), "default"),
]


@pytest.mark.parametrize("edit, word", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_spec_is_refused_by_both(validator, edit, word):
    doc = _base_doc()
    validator.validate(doc)  # the base is fine
    assert FeatureSpec.from_dict(copy.deepcopy(doc)).to_dict() == doc
    edit(doc)
    text = json.dumps(doc)
    with pytest.raises(SchemaError) as e:
        FeatureSpec.from_json(text)
    assert word in str(e.value)
    assert not validator.is_valid(json.loads(text)), "the JSON Schema accepts it"


@pytest.mark.parametrize("doc, word", [
    ([], "object"),
    ("tfspark", "object"),
    (None, "object"),
])
def test_non_object_documents(validator, doc, word):
    with pytest.raises(SchemaError, match=word):
        FeatureSpec.from_json(json.dumps(doc))
    assert not validator.is_valid(doc)


@pytest.mark.parametrize("edit, word", [
    (_set("a", "default", "zero"), "default"),          # text default on an int64 feature
    (_set("c", "nullable", True), "default"),           # ... now nullable fixed, no default
    (lambda d: _feat(d, "c").update(nullable=True, default="wide"), "default"),
    (lambda d: _feat(d, "c").update(nullable=True, default=1e300), "float32"),
    (lambda d: _feat(d, "c").update(nullable=True, default="Nan"), "NaN"),
    (_set("a", "default", 2**63), "int64"),
    (_set("a", "default", 1.5), "int64"),
    (lambda d: d["features"].append(dict(_feat(d, "a"))), "'a'"),   # duplicate key
    (_set("b", "name", "a"), "'a'"),
])
def test_malformed_spec_is_refused_by_from_json(edit, word):
    """Rules a JSON Schema cannot state (or does not): from_json still refuses them."""
    doc = _base_doc()
    edit(doc)
    with pytest.raises(SchemaError, match=word):
        FeatureSpec.from_json(json.dumps(doc))


def test_invalid_json_text():
    with pytest.raises(SchemaError, match="not valid JSON"):
        FeatureSpec.from_json("{\"format\": ")
