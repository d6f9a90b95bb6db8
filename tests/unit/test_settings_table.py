"""The table of write settings (WriteOptions' fields) is where every surface comes from:
write_tfrecords' signature, the data source's options, the export config keys and flags, and
the documentation's table of settings."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfspark.cli.config import KEYS, ExportConfig
from tfspark.cli.main import build_parser
from tfspark.errors import OptionError
from tfspark.store.options import WriteOptions, write_settings

ROOT = Path(__file__).resolve().parents[2]
TABLE = write_settings()


def test_write_tfrecords_takes_every_workflow_setting():
    pytest.importorskip("pyspark")
    from tfspark.spark.export import write_tfrecords

    params = list(inspect.signature(write_tfrecords).parameters.values())
    assert [p.name for p in params[:3]] == ["df", "path", "filesystem"]
    assert {p.name: p.default for p in params[3:]} == \
        {t.name: t.default for t in TABLE if t.workflow}
    for t in TABLE:
        if t.workflow:
            assert f"\n        {t.name}: " in (write_tfrecords.__doc__ or "")


def test_export_config_and_flags_cover_every_workflow_setting():
    flags = build_parser()._subparsers._group_actions[0].choices["export"].format_help()
    for t in TABLE:
        if not t.workflow:
            continue
        assert t.config_key in KEYS
        assert "--" + t.config_key.replace("_", "-") in flags, t.name
        assert getattr(ExportConfig(), t.config_key) == t.config_value


def test_the_data_source_knows_every_option_and_lists_them():
    with pytest.raises(OptionError) as info:
        WriteOptions.from_source_options({"path": "/x", "bogus": "1"})
    for t in TABLE:
        if t.option:
            assert f"{t.option} (" in str(info.value)
            assert not t.workflow or t.name in {x.name for x in TABLE}


def test_the_documentations_tables_are_the_tables():
    """docs/writing.md (and reading.md) show the settings tables as generated from them."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "docs_tables.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (ROOT / "docs" / "writing.md").read_text()
    named = set(re.findall(r"^\| (?:`(\w+)`|\(data source only\)) .*?\| `?(\w*)`? \|", text,
                           re.M))
    assert {t.option for t in TABLE if t.option} <= {o for _, o in named}
    assert {t.name for t in TABLE if t.workflow} <= {k for k, _ in named}


def test_a_setting_checks_its_value_on_every_surface():
    with pytest.raises(OptionError, match="gzip_level must be an integer from 1 to 9"):
        WriteOptions.from_arguments("/x", gzip_level=10)
    with pytest.raises(OptionError, match="option gzipLevel must be an integer from 1 to 9"):
        WriteOptions.from_source_options({"path": "/x", "gzipLevel": "10"})
    with pytest.raises(OptionError, match="key 'gzip_level' in command line must be an int"):
        ExportConfig().with_overrides(gzip_level="9")
    assert ExportConfig(output="/x").with_overrides(gzip_level=9).write_options().gzip_level == 9


def test_one_entry_makes_a_setting_on_every_surface():
    """`description` is one WriteOptions field: it is a write_tfrecords keyword, a data-source
    option, an export config key and a flag, all checked the same way."""
    names = {t.name: t for t in TABLE}
    assert names["description"].option == "description"
    assert "description" in KEYS
    export = build_parser()._subparsers._group_actions[0].choices["export"]
    assert "--description" in export.format_help()
    opts = WriteOptions.from_source_options({"path": "/x", "description": "clicks, v2"})
    assert opts.description == "clicks, v2"
    with pytest.raises(OptionError, match="description"):
        WriteOptions.from_arguments("/x", description=3)


def test_the_drivers_write_and_read_planning_import_no_kernels():
    """write_tfrecords' driver side (options, plan, commit, statistics' merge) and the read
    planner import neither numba (0.2 s of a first write) nor crc32c: the kernels load in the
    tasks and readers that run them."""
    code = ("import sys, tfspark.spark.export, tfspark.store.read_plan, tfspark.store.stats.sketch;"
            "bad = [m for m in ('numba', 'crc32c', 'tensorflow') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_every_reader_takes_its_options_from_one_table():
    """make_dataset's and read_batches' keywords are the table's, with its defaults; the
    readers that pass options on (torch_dataset, grain_dataset, a converter's) show them too.
    Adding a read option without its table entry (or the other way round) fails here."""
    from tfspark.converter import Converter
    from tfspark.numpy.frameworks import grain_dataset, torch_dataset
    from tfspark.numpy.read import read_batches
    from tfspark.store.options import read_settings

    def keywords(fn, skip=()):
        return {p.name: p.default for p in inspect.signature(fn).parameters.values()
                if p.kind == p.KEYWORD_ONLY and p.name not in skip}

    batches = {t.name: t.default for t in read_settings("read_batches")}
    assert keywords(read_batches) == batches
    assert keywords(torch_dataset) == keywords(grain_dataset) == batches
    assert keywords(Converter.read_batches) == {k: v for k, v in batches.items()
                                                if k != "filesystem"}
    for t in read_settings("read_batches"):
        assert f"\n        {t.name}: " in torch_dataset.__doc__
    pytest.importorskip("tensorflow")
    from tfspark.tf.dataset import make_dataset

    assert keywords(make_dataset) == {t.name: t.default for t in read_settings("make_dataset")}


def test_a_read_option_is_checked_the_same_in_every_reader(tmp_path):
    from tfspark.store.options import ReadOptions

    with pytest.raises(OptionError, match=r"^shuffle_buffer must be an int >= 0"):
        ReadOptions.checked("read_batches", shuffle_buffer=-1)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['shufle'\].*"
                                        r"shuffle"):
        ReadOptions.checked("read_batches", shufle="global")
    with pytest.raises(TypeError, match="'cache'"):  # make_dataset's, not read_batches'
        ReadOptions.checked("read_batches", cache=True)
