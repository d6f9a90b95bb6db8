"""A data set in TFX's terms: its stored statistics as TFDV's DatasetFeatureStatisticsList, a
TFMD Schema from its spec and statistics, `validate` against a saved schema, and the commands
(`tfspark stats --format tfdv`, `tfspark validate`). The protos come from tensorflow-metadata;
TFDV itself reads these files in test_tfdv.py. Written with write_dataset: no Spark."""

from __future__ import annotations

import datetime as dt
import math
import subprocess

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("tensorflow_metadata")

from google.protobuf import text_format  # noqa: E402
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2  # noqa: E402

import tfspark  # noqa: E402
from tfspark.cli.main import main  # noqa: E402
from tfspark.errors import OptionError, SchemaError  # noqa: E402

N = 600


def first(n: int = N) -> pa.Table:
    """Every kind of feature TFX sees: scalars with and without nulls, a boolean, a string of
    three values, a string of more than a schema's domain holds, raw bytes, a date, a float
    with NaN, a list that may be empty or null, a fixed array, a 2-D ragged array."""
    ids = np.arange(n)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "a": pa.array([None if i % 7 == 0 else int(i % 13) for i in ids], pa.int64()),
        "x": pa.array(np.linspace(-1, 1, n)),
        "flag": pa.array(ids % 3 == 0),
        "color": pa.array([None if i % 11 == 0 else ["red", "green", "blue"][i % 3]
                           for i in ids]),
        "word": pa.array([f"w{i % 150}" for i in ids]),
        "raw": pa.array([bytes([i % 256, 255]) for i in ids], pa.binary()),
        "day": pa.array([dt.date(2020, 1, 1 + int(i) % 28) for i in ids]),
        "nanf": pa.array([float("nan") if i % 10 == 0 else float(i) for i in ids]),
        "tags": pa.array([None if i % 5 == 0 else ["a", "b"][: i % 3] for i in ids],
                         pa.list_(pa.string())),
        "pair": pa.array([[int(i % 3), int(i % 5)] for i in ids], pa.list_(pa.int64(), 2)),
        "nest": pa.array([[[1, 2], [3]] if i % 3 else [[4]] for i in ids],
                         pa.list_(pa.list_(pa.int64()))),
        "y": pa.array(ids % 2),
    })


def changed(n: int = 300) -> pa.Table:
    """A later export of first() with one of each anomaly: `a` past a domain, `color` with a
    new value, `x` as integers, `id` null once, `flag` gone, `extra` new, `nanf` +inf."""
    t = first(n).drop_columns(["flag"])
    ids = np.arange(n)
    return t.set_column(t.schema.get_field_index("a"), "a",
                        pa.array([20 if i == 3 else int(i % 13) for i in ids], pa.int64())) \
        .set_column(t.schema.get_field_index("color"), "color",
                    pa.array([["red", "green", "blue", "purple"][i % 4] for i in ids])) \
        .set_column(t.schema.get_field_index("x"), "x", pa.array(ids % 5)) \
        .set_column(t.schema.get_field_index("id"), "id",
                    pa.array([None if i == 5 else int(i) for i in ids], pa.int64())) \
        .set_column(t.schema.get_field_index("nanf"), "nanf",
                    pa.array([math.inf if i == 1 else float(i) for i in ids])) \
        .append_column("extra", pa.array(np.ones(n)))


def write(table: pa.Table, path, **kw):
    return tfspark.write_dataset(table, str(path), label_cols=["y"],
                                 split={"train": 0.75, "test": 0.25}, split_key="id", **kw)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tfx")
    write(first(), root / "ds")
    write(changed(), root / "later")
    return root


def features(dataset) -> dict:
    return {"/".join(f.path.step): f for f in dataset.features}


# ---------------------------------------------------------------- statistics


