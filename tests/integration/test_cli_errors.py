"""`tfspark` on the command line when things go wrong: one readable line (plus a hint), no
traceback, a non-zero exit; the traceback only with --debug. Help texts read well.

Errors found before any JVM starts are checked in this process (`main(argv)` in a scratch
directory); what needs Spark, Java or a signal runs as a user runs it, in a subprocess.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfspark.cli.errors import describe_error
from tfspark.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("export", "demo", "spec", "inspect", "stats", "validate", "verify", "index", "train")


def _run(args: list[str], cwd: Path, timeout: int = 120,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "tfspark.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli(tmp_path, capsys, monkeypatch):
    """main(argv) run in tmp_path, as a finished process: (returncode, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)

    def run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
        code = main(args)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def _one_error(done: subprocess.CompletedProcess, hint: str | None = None) -> str:
    """The error line of a failed run; checks exit 2, no traceback, at most a hint after it."""
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [ln for ln in _lines(done.stderr) if not ln.startswith("WARNING: Using incubator")]
    assert lines and lines[0].startswith("error: "), done.stderr
    assert len(lines) <= 2, done.stderr
    if hint is not None:
        assert len(lines) == 2 and lines[1].startswith("hint: ") and hint in lines[1], lines
    return lines[0]


# ---------------------------------------------------------------- errors without Spark

def test_inspect_missing_path_is_one_line_with_a_hint(tmp_path, cli):
    done = cli(["inspect", "no/such/data"])
    line = _one_error(done, hint="check the path")
    assert line == "error: no/such/data: No such file or directory"
    assert str(tmp_path) in done.stderr  # the hint says where relative paths start

def test_gcs_without_credentials_says_so_in_one_line(tmp_path):
    """No Application Default Credentials (no key file, no gcloud login, no metadata server:
    here one on loopback where nothing listens): pyarrow's GCS client retries getting a token,
    for 15 minutes by default, then says "Could not create a OAuth2 access token" among
    curl's words, which read as an unreachable server. It gives up after the [store] table's
    retry_time_limit (a minute by default) and the line says what to set."""
    from stores import free_port

    (tmp_path / "home").mkdir()
    (tmp_path / "store.toml").write_text("[store]\nretry_time_limit = 1\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG")}
    env.update(HOME=str(tmp_path / "home"), GCE_METADATA_ROOT=f"127.0.0.1:{free_port()}",
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "tfspark.cli", "inspect", "gs://bkt/ds",
                           "--store", str(tmp_path / "store.toml")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    line = _one_error(done)
    assert line.startswith("error: cannot read gs://bkt/ds/_tfspark.json"), line
    assert line.endswith("Cloud Storage got no access token (no credentials found): run `gcloud "
                         "auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS "
                         "to a service account's key file, or pass filesystem= (the CLI: a "
                         "[store] table, with anonymous = true for a public bucket or an "
                         "emulator)"), line
    assert "no server answered" not in line



@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_prints_the_traceback(tmp_path, where, cli):
    args = ["inspect", "no/such/data"]
    args = ["--debug", *args] if where == "before" else [*args, "--debug"]
    done = cli(args)
    assert done.returncode == 2
    assert "Traceback (most recent call last)" in done.stderr
    assert "FileNotFoundError" in done.stderr
    assert _lines(done.stderr)[-2] == "error: no/such/data: No such file or directory"


def test_verify_missing_path_and_non_tfspark_directory(tmp_path, cli):
    _one_error(cli(["verify", "missing"]), hint="check the path")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("not a data set\n")
    # Nothing to verify is a wrong argument (exit 2, one line), not a damaged data set (1).
    line = _one_error(cli(["verify", "plain"]))
    assert line.startswith("error: no _tfspark.json in 'plain'"), line
    line = _one_error(cli(["verify", "/etc"]))
    assert line.startswith("error: no _tfspark.json in '/etc'"), line
    # A damaged manifest is a problem of the data set: the report, exit 1.
    (tmp_path / "plain" / "_tfspark.json").write_text("{not json")
    done = cli(["verify", "plain"])
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert "1 problem(s)" in done.stdout and "is not valid JSON" in done.stdout


def test_verify_on_a_missing_bucket_or_a_silent_server_is_one_line(tmp_path, cli, s3):
    store = tmp_path / "store.toml"
    store.write_text(f'[store]\naccess_key = "testing"\nsecret_key = "testing"\n'
                     f'endpoint_override = "{s3.endpoint()}"\nscheme = "http"\n'
                     f'region = "us-east-1"\n')
    line = _one_error(cli(["verify", "s3://no-such-bucket/ds", "--store", str(store)]))
    assert "'s3://no-such-bucket/ds' does not exist" in line and "bucket" in line, line
    silent = tmp_path / "silent.toml"
    silent.write_text(store.read_text().replace(s3.endpoint(), "127.0.0.1:9"))
    line = _one_error(cli(["verify", "s3://b/ds", "--store", str(silent)]))
    assert "no server answered" in line and "testing" not in line, line


def test_an_empty_tfrecord_file_is_said_to_hold_no_records(tmp_path, cli):
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    done = cli(["inspect", "empty.tfrecord"])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == "empty.tfrecord: a TFRecord file holding no records\n"
    done = cli(["verify", "empty.tfrecord"])  # a file of no records is a whole one
    assert done.returncode == 0 and "files 1  records 0" in done.stdout, done.stdout


def test_inspect_non_tfspark_directory_and_corrupt_file(tmp_path, cli):
    (tmp_path / "plain").mkdir()
    line = _one_error(cli(["inspect", "plain"]))
    assert line.startswith("error: no _tfspark.json in 'plain'")
    (tmp_path / "junk.tfrecord").write_bytes(b"this is not a TFRecord file at all" * 3)
    line = _one_error(cli(["inspect", "junk.tfrecord"]))
    assert "junk.tfrecord" in line and "CRC" in line


def test_export_config_unknown_key_and_bad_value(tmp_path, cli):
    conf = tmp_path / "export.toml"
    conf.write_text('output = "out"\ncompresion = "gzip"\n')
    line = _one_error(cli(["export", "--config", str(conf)]))
    assert "unknown key 'compresion'" in line and str(conf) in line
    conf.write_text('output = "out"\ntarget_file_mb = -1\n')
    line = _one_error(cli(["export", "--config", str(conf)]))
    assert "key 'target_file_mb'" in line and "positive number" in line
    conf.write_text('output = "out"\n[split\n')
    line = _one_error(cli(["export", "--config", str(conf)]))
    assert "is not valid TOML" in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "warehouse").exists()


