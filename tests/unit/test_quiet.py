"""Quiet output (the command line's, and the library's own import of TensorFlow): a child
process's start-up notices are left out of its stderr, everything else (warnings, errors,
progress bars) comes through; --verbose keeps all. Progress lines: a bar on a terminal, a line
per step elsewhere."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

import pytest

from tfspark.cli.progress_lines import ProgressLines
from tfspark.quiet import stderr_filtered

LINES = ["WARNING: Using incubator modules: jdk.incubator.vector",
         "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
         "I0000 00:00:1795668223.561824   18671 port.cc:153] oneDNN custom operations are on. "
         "You may see slightly different numerical results",
         "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
         "26/11/26 02:42:28 WARN NativeCodeLoader: Unable to load native-hadoop library",
         # a training process of train --workers: its lines come tagged with its index
         "[tfspark worker 1] WARNING: All log messages before absl::InitializeLog() is called",
         "[tfspark worker 0] I0000 00:00:1795963119.534704   22697 port.cc:153] oneDNN custom "
         "operations are on. You may see slightly different numerical results",
         # TensorFlow's GPU build on a machine without a GPU
         "I0000 00:00:1796458483.836062   14935 cudart_stub.cc:31] Could not find cuda drivers "
         "on your machine, GPU will not be used.",
         "E0000 00:00:1796458484.101000   14935 cuda_dnn.cc:8310] Unable to register cuDNN "
         "factory: Attempting to register factory for plugin cuDNN when one has already been "
         "registered",
         "I0000 00:00:1796458484.201000   14935 cpu_feature_guard.cc:210] This TensorFlow "
         "binary is optimized to use available CPU instructions in performance-critical "
         "operations.",
         "To enable the following instructions: AVX2 FMA, in other operations, rebuild "
         "TensorFlow with the appropriate compiler flags.",
         "26/11/26 02:42:29 WARN TaskSetManager: Lost task 0.0 in stage 1.0",
         "Exception in thread main: something real",
         "[tfspark worker 1] ValueError: column 'age' is not in the data set"]
CHILD = ("import sys, time\n"
         "for line in sys.argv[1:]:\n"
         "    sys.stderr.write(line + '\\n'); sys.stderr.flush()\n"
         "sys.stderr.write('\\r[Stage 1:>   (0 + 2) / 2]'); sys.stderr.flush(); time.sleep(0.5)\n"
         "sys.stderr.write('\\r' + ' ' * 10 + '\\r'); sys.stderr.flush()\n")


@pytest.mark.parametrize("verbose", [False, True])
def test_start_up_notices_are_left_out(capfd, verbose):
    with stderr_filtered(verbose):
        child = subprocess.Popen([sys.executable, "-c", CHILD, *LINES])
    print("ours", file=sys.stderr, flush=True)  # this process's stderr is its own again
    child.wait(30)
    import time

    time.sleep(0.5)  # the copying thread forwards what the child wrote last
    err = capfd.readouterr().err
    kept = [ln for ln in LINES if ln in err]
    assert kept == (LINES if verbose else LINES[11:]), err
    assert "[Stage 1:>" in err and "ours" in err


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(monkeypatch):
    log = logging.getLogger("tfspark.progress.test")
    log.propagate = False
    log.setLevel(logging.INFO)
    handler = ProgressLines()
    log.addHandler(handler)
    try:
        for tty in (False, True):
            out = io.StringIO()
            out.isatty = lambda tty=tty: tty  # type: ignore[method-assign]
            monkeypatch.setattr(sys, "stdout", out)
            log.info("tfspark: backup ...")
            for k in (1, 2):
                log.info("verify: %d/2 files", k, extra={"step": (k, 2)})
            log.info("done")
            text = out.getvalue()
            if tty:
                assert "\r[" + "#" * 12 + "." * 12 + "] verify: 1/2 files" in text
                assert "\r[" + "#" * 24 + "] verify: 2/2 files" in text
                assert text.endswith("\ndone\n") and text.count("\n") == 3
            else:
                assert text == ("tfspark: backup ...\nverify: 1/2 files\nverify: 2/2 files\n"
                                "done\n")
    finally:
        log.removeHandler(handler)


def test_steps_elsewhere_than_a_terminal_are_a_line_every_few_seconds(monkeypatch):
    """In a log (no terminal) a run of steps writes its first line, then one EVERY_S seconds,
    then its last: thousands of files do not fill a job's log. The clock is the handler's."""
    from tfspark.cli.progress_lines import EVERY_S

    log = logging.getLogger("tfspark.progress.test_every")
    log.propagate = False
    log.setLevel(logging.INFO)
    handler = ProgressLines()
    now = [0.0]
    handler.clock = lambda: now[0]
    log.addHandler(handler)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    try:
        for run in (1, 2):  # a second run starts again with its first line
            for k, at in enumerate((0.0, 1.0, EVERY_S, EVERY_S + 1, 2 * EVERY_S - 0.5,
                                    2 * EVERY_S + 2, 2 * EVERY_S + 3), start=1):
                now[0] = 100 * run + at
                log.info("run %d: %d/7 files", run, k, extra={"step": (k, 7)})
            log.info("stage line %d", run)  # other lines are never held back
        assert out.getvalue().splitlines() == [
            line for run in (1, 2) for line in
            (f"run {run}: 1/7 files", f"run {run}: 3/7 files", f"run {run}: 6/7 files",
             f"run {run}: 7/7 files", f"stage line {run}")]
    finally:
        log.removeHandler(handler)


def test_a_notice_written_in_pieces_by_a_busy_process_is_still_left_out(capfd):
    """A loaded machine: the notice comes in pieces with pauses between them; a pause is no
    line's end, so the whole line is still matched (and left out)."""
    pieces = [LINES[2][:20], LINES[2][20:60], LINES[2][60:] + "\n", "real\n"]
    child = ("import sys, time\n"
             "for piece in sys.argv[1:]:\n"
             "    sys.stderr.write(piece); sys.stderr.flush(); time.sleep(0.4)\n")
    with stderr_filtered(False):
        proc = subprocess.Popen([sys.executable, "-c", child, *pieces])
    proc.wait(30)
    import time

    time.sleep(0.5)
    err = capfd.readouterr().err
    assert "real" in err and "oneDNN" not in err and "I0000" not in err, err