def test_statistics_are_the_stored_ones_per_split_and_of_all_rows(data):
    ds = data / "ds"
    got = tfspark.tfdv_statistics(ds)
    assert isinstance(got, statistics_pb2.DatasetFeatureStatisticsList)
    assert [d.name for d in got.datasets] == ["All Examples", "test", "train"]
    m = tfspark.read_manifest(str(ds))
    for d in got.datasets:
        split = None if d.name == "All Examples" else d.name
        stored = m.feature_stats(split)
        assert d.num_examples == m.rows_of_split(split)
        f = features(d)
        assert sorted(f) == sorted(["id", "a", "x", "flag", "color", "word", "raw", "day",
                                    "nanf", "tags", "pair", "nest/values",
                                    "nest/row_lengths", "y"])
        a = f["a"].num_stats
        assert f["a"].type == statistics_pb2.FeatureNameStatistics.INT
        assert (a.common_stats.num_non_missing, a.common_stats.num_missing) == \
            (stored["a"]["rows"] - stored["a"]["nulls"], stored["a"]["nulls"])
        assert (a.min, a.max, a.mean) == (stored["a"]["min"], stored["a"]["max"],
                                          stored["a"]["mean"])
        assert a.std_dev == pytest.approx(math.sqrt(stored["a"]["variance"]))
        assert a.median == stored["a"]["quantiles"]["values"][4]
        assert a.num_zeros == dict(stored["a"]["top"])[0]
        quantiles, standard = a.histograms
        assert quantiles.type == statistics_pb2.Histogram.QUANTILES
        edges = [b.low_value for b in quantiles.buckets] + [quantiles.buckets[-1].high_value]
        assert edges == [stored["a"]["min"], *stored["a"]["quantiles"]["values"],
                         stored["a"]["max"]]
        for h in (quantiles, standard):
            assert sum(b.sample_count for b in h.buckets) == \
                pytest.approx(stored["a"]["count"])
        assert standard.type == statistics_pb2.Histogram.STANDARD and \
            len(standard.buckets) == 10
        nanf = f["nanf"].num_stats
        assert nanf.histograms[0].num_nan == stored["nanf"]["nan"] > 0
        color = f["color"]
        assert color.type == statistics_pb2.FeatureNameStatistics.STRING
        s = color.string_stats
        tfdv_order = sorted(stored["color"]["top"], key=lambda vn: (vn[1], vn[0]), reverse=True)
        assert s.unique == 3 and [[t.value, t.frequency] for t in s.top_values] == tfdv_order
        assert s.avg_length == pytest.approx(
            sum(len(v) * n for v, n in stored["color"]["top"]) /
            sum(n for _, n in stored["color"]["top"]))
        word = f["word"].string_stats
        assert len(word.top_values) == 20
        assert sorted([b.label, b.sample_count] for b in word.rank_histogram.buckets) == \
            sorted(stored["word"]["top"]) and word.unique == len(stored["word"]["top"]) > 100
        assert f["raw"].type == statistics_pb2.FeatureNameStatistics.STRING  # as TFDV has it
        tags = f["tags"].string_stats.common_stats
        length = stored["tags"]["length"]
        assert (tags.min_num_values, tags.max_num_values) == (length["min"], length["max"]) \
            == (0, 2)
        assert tags.num_missing == stored["tags"]["nulls"] > 0
        pair = f["pair"].num_stats
        assert (pair.common_stats.min_num_values, pair.common_stats.max_num_values,
                pair.common_stats.tot_num_values) == (2, 2, 2 * stored["pair"]["rows"])
        assert pair.mean == stored["pair"]["elements"]["mean"]
        values = f["nest/values"].num_stats
        assert values.common_stats.tot_num_values == stored["nest"]["elements"]["count"]
        assert values.mean == stored["nest"]["elements"]["mean"]
    one = tfspark.tfdv_statistics(ds, split="train")
    assert [d.name for d in one.datasets] == ["train"]
    assert one.datasets[0] == got.datasets[2]


# ---------------------------------------------------------------- schema


