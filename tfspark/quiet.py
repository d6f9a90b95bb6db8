"""Quiet output: what the JVM and TensorFlow's C++ side print on their own at start-up (notices
no user acts on) is dropped; their warnings and errors, and Spark's stage progress, still show.
The command line filters its whole run (--verbose shows everything); the library filters the
import of TensorFlow and Keras it makes itself (a notebook's first make_dataset), unless the
environment sets TFSPARK_VERBOSE=1.

Both write to file descriptor 2 below Python, so while the JVM starts, and while train runs,
fd 2 is a pipe that a thread copies to the real stderr line by line, leaving out the lines
NOISE matches. A partial line that carries a carriage return (Spark's progress bar redrawing
itself) is copied at once; any other waits for its end, however long the writer pauses (a
notice written in pieces by a busy process is still one line to leave out). The JVM keeps the
pipe as its stderr for as long as it lives.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import select
import sys
import threading
from collections.abc import Iterator

# Start-up notices of the JVM, Spark, Hadoop and Hive's metastore, and of TensorFlow's C++ side
# at import (TF_CPP_MIN_LOG_LEVEL does not reach these in TF 2.21; its GPU build probes for
# CUDA on a machine without a GPU), matched at a line's start (after the tag of a train
# --workers training process, whose lines the Spark task relays).
_GLOG = rb"[IWE]\d{4} [\d:.]+ +\d+ \S*?"  # I0000 00:00:1795668223.561824   18671 path/
NOISE = re.compile(
    rb"(\[tfspark worker \d+\] )?(WARNING: Using incubator modules: "
    rb"|Using Spark's default log4j profile"
    rb"|Setting default log level to "
    rb"|To adjust logging level use sc\.setLogLevel"
    rb"|\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN (NativeCodeLoader: Unable to load native-hadoop"
    rb"|SparkConf: Note that spark\.local\.dir will be overridden"
    rb"|Utils: (Your hostname|Set SPARK_LOCAL_IP)"
    rb"|HiveConf: HiveConf of name"
    rb"|ObjectStore: (Version information not found|setMetaStoreSchemaVersion|"
    rb"Failed to get database)"
    rb"|SparkStringUtils: Truncated the string representation)"
    rb"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    rb"|To enable the following instructions: .* rebuild TensorFlow"
    rb"|" + _GLOG + rb"(port\.cc:\d+\] oneDNN custom operations are on"
    rb"|\.cc:\d+\] failed call to cuInit"
    rb"|cudart_stub\.cc:\d+\] Could not find cuda drivers"
    rb"|cuda_(dnn|fft|blas)\.cc:\d+\] Unable to register cu\w+ factory"
    rb"|cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized"
    rb"|py_utils\.cc:\d+\] TF-TRT Warning: Could not find TensorRT"
    rb"|computation_placer\.cc:\d+\] computation placer already registered))")


def quiet_tensorflow(verbose: bool) -> None:
    """TensorFlow's C++ log (oneDNN notices, CUDA probing on a machine without a GPU) off
    unless --verbose; set before TensorFlow is imported. A value the user set is kept."""
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def quiet_import(name: str) -> None:
    """Import `name` (tensorflow, keras) with its start-up notices left out of stderr, unless it
    is imported already or TFSPARK_VERBOSE is set. An ImportError is left to the caller's own
    import, which says what to install."""
    if name in sys.modules or os.environ.get("TFSPARK_VERBOSE", "") not in ("", "0"):
        return
    with stderr_filtered(False, drain=True), contextlib.suppress(ImportError):
        importlib.import_module(name)


@contextlib.contextmanager
def stderr_filtered(verbose: bool, drain: bool = False) -> Iterator[None]:
    """Inside the block this process's stderr (fd 2: TensorFlow's C++ log too) goes through
    NOISE's filter, and so does that of processes started inside it (Spark's JVM) for as long
    as they live; after it, this process's stderr is its own again. drain: wait (up to 2 s)
    until what the block wrote is copied out (when no process it started still writes)."""
    if verbose:
        yield
        return
    try:
        saved = os.dup(2)
        read, write = os.pipe()
    except OSError:  # no stderr to redirect (a closed fd 2): leave it as it is
        yield
        return
    copier = threading.Thread(target=_copy, args=(read, saved), daemon=True,
                              name="tfspark-stderr")
    copier.start()
    sys.stderr.flush()
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # this process's last writer of the pipe closed: EOF unless children
        if drain:
            copier.join(timeout=2)


def _copy(read: int, out: int) -> None:
    """Copy the pipe to `out` until every writer has closed it, without the noise. Never
    raises: a writer blocked on a full pipe would hang."""
    pending = b""
    while True:
        try:
            ready, _, _ = select.select([read], [], [], 0.2)
            chunk = os.read(read, 65536) if ready else b""
            if ready and not chunk:  # every writer closed it
                _write(out, pending)
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            _write(out, b"".join(line + b"\n" for line in lines if not NOISE.match(line)))
            if b"\r" in pending:  # a progress bar redrawing itself
                if not NOISE.match(pending):
                    _write(out, pending)
                    pending = b""
        except Exception:  # noqa: BLE001 - keep draining whatever goes wrong
            pending = b""
    os.close(read)


def _write(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data):]
        except OSError:
            return
