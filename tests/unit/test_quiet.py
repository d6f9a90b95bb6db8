"""The command line's quiet output: a child process's start-up notices are left out of its
stderr, everything else (warnings, errors, progress bars) comes through; --verbose keeps all.
Progress lines: a bar on a terminal, a line per step elsewhere."""

from __future__ import annotations

import io
import logging
import subprocess
import sys

import pytest

from tfspark.cli.progress_lines import ProgressLines
from tfspark.cli.quiet import child_stderr_filtered

LINES = ["WARNING: Using incubator modules: jdk.incubator.vector",
         "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
         "26/11/26 02:42:28 WARN NativeCodeLoader: Unable to load native-hadoop library",
         "26/11/26 02:42:29 WARN TaskSetManager: Lost task 0.0 in stage 1.0",
         "Exception in thread main: something real"]
CHILD = ("import sys, time\n"
         "for line in sys.argv[1:]:\n"
         "    sys.stderr.write(line + '\\n'); sys.stderr.flush()\n"
         "sys.stderr.write('\\r[Stage 1:>   (0 + 2) / 2]'); sys.stderr.flush(); time.sleep(0.5)\n"
         "sys.stderr.write('\\r' + ' ' * 10 + '\\r'); sys.stderr.flush()\n")


@pytest.mark.parametrize("verbose", [False, True])
def test_start_up_notices_are_left_out(capfd, verbose):
    with child_stderr_filtered(verbose):
        child = subprocess.Popen([sys.executable, "-c", CHILD, *LINES])
    print("ours", file=sys.stderr, flush=True)  # this process's stderr is its own again
    child.wait(30)
    import time

    time.sleep(0.5)  # the copying thread forwards what the child wrote last
    err = capfd.readouterr().err
    kept = [ln for ln in LINES if ln in err]
    assert kept == (LINES if verbose else LINES[3:]), err
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