def test_the_schema_says_what_the_spec_and_the_statistics_know(data):
    schema = tfspark.tfmd_schema(data / "ds")
    assert isinstance(schema, schema_pb2.Schema)
    f = {x.name: x for x in schema.feature}
    assert list(f) == ["a", "color", "day", "flag", "id", "nanf", "nest/values",
                       "nest/row_lengths", "pair", "raw", "tags", "word", "x", "y"]
    types = {k: schema_pb2.FeatureType.Name(v.type) for k, v in f.items()}
    assert types == {"a": "INT", "color": "BYTES", "day": "INT", "flag": "INT", "id": "INT",
                     "nanf": "FLOAT", "nest/values": "INT", "nest/row_lengths": "INT",
                     "pair": "INT", "raw": "BYTES", "tags": "BYTES", "word": "BYTES",
                     "x": "FLOAT", "y": "INT"}
    assert [d.size for d in f["id"].shape.dim] == [1] and f["id"].presence.min_fraction == 1
    assert [d.size for d in f["pair"].shape.dim] == [2]
    for nullable in ("a", "color"):  # nulls: no shape, one value where present
        assert not f[nullable].HasField("shape") and f[nullable].presence.min_fraction == 0
        assert (f[nullable].value_count.min, f[nullable].value_count.max) == (1, 1)
    assert not f["tags"].HasField("value_count")  # lists may be empty
    assert (f["flag"].int_domain.min, f["flag"].int_domain.max) == (0, 1)  # a boolean
    domains = {d.name: list(d.value) for d in schema.string_domain}
    assert domains == {"color": ["blue", "green", "red"], "tags": ["a", "b"]}
    assert f["color"].domain == "color" and not f["word"].domain  # 150 values: no domain
    text = text_format.MessageToString(schema)
    (data / "schema.pbtxt").write_text(text)
    assert tfspark.store.tfx.load_schema(data / "schema.pbtxt") == schema
    (data / "schema.pb").write_bytes(schema.SerializeToString())
    assert tfspark.store.tfx.load_schema(data / "schema.pb") == schema


# ---------------------------------------------------------------- validation


def test_a_data_set_conforms_to_its_own_schema(data):
    report = tfspark.validate(data / "ds", tfspark.tfmd_schema(data / "ds"))
    assert report.ok and report.anomalies == [], report.render()
    assert report.datasets == ["split 'test'", "split 'train'"]
    assert "OK: every feature conforms to the schema" in report.render()


def test_each_planted_anomaly_is_one_line(data):
    schema = tfspark.tfmd_schema(data / "ds")
    f = {x.name: x for x in schema.feature}
    f["a"].int_domain.min, f["a"].int_domain.max = 0, 12
    f["nanf"].float_domain.disallow_inf = True
    f["x"].float_domain.min = -1.0
    report = tfspark.validate(data / "later", schema, split="train")
    assert report.datasets == ["split 'train'"]
    got = sorted(report.anomalies)
    assert got[0].startswith("a: values up to 20, above the schema's int domain max 12")
    assert got[1].startswith("color: 1 value(s) outside the schema's domain 'color': "
                             "'purple' (")
    assert got[2:] == [
        "extra: in the data set, not in the schema (a new feature)",
        "flag: in the schema, not in the data set (a feature gone)",
        f"id: missing in 1 of {tfspark.read_manifest(str(data / 'later')).rows_of_split('train')}"
        " rows; the schema says present in at least 100%",
        "nanf: 1 infinite value; the schema's float domain disallows them",
        "x: type INT, the schema says FLOAT (the type changed)"]
    both = tfspark.validate(data / "later", schema)
    assert both.datasets == ["split 'test'", "split 'train'"]
    assert all(a.startswith(("[test] ", "[train] ")) for a in both.anomalies)
    assert sorted(a[len("[train] "):] for a in both.anomalies if a.startswith("[train] ")) \
        == got


def test_value_counts_and_shapes_are_checked(data, tmp_path):
    schema = tfspark.tfmd_schema(data / "ds")
    f = {x.name: x for x in schema.feature}
    f["pair"].shape.dim[0].size = 3
    f["tags"].value_count.min = 1
    got = tfspark.validate(data / "ds", schema, split="test").anomalies
    assert got == ["pair: 2 values per row; the schema's shape [3] holds 3",
                   "tags: 0 to 2 values per row; the schema says at least 1"]


