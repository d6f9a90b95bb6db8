"""How the command line reports errors: one line (`error: ...`) and a hint, never a stack trace
unless --debug. Spark and JVM errors are cut down to their error class and first message line;
an error raised in a Python worker becomes that worker's exception line."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from tfspark.errors import TfsparkError, install, store_hint, wrapped
from tfspark.store.manifest import SPARK_CREDENTIALS_HINT
from tfspark.store.uris import redact_text

DEBUG_HINT = "run again with --debug for the full traceback"
_SPARK_HINT = "run again with --debug for the full Spark error and stack trace"
_CONDITION = re.compile(r"^\[([A-Z][A-Z0-9_.]*)\]")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?")
_JVM_FRAME = re.compile(r"^\s*(at |\.\.\. \d+ more|Suppressed: |Caused by: )")
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)"
                       r"\w*)(:.*)?$")
_MAX_LINE = 600
_STORE_HINT = ("give the store's endpoint and credentials with --store FILE, a TOML file whose "
               "[store] table holds them")


def describe_error(exc: BaseException) -> tuple[str, str | None]:
    """(one-line message, hint or None) that tell a command-line user what went wrong, with
    any URI in them redacted (Spark's and the stores' messages repeat paths as given).
    """
    message, hint = _describe(exc)
    return redact_text(message), None if hint is None else redact_text(hint)


# A write setting as Python code names it (mode='overwrite'), and as the command line does
_KEYWORD = re.compile(r"\b([a-z][a-z_]*)=(?:'([^']*)'|([\w.-]+))")


def in_cli_terms(message: str) -> str:
    """A message that names write settings as Python keywords (mode='overwrite', the words of
    write_tfrecords) with the command line's flags instead (--mode overwrite)."""
    from tfspark.store.options import write_settings

    flags = {t.name: t.config_key for t in write_settings() if t.workflow}

    def flag(m: re.Match[str]) -> str:
        name, value = m.group(1), m.group(2) if m.group(2) is not None else m.group(3)
        if name not in flags:
            return m.group(0)
        return f"--{flags[name].replace('_', '-')} {value}"

    return _KEYWORD.sub(flag, message)


def _describe(exc: BaseException) -> tuple[str, str | None]:
    """describe_error, before redaction.

    tfspark errors keep their message (it already says what to do). Spark errors become
    `[ERROR_CLASS] message` (no SQLSTATE, query plan or JVM stack trace); an error raised in a
    Python worker becomes that worker's exception line. OS errors name the file. Anything else
    is `Type: message` with a hint to rerun with --debug.
    """
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", None
    if isinstance(exc, TfsparkError):  # (what it says of filesystem= is for Python)
        return in_cli_terms(_first_line(str(exc).replace(SPARK_CREDENTIALS_HINT,
                                                         _STORE_HINT))), None
    spark = _spark_error(exc)
    if spark is not None:
        return spark
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        where = f"{exc.filename}: {exc.strerror}"
        if isinstance(exc, FileNotFoundError):
            return where, f"check the path (relative paths start at {os.getcwd()})"
        if isinstance(exc, PermissionError):
            return where, "check the permissions of the file and its directory"
        return where, DEBUG_HINT
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        if top in ("tensorflow", "keras"):
            return (f"{top} is not installed",
                    f"this command needs TensorFlow: {install('tf')}")
        if top in ("pyspark", "py4j"):
            return (f"{top} is not installed",
                    f"this command needs Spark: {install('spark')}")
        return f"{top} is not installed", f"install it (pip install {top}), or reinstall tfspark"
    text = _first_line(str(exc))
    arrow = sys.modules.get("pyarrow")  # (Azure's client raises a plain ArrowException)
    if isinstance(exc, (OSError, ValueError, *((arrow.ArrowException,) if arrow else ()))):
        return text or type(exc).__name__, store_hint(exc) or DEBUG_HINT
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
            "run again with --debug for the full traceback; if it points into tfspark, "
            "please report it")