def test_this_process_is_filtered_inside_the_block_and_drained(capfd):
    """What this process writes to fd 2 inside the block (TensorFlow's C++ log does) is
    filtered too, and all of it is out when the block ends (drain)."""
    import os

    with stderr_filtered(False, drain=True):
        os.write(2, (LINES[2] + "\n" + LINES[-1] + "\n").encode())
        print("a Python warning", file=sys.stderr)
    err = capfd.readouterr().err
    assert LINES[2] not in err and LINES[-1] in err and "a Python warning" in err


def test_counts_in_lines_people_read_agree_with_their_noun():
    from tfspark.progress import many

    assert [many(n, "file") for n in (0, 1, 2, 1024)] == ["0 files", "1 file", "2 files",
                                                          "1,024 files"]


@pytest.mark.tf
@pytest.mark.parametrize("verbose", [False, True])
def test_a_notebook_importing_tensorflow_through_tfspark_sees_no_start_up_notices(verbose):
    """The library's own import of TensorFlow (a notebook's first make_dataset) leaves out what
    its C++ side prints at start-up; TFSPARK_VERBOSE=1 shows it, and what the program itself
    writes to stderr comes through either way."""
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "TFSPARK_VERBOSE")}
    if verbose:
        env["TFSPARK_VERBOSE"] = "1"
    code = ("import sys, tfspark.tf; tfspark.tf.parsing_spec; import tensorflow as tf; "
            "print('mine', file=sys.stderr); print(tf.constant(2).numpy())")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "2" and "mine" in run.stderr
    noisy = "oneDNN custom operations" in run.stderr or "cpu_feature_guard" in run.stderr
    assert noisy == verbose, run.stderr


def test_the_command_line_called_from_python_leaves_the_loggers_as_they_were(tmp_path, capsys):
    """main() sets up its own output for its run only: a program (or test) that calls it and
    then writes a data set gets its progress where it chose, not on main's handlers."""
    from tfspark.cli.main import main

    names = ("tfspark", "tfspark.progress", "")
    before = [(list(logging.getLogger(n).handlers), logging.getLogger(n).level,
               logging.getLogger(n).propagate) for n in names]
    assert main(["verify", str(tmp_path / "nothing here")]) == 2
    assert "error: " in capsys.readouterr().err
    assert [(list(logging.getLogger(n).handlers), logging.getLogger(n).level,
             logging.getLogger(n).propagate) for n in names] == before