def test_an_optional_feature_may_be_gone(data):
    schema = tfspark.tfmd_schema(data / "ds")
    flag = [x for x in schema.feature if x.name == "flag"][0]
    flag.ClearField("presence")
    assert not any(a.startswith("flag") for a in
                   tfspark.validate(data / "later", schema, split="test").anomalies)


# ---------------------------------------------------------------- the commands


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_commands_write_the_files_and_validate_with_them(data, tmp_path, capsys):
    out = tmp_path / "tfx"
    code, printed, err = run(capsys, "stats", str(data / "ds"), "--format", "tfdv", "--out",
                             str(out))
    assert code == 0, err
    assert printed.splitlines() == [
        f"wrote {out / 'stats.pb'} (TFDV statistics of All Examples, test, train: 14 "
        f"features)",
        f"wrote {out / 'schema.pbtxt'} (TFMD schema: 14 features, 2 string domains)"]
    stats = statistics_pb2.DatasetFeatureStatisticsList.FromString(
        (out / "stats.pb").read_bytes())
    assert stats == tfspark.tfdv_statistics(data / "ds")
    assert text_format.Parse((out / "schema.pbtxt").read_text(), schema_pb2.Schema()) == \
        tfspark.tfmd_schema(data / "ds")
    assert sorted(p.name for p in out.iterdir()) == ["schema.pbtxt", "stats.pb"]
    code, printed, err = run(capsys, "validate", str(data / "ds"), "--schema",
                             str(out / "schema.pbtxt"))
    assert (code, err) == (0, ""), err
    assert printed.splitlines()[-1] == "  OK: every feature conforms to the schema"
    code, printed, err = run(capsys, "validate", str(data / "later"), "--schema",
                             str(out / "schema.pbtxt"), "--split", "test")
    assert code == 1, err
    lines = printed.splitlines()
    assert lines[:3] == [f"tfspark validate {data / 'later'} --schema {out / 'schema.pbtxt'} "
                         f"--split test",
                         "  statistics of split 'test'", "  4 anomalies:"]
    assert "  - flag: in the schema, not in the data set (a feature gone)" in lines
    code, printed, err = run(capsys, "stats", str(data / "ds"), "--format", "tfdv",
                             "--split", "test", "--out", str(out / "test"))
    assert code == 0, err
    only = statistics_pb2.DatasetFeatureStatisticsList.FromString(
        (out / "test" / "stats.pb").read_bytes())
    assert [d.name for d in only.datasets] == ["test"]


@pytest.mark.parametrize("args,line", [
    (["stats", "{ds}", "--format", "tfdv"],
     "error: stats --format tfdv: give --out DIR, the directory for stats.pb and "
     "schema.pbtxt"),
    (["stats", "{ds}", "--out", "{tmp}/o"],
     "error: stats: --out is where --format tfdv writes its files; add --format tfdv, or "
     "leave --out out"),
    (["stats", "{ds}", "--format", "tfdv", "--out", "{tmp}/o", "--split", "val"],
     "error: no split 'val' in {ds}; its splits are ['test', 'train']"),
    (["validate", "{ds}", "--schema", "{tmp}/none.pbtxt"],
     "error: cannot read the schema {tmp}/none.pbtxt (No such file or directory); give the "
     "path of a schema.pbtxt (tfspark stats PATH --format tfdv writes one)"),
    (["validate", "{ds}", "--schema", "{tmp}/bad.pbtxt"],
     "error: {tmp}/bad.pbtxt is not a TFMD Schema in text format (1:1 : Message type "
     "\"tensorflow.metadata.v0.Schema\" has no field named \"garbage\".); give a "
     "schema.pbtxt as tfdv.write_schema_text or tfspark stats --format tfdv writes"),
    (["validate", "{ds}", "--schema", "{tmp}/empty.pbtxt"],
     "error: {tmp}/empty.pbtxt holds no feature (it is empty): a schema to check against "
     "names them; give a schema.pbtxt as tfdv.write_schema_text or tfspark stats --format "
     "tfdv writes"),
    (["validate", "{ds}", "--schema", "{tmp}/stats.pb"],
     "error: {tmp}/stats.pb holds statistics (a DatasetFeatureStatisticsList), not a schema; "
     "give the schema.pbtxt beside it"),
])
def test_bad_arguments_are_one_line(data, tmp_path, capsys, args, line):
    (tmp_path / "bad.pbtxt").write_text("garbage {\n")
    (tmp_path / "empty.pbtxt").write_text("")
    (tmp_path / "stats.pb").write_bytes(tfspark.tfdv_statistics(data / "ds").SerializeToString())
    fill = {"ds": str(data / "ds"), "tmp": str(tmp_path)}
    code, printed, err = run(capsys, *[a.format(**fill) for a in args])
    assert code == 2 and err.splitlines() == [line.format(**fill)], err
    assert not (tmp_path / "o").exists()