@pytest.mark.parametrize("args,line", [
    (["export", "--compression", "lz4"], "error: tfspark export: argument --compression: "
                                         "invalid choice: 'lz4' (choose from 'gzip', 'none')"),
    (["train", "--backend", "pytorch"], "error: tfspark train: argument --backend: invalid "
                                        "choice: 'pytorch' (choose from 'tensorflow', 'jax')"),
    ([], "error: tfspark: the following arguments are required: COMMAND"),
    (["inspect"], "error: tfspark inspect: the following arguments are required: path"),
])
def test_a_usage_error_is_one_line_and_a_hint(capsys, args, line):
    """argparse prints the whole usage before its error (25 lines for export): here the error
    line and where the usage is, exit 2 as every error."""
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    command = " ".join(["tfspark", *args[:1]])
    assert _lines(capsys.readouterr().err) == [line, f"hint: run `{command} --help` for its "
                                                     f"usage"]


def test_bad_flag_value_and_missing_config_in_process(tmp_path, capsys):
    assert main(["export", "--output", "out", "--split", "train=lots"]) == 2
    err = _lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("error: key 'split' in command line")
    assert "name=fraction pairs" in err[0]
    assert main(["train", "--config", str(tmp_path / "nope.toml")]) == 2
    err = capsys.readouterr().err
    assert len(_lines(err)) == 1 and "config file" in err and "not found" in err
    assert main(["train", "--workers", "0"]) == 2
    assert _lines(capsys.readouterr().err) == [
        "error: key 'workers' in the command line must be an integer >= 1, got 0"]
    assert main(["train", "--workers", "2", "--master", ""]) == 2
    assert _lines(capsys.readouterr().err) == [
        "error: key 'master' in the command line must be a non-empty string, got ''"]
    # Keras saves to files: a URI was found after training (TensorFlow's "scheme 's3' not
    # implemented", and a local directory named "s3:"), or after Spark had started
    for flags in (["--model-out", "s3://b/m.keras?secret_key=x"],
                  ["--workers", "2", "--checkpoint-dir", "gs://b/c"]):
        assert main(["train", str(tmp_path), *flags]) == 2
        err = _lines(capsys.readouterr().err)
        assert len(err) == 1 and "in the command line: Keras saves to files, so give a local " \
            "path" in err[0] and "secret_key" not in err[0], err
    assert main(["inspect", str(tmp_path), "--records", "-1"]) == 2
    assert _lines(capsys.readouterr().err) == ["error: --records must be >= 0, got -1"]
    # train takes the data set as inspect and verify do (or as --data), not twice
    assert main(["train", str(tmp_path / "nope")]) == 2
    err = _lines(capsys.readouterr().err)
    assert err[0] == f"error: {tmp_path / 'nope'}: No such file or directory", err
    assert main(["train", "a", "--data", "b"]) == 2
    assert _lines(capsys.readouterr().err) == [
        "error: train: the data set is named twice, 'a' and --data 'b'; give one"]