def _spark_error(exc: BaseException) -> tuple[str, str | None] | None:
    """describe_error for PySpark and py4j errors; None for anything else.

    Looked up in sys.modules: an error cannot come from Spark unless Spark was imported.
    """
    errors = sys.modules.get("pyspark.errors")
    protocol = sys.modules.get("py4j.protocol")
    if errors is None and protocol is None:
        return None
    # A converted JVM error asks the JVM for its text: that fails once the JVM is gone.
    text = _ask(lambda: str(exc), lambda: str(getattr(exc, "_desc", "") or repr(exc)))
    if errors is not None and isinstance(exc, errors.PySparkException):
        condition = _ask(exc.getCondition, lambda: None)
        message = _first_line(_ask(exc.getMessage, lambda: "") if condition else text) or \
            _first_line(text)
        if condition is None:  # a JVM error converted by PySpark: "[CLASS] message" text
            m = _CONDITION.match(message)
            condition = m.group(1) if m else None
        if condition == "JAVA_GATEWAY_EXITED" or "JAVA_HOME" in text:
            java = os.environ.get("JAVA_HOME")
            return (message,
                    "Spark needs Java 17+: install a JDK and put `java` on PATH or set "
                    f"JAVA_HOME{f' (now {java!r})' if java else ''}")
        if "Traceback (most recent call last)" in text:
            return _worker_error(text), DEBUG_HINT
        ours = wrapped(text)  # a tfspark error whose traceback Spark hid (hideTraceback)
        if ours is not None:
            return _clip(f"{ours[0]}: {ours[1]}"), DEBUG_HINT
        if condition == "PATH_NOT_FOUND":
            return message, "check the path (a relative path starts at the working directory)"
        if condition in ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND"):
            return message, ("check the name; local runs keep their catalog under --warehouse "
                             "(default ./warehouse)")
        return message, _SPARK_HINT
    if protocol is not None and isinstance(exc, protocol.Py4JNetworkError):
        return (_first_line(text) or type(exc).__name__,
                "the Spark driver JVM stopped answering (often out of memory: see its log "
                "above); give it more with spark.driver.memory")
    if protocol is not None and isinstance(exc, protocol.Py4JError):
        if "Traceback (most recent call last)" in text:
            return _worker_error(text), DEBUG_HINT
        lines = [ln.strip() for ln in text.splitlines()
                 if ln.strip() and not _JVM_FRAME.match(ln)
                 and not ln.startswith("An error occurred while calling")]
        message = _clip(lines[0].lstrip(": ") if lines else type(exc).__name__)
        return message, _SPARK_HINT
    return None


def _ask(get: Any, fallback: Any) -> Any:
    try:
        return get()
    except Exception:
        return fallback()


def _worker_error(text: str) -> str:
    """The exception line of the last Python traceback inside a Spark error message."""
    tail = text.rsplit("Traceback (most recent call last)", 1)[-1].splitlines()[1:]
    for line in tail:
        if line.strip() and not line.startswith((" ", "\t")):
            m = _EXC_LINE.match(line.strip())
            return _clip(f"{m.group(1)}{m.group(2) or ''}" if m else line.strip())
    return _first_line(text)


def _first_line(text: str) -> str:
    """The first non-blank line, without Spark's SQLSTATE suffix, cut to a readable length."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return _clip(_SQLSTATE.sub("", line).rstrip(" ;"))


def _clip(line: str) -> str:
    """line, its middle cut out when it is too long: what to do comes last (a store's words,
    which can run to 400 characters, sit in the middle), after a "; ": kept whole from the
    first "; " whose rest fits in half the line (else the last third is kept)."""
    if len(line) <= _MAX_LINE:
        return line
    tails = [len(line) - m.end() for m in re.finditer("; ", line)]
    tail = next((t for t in tails if t <= _MAX_LINE // 2), _MAX_LINE // 3)
    return f"{line[:_MAX_LINE - tail - 5]} ... {line[-tail:]}"


def interrupted(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among the exceptions that led to `exc`."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


def silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the exit flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