def test_data_sets_without_statistics_or_spec_say_what_to_do(tmp_path):
    write(first(50), tmp_path / "nostats", stats=False)
    with pytest.raises(SchemaError, match=r"has no statistics of its rows \(written with "
                       r"stats=False\?\); write it again with statistics"):
        tfspark.tfmd_schema(tmp_path / "nostats")
    with pytest.raises(OptionError, match="no split 'val'"):
        tfspark.tfdv_statistics(tmp_path / "nostats", split="val")


def test_tfdv_on_our_files_runs_in_its_own_venv(data, tmp_path):
    """TFDV reads our stats.pb and schema.pbtxt; its own statistics of our TFRecords match
    ours, validate against our schema with no anomaly, and find the planted ones in a later
    export; the schema TFDV infers is ours. TFDV pins TF 2.16 and pyarrow 10: it runs in a
    venv of its own (`make test-tfdv` makes it), named by TFSPARK_TFDV_PYTHON."""
    import json
    import os

    python = os.environ.get("TFSPARK_TFDV_PYTHON")
    if not python:
        pytest.skip("TFDV runs in a venv of its own: make test-tfdv")
    assert main(["stats", str(data / "ds"), "--format", "tfdv", "--out",
                 str(tmp_path / "o")]) == 0
    check = os.path.join(os.path.dirname(__file__), "tfdv_check.py")
    done = subprocess.run([python, check, str(data / "ds"), str(tmp_path / "o"),
                           str(data / "later")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-5000:]
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert result["datasets"] == ["All Examples", "test", "train"]
    assert result["html"] > 1000 and result["ours_valid"] == {}
    changes: set[str] = set()
    for split, r in result["splits"].items():
        assert r["anomalies"] == {}, (split, r["anomalies"])
        assert r["inferred"] == r["schema"], split
        mine = tfspark.validate(data / "later", tmp_path / "o" / "schema.pbtxt", split=split)
        assert sorted(r["changed"]) == sorted({a.split(":")[0] for a in mine.anomalies}), \
            (split, r["changed"], mine.anomalies)
        changes.update(r["changed"])
        theirs, ours = r["theirs"], r["ours"]
        assert sorted(theirs) == sorted(ours)
        for name, t in theirs.items():
            o = ours[name]
            assert (o["stats"], o["non_missing"], o["missing"], o["tot_values"]) == \
                (t["stats"], t["non_missing"], t["missing"], t["tot_values"]), name
            if name != "nest/values":  # (values per row of a ragged feature: not kept)
                assert (o["min_values"], o["max_values"]) == \
                    (t["min_values"], t["max_values"]), name
            # (a ragged feature's row lengths: their mean alone is kept)
            for k in ("mean",) if name == "nest/row_lengths" else ("mean", "std_dev", "min",
                                                                  "max"):
                if k in t:
                    assert o[k] == pytest.approx(t[k], rel=1e-5, abs=1e-6), (name, k)
            if "unique" in t and name != "raw":  # (raw bytes: no distinct count kept)
                assert (o["unique"], o["top"]) == (t["unique"], t["top"]), name
    assert changes == {"color", "extra", "flag", "id", "x"}  # (the null id is in one split)
