"""ExportConfig: TOML loading, validation messages, command-line overrides."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tfspark.cli import config as config_module
from tfspark.cli.config import KEYS, ExportConfig, load_config, packaged
from tfspark.errors import OptionError

ROOT = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "export.toml"
    path.write_text(text)
    return path


def test_defaults():
    cfg = ExportConfig()
    assert cfg.source is None and cfg.mode == "errorifexists" and cfg.compression is None
    assert cfg.master == "local[*]" and cfg.warehouse == "warehouse"
    assert cfg.sample_rows == 100_000


def test_every_field_has_a_rule():
    assert set(config_module._RULES) == set(KEYS)


def test_load_full(tmp_path):
    path = _write(tmp_path, """
source = "data/in.csv"
source_format = "CSV"
csv_header = false
output = "out/x"
mode = "overwrite"
label_cols = ["y", "z"]
compression = "GZIP"
backup_table = "db.t"
split_key = "id"
seed = 7
shuffle = true
target_file_mb = 64
max_records_per_file = 1000
partition_by = ["country"]
null_elements = "drop"

[split]
train = 0.8
test = 0.2

[shapes]
emb = [8]

[defaults]
age = -1
name = "?"
""")
    cfg = load_config(path)
    assert cfg.source == "data/in.csv" and cfg.source_format == "csv" and not cfg.csv_header
    assert cfg.label_cols == ("y", "z") and cfg.compression == "gzip"
    assert cfg.split == {"train": 0.8, "test": 0.2}
    assert cfg.shapes == {"emb": (8,)} and cfg.defaults == {"age": -1, "name": "?"}
    assert cfg.target_file_mb == 64.0 and cfg.partition_by == ("country",)
    kw = cfg.write_kwargs()
    assert kw["target_file_bytes"] == 64 * 2**20 and kw["shapes"] == {"emb": [8]}
    assert kw["split"] == {"train": 0.8, "test": 0.2} and kw["mode"] == "overwrite"


def test_the_packaged_config_loads():
    cfg = load_config(packaged("export.toml"))
    assert cfg.source is None and cfg.output == "out/sample_tfrecords"
    assert cfg.backup_table == "tfspark_demo.sample_backup" and cfg.label_cols == ("label",)
    assert cfg.split == {"train": 0.8, "validation": 0.1, "test": 0.1}
    assert cfg.split_key == "id" and cfg.compression == "gzip" and cfg.mode == "overwrite"


def test_unknown_key_names_key_file_and_allowed_keys(tmp_path):
    path = _write(tmp_path, 'outptu = "x"\n')
    with pytest.raises(OptionError) as info:
        load_config(path)
    msg = str(info.value)
    assert "'outptu'" in msg and str(path) in msg and "output" in msg and "label_cols" in msg
    assert "(did you mean 'output'?)" in msg  # a typo is named with the key it is close to


def test_a_mistyped_write_setting_names_the_setting_it_is_close_to():
    from tfspark.store.options import WriteOptions

    with pytest.raises(TypeError, match=r"\['splits'\] \(did you mean 'split'\?\)$"):
        WriteOptions.from_arguments("/tmp/x", splits={"train": 1.0})
    with pytest.raises(TypeError, match=r"\['colour'\]$"):  # nothing close: no guess
        WriteOptions.from_arguments("/tmp/x", colour="red")
    with pytest.raises(OptionError, match=r"\['partitonby'\] \(did you mean 'partitionBy'"):
        WriteOptions.from_source_options({"path": "/tmp/x", "partitonBy": "c"})


@pytest.mark.parametrize("text, key", [
    ('mode = "replace"', "mode"),
    ('compression = "zstd"', "compression"),
    ('label_cols = "y"\nseed = "1"', "seed"),
    ("label_cols = [1]", "label_cols"),
    ("shuffle = 1", "shuffle"),
    ("target_file_mb = 0", "target_file_mb"),
    ("sample_rows = 0", "sample_rows"),
    ("max_records_per_file = 2.5", "max_records_per_file"),
    ('source_format = "orc"', "source_format"),
    ("split = 0.8", "split"),
    ("[split]\ntrain = -1", "split.train"),
    ('[shapes]\nemb = "8"', "shapes.emb"),
    ("[defaults]\nflag = true", "defaults.flag"),
    ('output = ""', "output"),
])
def test_bad_values_name_the_key_and_file(tmp_path, text, key):
    path = _write(tmp_path, text + "\n")
    with pytest.raises(OptionError) as info:
        load_config(path)
    assert f"'{key}'" in str(info.value) and str(path) in str(info.value)


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(OptionError, match="not valid TOML"):
        load_config(_write(tmp_path, "mode = \n"))
    with pytest.raises(OptionError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_none_strings_unset_optional_values(tmp_path):
    cfg = load_config(_write(tmp_path, 'compression = "none"\nbackup_table = ""\n'))
    assert cfg.compression is None and cfg.backup_table is None


def test_overrides_skip_none_and_validate():
    base = ExportConfig(output="a", mode="overwrite", label_cols=("y",))
    cfg = base.with_overrides(output="b", mode=None, label_cols="p, q", split="train=0.9,test=0.1",
                              compression="none", seed=3)
    assert cfg.output == "b" and cfg.mode == "overwrite" and cfg.label_cols == ("p", "q")
    assert cfg.split == {"train": 0.9, "test": 0.1} and cfg.compression is None and cfg.seed == 3
    assert base.output == "a"  # frozen: the original is unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.output = "c"  # type: ignore[misc]
    with pytest.raises(OptionError, match="'mode' in command line"):
        base.with_overrides(mode="upsert")
    with pytest.raises(OptionError, match="unknown key 'colour'"):
        base.with_overrides(colour="red")
    with pytest.raises(OptionError, match="'split'"):
        base.with_overrides(split="train:0.8")


def test_source_kind(tmp_path):
    def kind(src: str, fmt: str = "auto") -> str:
        return ExportConfig(source=src, source_format=fmt).source_kind()

    assert kind("db.events") == "table" and kind("events") == "table"
    assert kind("data/x.parquet") == "parquet" and kind("x.CSV") == "csv"
    assert kind("gs://b/events/") == "parquet" and kind("/data/events") == "parquet"
    assert kind("db.events", "csv") == "csv"
    csv_dir = tmp_path / "csvs"
    csv_dir.mkdir()
    (csv_dir / "part-0.csv").write_text("a\n1\n")
    assert kind(str(csv_dir)) == "csv"
    (csv_dir / "part-1.parquet").write_bytes(b"")
    assert kind(str(csv_dir)) == "parquet"


def test_a_backup_flag_replaces_the_files_other_kind_of_backup(tmp_path):
    cfg = load_config(_write(tmp_path, 'backup_table = "db.t"\n'))
    by_path = cfg.with_overrides(backup_path="out/copy")
    assert by_path.backup_path == "out/copy" and by_path.backup_table is None
    by_table = by_path.with_overrides(backup_table="db.u")
    assert by_table.backup_table == "db.u" and by_table.backup_path is None
    assert cfg.with_overrides(compression="gzip").backup_table == "db.t"


def test_the_packaged_log4j_config_is_conf_s():
    # The CLI ships a copy (an installed wheel has no conf/); the two must not drift apart.
    packaged = ROOT / "tfspark" / "cli" / "log4j2.properties"
    assert packaged.read_text() == (ROOT / "conf" / "log4j2.properties").read_text()


def test_print_config_prints_what_the_demo_uses_and_it_loads_back(tmp_path, capsys):
    """From a wheel there is no conf/: `--print-config` gives a config to start from."""
    from tfspark.cli.main import main

    for command, name in (("export", "export.toml"), ("train", "train.toml")):
        assert main([command, "--print-config"]) == 0
        text = capsys.readouterr().out
        assert text == packaged(name).read_text()
        assert f"tfspark {command} --print-config > {name}" in text
        (tmp_path / name).write_text(text)
    assert load_config(tmp_path / "export.toml") == load_config(packaged("export.toml"))
