"""The `tfspark` command line, run as a user runs it: in a subprocess, in a scratch directory.

export writes the backup into a warehouse under tmp; a second process (a new Spark session) must
still find the backup table there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tfspark
from tfspark.store.integrity import verify

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # tfspark importable from any cwd
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _write_small(spark, out: Path, backup: Path, compression: str | None) -> None:
    from tfspark.spark import export as workflow

    df = spark.createDataFrame(
        [(1, 0.5, "a", [1, 2], 1), (2, None, None, [], 0), (3, -1.5, "c", None, 1)],
        "id long, x double, s string, arr array<int>, y int")
    workflow.write_tfrecords(df, str(out), label_cols=["y"], compression=compression,
                             backup_path=str(backup), split={"train": 0.5, "test": 0.5},
                             split_key="id")


@pytest.mark.spark
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_inspect(spark, tmp_path, compression):
    out = tmp_path / "data"
    _write_small(spark, out, tmp_path / "backup", compression)
    done = _run(["-m", "tfspark.cli", "inspect", str(out), "--records", "5"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "3 Example records" in text and f"compression={compression or 'none'}" in text
    for header in ("feature", "kind", "dtype", "shape", "source type", "nullable", "default"):
        assert header in text
    assert text.count("record ") == 3 and "arr: [1, 2]" in text and "s: None" in text
    # One split only, and a lone file (no manifest: raw Example keys).
    manifest = json.loads((out / "_tfspark.json").read_text())
    split = manifest["splits"][0]  # with 3 rows, a split may well be empty
    done = _run(["-m", "tfspark.cli", "inspect", str(out), "--split", split], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    in_split = [f for f in manifest["files"] if f["split"] == split]
    assert done.stdout.count("record ") == sum(f["records"] for f in in_split)
    # A split it lacks: one line, and nothing of the data set printed before it.
    done = _run(["-m", "tfspark.cli", "inspect", str(out), "--split", "nope"], cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.strip() == f"error: no split 'nope' in {out}; its splits are " \
        f"{manifest['splits']}", done.stderr
    one = out / manifest["files"][0]["path"]
    done = _run(["-m", "tfspark.cli", "inspect", str(one), "--records", "1"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "record 0:" in done.stdout and "id: [" in done.stdout


def test_inspect_errors(tmp_path):
    done = _run(["-m", "tfspark.cli", "inspect", str(tmp_path)], cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "_tfspark.json" in \
        done.stderr and "Traceback" not in done.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_export_end_to_end_and_backup_persists(tmp_path):
    config = tmp_path / "export.toml"
    config.write_text('sample_rows = 2000\noutput = "out/data"\nmode = "overwrite"\n'
                      'label_cols = ["label"]\ncompression = "gzip"\n'
                      'backup_table = "tfspark_it.sample_backup"\nsplit_key = "id"\n'
                      'master = "local[2]"\n'
                      "[split]\ntrain = 0.8\nvalidation = 0.1\ntest = 0.1\n")
    done = _run(["-m", "tfspark.cli", "export", "--config", str(config),
                 "--warehouse", "wh"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2,000 rows" in done.stdout and "split train" in done.stdout
    # one task writes a file per split: the stage's estimate counts them
    assert "TFRecords (about 3 files" in done.stdout, done.stdout
    manifest = json.loads((tmp_path / "out/data/_tfspark.json").read_text())
    assert len(manifest["files"]) == 3
    assert manifest["records"] == 2000 and manifest["compression"] == "gzip"
    assert set(manifest["splits"]) == {"train", "validation", "test"}
    assert {f["name"] for f in manifest["spec"]["features"] if f["label"]} == {"label"}

    # A new process, a new Spark session: the table is in the warehouse's metastore.
    query = ("from tfspark.cli.session import local_session;"
             "from tfspark.cli.config import ExportConfig;"
             "s = local_session(ExportConfig(warehouse='wh', master='local[1]'));"
             "print('ROWS', s.sql('SELECT COUNT(*) FROM tfspark_it.sample_backup').first()[0]);"
             "s.stop()")
    again = _run(["-c", query], cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "ROWS 2000" in again.stdout

    # The gzip files read back, and a record decodes with its spec.
    shown = _run(["-m", "tfspark.cli", "inspect", "out/data", "--records", "1",
                  "--split", "validation"], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "2,000 Example records" in shown.stdout and "label: " in shown.stdout


def test_missing_source_file_exits_2_before_spark_starts(tmp_path):
    missing = tmp_path / "nope" / "events.parquet"
    done = _run(["-m", "tfspark.cli", "export", "--source", str(missing), "--output", "out",
                 "--warehouse", "wh"], cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"error: source '{missing}' not found: no such file or directory" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "wh").exists()


@pytest.mark.spark
@pytest.mark.slow
def test_missing_source_table_exits_2(tmp_path):
    done = _run(["-m", "tfspark.cli", "export", "--source", "tfspark_nope.events", "--output",
                 "out", "--warehouse", "wh", "--master", "local[1]"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "error: source 'tfspark_nope.events' not found: no such table" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()


@pytest.mark.spark
@pytest.mark.slow
def test_a_source_uri_spark_cannot_read_is_one_line_without_its_secret(tmp_path):
    """Spark reads the source: a scheme its Hadoop has no file system for (s3:// here, no
    hadoop-aws) fails in one line naming the source redacted, not in Spark's JVM trace
    (which printed the URI with its secret)."""
    uri = "s3://AKIA:S3CR3T@bucket/events?endpoint_override=127.0.0.1:1&region=r"
    done = _run(["-m", "tfspark.cli", "export", "--source", uri, "--output", "out",
                 "--warehouse", "wh", "--master", "local[1]"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith("error: cannot read source 's3://AKIA:***@bucket/events?...': "
                                  "Spark reads the source through its Hadoop file systems, "
                                  "and this Spark has none for s3://"), done.stderr[-3000:]
    assert "S3CR3T" not in done.stdout + done.stderr and "\tat " not in done.stderr
    assert len(done.stderr.splitlines()) <= 2 and not (tmp_path / "out").exists()


def test_job_entry_point_parses_the_export_flags(tmp_path):
    done = _run([str(ROOT / "jobs" / "export_tfrecords.py"), "--help"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--config" in done.stdout and "--backup-table" in done.stdout



@pytest.mark.spark
@pytest.mark.tf
def test_inspect_reads_a_gzip_file_whatever_its_name(spark_tf, tmp_path):
    out = tmp_path / "gz"
    tfspark.write_tfrecords(spark_tf.range(20), str(out), compression="gzip")
    part = next(p for p in out.iterdir() if p.name.endswith(".tfrecord.gz"))
    renamed = tmp_path / "no_suffix.tfrecord"
    renamed.write_bytes(part.read_bytes())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "inspect", str(renamed),
                           "--records", "2"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "record 1:" in done.stdout, done.stderr
    assert json.loads((out / "_tfspark.json").read_text())["compression"] == "gzip"


@pytest.mark.spark
@pytest.mark.tf
@pytest.mark.slow  # the CLI in processes of its own: a JVM each
def test_export_of_the_sample_outside_the_repo_needs_no_output_and_is_quiet(tmp_path):
    """Run where there is no conf/: the sample goes to a default path, which is printed; and
    Spark's own warnings (hidden paths, loopback hostname) do not reach the user."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SPARK_LOCAL_IP", None)
    env.pop("SPARK_CONF_DIR", None)
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "export", "--sample-rows",
                           "200", "--master", "local[1]"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    where = tmp_path / "tfspark_sample" / "tfrecords"
    assert f"the embedded sample goes to {where}" in done.stdout
    assert verify(str(where)).ok
    # the JVM's start-up notices (incubator modules, log4j profile) are left out too, and
    # Spark's stage bar, which only a terminal redraws in place
    noise = [ln for ln in done.stderr.replace("\r", "\n").splitlines() if ln.strip()]
    assert not noise, noise
    # the stages say what they did, with their rows
    assert re.search(r"^tfspark: TFRecords \(about 1 file and the feature statistics\)",
                     done.stdout, re.M), done.stdout
    for stage in ("backup", "TFRecords"):
        assert re.search(rf"^tfspark: {stage}: 200 rows in [\d.]+ s", done.stdout, re.M), \
            done.stdout
    assert re.search(r"^tfspark: commit: [\d.]+ s$", done.stdout, re.M), done.stdout