def test_java_missing_gives_the_java_hint(tmp_path):
    (tmp_path / "t.parquet").write_bytes(b"")  # exists: the check before Spark passes
    done = _run(["spec", "--parquet", "t.parquet", "--warehouse", "wh"], cwd=tmp_path,
                env={"JAVA_HOME": str(tmp_path / "no-jdk")})
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    errors = [ln for ln in _lines(done.stderr) if ln.startswith(("error: ", "hint: "))]
    assert errors[0].startswith("error: [JAVA_GATEWAY_EXITED]"), done.stderr
    assert errors[1].startswith("hint: Spark needs Java 17+"), done.stderr


def test_ctrl_c_exits_130_without_traceback(tmp_path):
    """SIGINT while the command blocks reading its config (a FIFO nobody writes to)."""
    fifo = tmp_path / "export.toml"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tfspark.cli", "export", "--config",
                             str(fifo)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    writer = None
    try:
        deadline = time.monotonic() + 60
        while writer is None:  # opening the write end succeeds once the CLI has it open
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.05)
        time.sleep(0.2)  # let it enter read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if writer is not None:
            os.close(writer)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert _lines(err) == ["error: interrupted"]


@pytest.mark.spark
@pytest.mark.slow
def test_ctrl_c_during_a_spark_job_prints_one_line(tmp_path):
    """SIGINT while an export's Spark job runs: no py4j tracebacks (PySpark's own handler
    re-enters py4j), no JVM stack traces of the aborted job; nothing committed is left."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tfspark.cli", "export", "--sample-rows",
                             "3000000", "--master", "local[2]", "--output", str(out),
                             "--warehouse", str(tmp_path / "wh")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        # the backup's first task files: a job is running (os.walk, unlike rglob, skips the
        # temporary directories that vanish while it lists)
        while not any(n.startswith("part-") for _, _, names in os.walk(out) for n in names):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    shown = [ln for ln in _lines(err)  # the JVM's start-up notice and Spark's progress bar
             if not ln.startswith(("WARNING: Using incubator modules", "[Stage"))]
    assert shown[-1].endswith("error: interrupted") and len(shown) == 1, err[-3000:]
    assert "Traceback" not in err and "\tat " not in err
    assert not (out / "_tfspark.json").exists()


# ---------------------------------------------------------------- Spark-shaped messages

def test_spark_errors_are_reduced_to_their_class_and_first_line():
    from py4j.protocol import Py4JError
    from pyspark.errors import AnalysisException, ParseException, PythonException

    message, hint = describe_error(AnalysisException(
        "[PATH_NOT_FOUND] Path does not exist: file:/data/x. SQLSTATE: 42K03"))
    assert message == "[PATH_NOT_FOUND] Path does not exist: file:/data/x."
    assert hint is not None and "check the path" in hint
    message, _ = describe_error(ParseException(
        "\n[PARSE_SYNTAX_ERROR] Syntax error at or near 'selec'. SQLSTATE: 42601 (line 1, pos 0)"
        "\n\n== SQL ==\nselec 1\n^^^\n"))
    assert message == "[PARSE_SYNTAX_ERROR] Syntax error at or near 'selec'. (line 1, pos 0)"
    worker = ("An exception was thrown from the Python worker:\nTraceback (most recent call "
              "last):\n  File \"/x/worker.py\", line 1, in main\n    process()\n"
              "tfspark.errors.EncodeError: column 'tags' row 7: null element\n")
    assert describe_error(PythonException(worker))[0] == \
        "EncodeError: column 'tags' row 7: null element"
    jvm = ("An error occurred while calling o42.save.\n: org.apache.spark.SparkException: "
           "[TASK_WRITE_FAILED] Task failed while writing rows.\n\tat org.apache.spark.Foo."
           "bar(Foo.scala:1)\n\tat java.base/java.lang.Thread.run(Thread.java:840)\nCaused by: "
           "java.io.IOException: No space left on device\n\t... 12 more\n")
    message, hint = describe_error(Py4JError(jvm))
    assert message == ("org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while "
                       "writing rows.")
    assert hint is not None and "--debug" in hint


def test_other_errors():
    assert describe_error(PermissionError(13, "Permission denied", "/srv/x")) == \
        ("/srv/x: Permission denied", "check the permissions of the file and its directory")
    message, hint = describe_error(ModuleNotFoundError("No module named 'tensorflow'",
                                                       name="tensorflow"))
    assert message == "tensorflow is not installed" and "pyspark-tfrecord[tf]" in (hint or "")
    message, hint = describe_error(RuntimeError("first line\nsecond line"))
    assert message == "RuntimeError: first line" and "--debug" in (hint or "")
    assert describe_error(KeyboardInterrupt()) == ("interrupted", None)
    # a long line loses its middle: what to do (after a "; ") is kept whole
    from tfspark.errors import OptionError

    todo = "check the endpoint " + "x" * 200
    message, _ = describe_error(OptionError(f"cannot read a ({'w' * 500}); {todo}"))
    assert len(message) == 600 and message.endswith(f" ... {todo}"), message
    assert message.startswith("cannot read a (www")
    message, _ = describe_error(OptionError("w" * 700))  # nothing to keep: its last third
    assert len(message) == 600 and message.endswith(" ... " + "w" * 200), message


# ---------------------------------------------------------------- help texts

def test_top_level_help_lists_commands_and_examples(tmp_path):
    done = _run(["--help"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for name in COMMANDS:
        assert f"\n    {name} " in text, name  # each command with its one-line description
    assert "examples:" in text and text.count("\n  tfspark ") >= 3 and "--debug" in text


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_has_a_description_and_every_option_help():
    parser = build_parser()
    subs = _subparsers(parser)
    assert set(subs) == set(COMMANDS)
    missing = []
    for name, sub in [("tfspark", parser), *subs.items()]:
        if sub is not parser and not (sub.description or "").strip():
            missing.append(f"{name}: no description")
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"no help text: {missing}"


def test_subcommand_help_runs(tmp_path):
    done = _run(["inspect", "--help"], cwd=tmp_path)
    assert done.returncode == 0 and "--debug" in done.stdout and "--records" in done.stdout
    assert "Needs no Spark" in done.stdout


# ---------------------------------------------------------------- one Spark error end to end

@pytest.mark.spark
@pytest.mark.slow
def test_spark_error_during_export_is_one_line(tmp_path):
    done = _run(["export", "--sample-rows", "50", "--output", "out", "--backup-table",
                 "tfspark_it.bad name", "--warehouse", "wh", "--master", "local[1]"],
                cwd=tmp_path, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    # Spark's own log lines may come first; ours are the last two.
    assert "Traceback" not in done.stderr and "\tat " not in done.stderr
    line, hint = _lines(done.stderr)[-2:]
    assert line.startswith("error: [PARSE_SYNTAX_ERROR] ") and "SQLSTATE" not in line
    assert hint.startswith("hint: ") and "--debug" in hint
    assert sum(ln.startswith("error: ") for ln in _lines(done.stderr)) == 1


def test_the_spark_submit_job_reports_one_line_too(tmp_path):
    """jobs/export_tfrecords.py (the spark-submit entry point) formats errors like the CLI;
    with --debug it raises with the traceback. The config is checked before Spark starts."""
    job = [sys.executable, str(ROOT / "jobs" / "export_tfrecords.py"), "--config", "nope.toml"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(job, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    line = _one_error(done)
    assert "config file" in line and "nope.toml" in line and "not found" in line
    done = subprocess.run([*job, "--debug"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1 and "Traceback (most recent call last)" in done.stderr


def test_train_on_workers_checks_its_settings_before_spark_runs_a_task(spark, tmp_path, cli):
    """`tfspark train --workers 2` with a setting every worker would refuse, or that the
    checkpoints of an unfinished run cannot continue: one line at once, and no Spark job.
    (Found in the workers, it failed each worker of each of the four attempts of the stage
    Spark retries: half a minute and pages of Spark's log before the error.)"""
    from pyspark.sql import functions as F

    import tfspark

    data = str(tmp_path / "ds")
    df = spark.range(200).select("id", (F.col("id") % 2).alias("y"),
                                 (F.col("id") * 0.5).alias("x"))
    tfspark.write_tfrecords(df, data, label_cols=["y"], split={"train": 0.8, "validation": 0.2},
                            split_key="id")
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup()
    workers = ["train", data, "--workers", "2", "--model-out", str(tmp_path / "m.keras")]
    for flags, words in ((["--label", "nosuch"], "label 'nosuch' is not a feature"),
                         (["--batch-size", "33"], "batch_size 33 is the global batch of 2 "
                                                  "workers: make it a multiple of 2"),
                         (["--backend", "jax", "--label", "nosuch"], "label 'nosuch'"),
                         (["--validation-split", "nope"], "has splits ['train', 'validation'] "
                          "but no 'nope' to validate on: set validation_split "
                          "(--validation-split)"),
                         (["--train-split", "nope"], "no 'nope'; set train_split")):
        line = _one_error(cli([*workers, *flags]))
        assert words in line, line
    conf = tmp_path / "train.toml"
    conf.write_text('train_split = "nope"\n')
    line = _one_error(cli([*workers, "--config", str(conf)]))
    assert "no 'nope'" in line and "set train_split" in line, line
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs  # no job ran
    assert not (tmp_path / "m.checkpoints").exists()
    # one process takes no checkpoints (no unfinished run of workers to resume here)
    line = _one_error(cli(["train", data, "--checkpoint-every", "5", "--model-out",
                           str(tmp_path / "one.keras")]))
    assert "checkpoint_every in the command line is for training on Spark workers" in line, line

    # What an unfinished run leaves for a rerun to resume: its settings, and a complete
    # checkpoint (an epoch directory with its state file, which the workers would restore).
    # A rerun with another batch would fail on it in every worker: refused here, at once.
    import dataclasses

    from tfspark.cli.config import TrainConfig
    from tfspark.cli.train_cluster import record_run, same_run
    from tfspark.keras.resume import checkpoint_name

    ckpt = tmp_path / "m.checkpoints"
    # (the label as resolved: that run named none, and the data set's is y)
    ran = TrainConfig.from_mapping({"data": data, "workers": 2, "epochs": 5, "label": "y",
                                    "checkpoint_dir": str(ckpt)})
    record_run(ran)
    (ckpt / checkpoint_name(1)).mkdir()
    (ckpt / checkpoint_name(1) / "state.json").write_text("{}")
    for label in ([], ["--label", "y"]):  # naming the label it found by itself is no change
        line = _one_error(cli([*workers, *label, "--batch-size", "128"]))
        assert (f"{str(ckpt)!r} holds the checkpoints of an unfinished run with other "
                f"settings (batch_size 256 there, 128 here): rerun with those to resume it, "
                f"or remove that directory") in line, line
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs
    # how long, where to and how loud may change: the rerun goes on from that checkpoint
    same_run(dataclasses.replace(ran, epochs=9, verbose=0, model_out=str(tmp_path / "n.keras"),
                                 checkpoint_every=10))
    # data written to since the run began: its checkpoints hold places in the old files
    tfspark.write_tfrecords(df.limit(10), data, label_cols=["y"], mode="append",
                            split={"train": 0.8, "validation": 0.2}, split_key="id")
    line = _one_error(cli([*workers, "--batch-size", "256"]))
    assert "which was written to since (an append or an overwrite): they cannot resume on " \
        "other rows; remove that directory" in line, line


def test_an_error_of_the_library_names_the_commands_flags():
    """The writer's words name its Python keywords (mode='overwrite'); on the command line the
    same message names the flag a user types (--mode overwrite)."""
    from tfspark.errors import OptionError

    message, _ = describe_error(OptionError(
        "output path 'out/x' already exists; use mode='overwrite' to replace it, "
        "mode='append' to add to it, or another path"))
    assert message == ("output path 'out/x' already exists; use --mode overwrite to replace it, "
                       "--mode append to add to it, or another path")
    message, _ = describe_error(OptionError("store them exactly with decimal_as='string'"))
    assert message.endswith("with --decimal-as string")
    message, _ = describe_error(OptionError("feature x (key=3) and nope='y' stay as they are"))
    assert message == "feature x (key=3) and nope='y' stay as they are"
