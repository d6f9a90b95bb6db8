"""Helpers of the driver- and object-store-fault tests (test_driver_faults.py, test_s3_faults.py):
driver subprocesses (fault_driver.py), process trees from /proc, reading what a data set's
manifest commits without Spark or TensorFlow, and the figures report (TFSPARK_FAULT_REPORT).
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DRIVER = HERE / "fault_driver.py"
TFSPARK_PART = r"part-\d{5}-\d+-[0-9a-f]{16}-\d{4}\.tfrecord(\.gz)?$"


# ---- driver subprocesses


def driver_env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS"):
        env.pop(var, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable  # not python3 on PATH
    return env


@contextlib.contextmanager
def spawn(args: list[str], work: Path, limit_s: float = 600) -> Any:
    """Run fault_driver.py with `args` in its own session (process group); stderr goes to
    work/driver.log. Whatever is left of its process tree is killed on exit, and after
    limit_s seconds (a driver that hangs ends its output, so reading it ends; the test then
    fails saying so, with the log's tail)."""
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "driver.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, str(DRIVER), *args, "--work", str(work)],
                                stdout=subprocess.PIPE, stderr=log, env=driver_env(),
                                cwd=str(work), text=True, start_new_session=True)

    def kill() -> None:
        for pid in [proc.pid, *descendants(proc.pid)]:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)

    expired = threading.Event()
    watchdog = threading.Timer(limit_s, lambda: (expired.set(), kill()))
    watchdog.daemon = True
    watchdog.start()
    try:
        yield proc
    finally:
        watchdog.cancel()
        kill()
        proc.wait(timeout=60)
        if proc.stdout:
            proc.stdout.close()
        if expired.is_set():
            raise AssertionError(f"the fault driver ran past {limit_s:.0f} s and was killed "
                                 f"(hung?): {' '.join(args)}\n{log_tail(work)}")


def messages(stream: IO[str], until: str | None = None) -> list[dict[str, Any]]:
    """The driver's "@@ {json}" lines, up to (and including) the first of kind `until`."""
    got = []
    for line in stream:
        if line.startswith("@@ "):
            msg = json.loads(line[3:])
            got.append(msg)
            if msg["kind"] == "CRASH":
                raise AssertionError(f"the driver crashed:\n{msg['error']}")
            if msg["kind"] == until:
                break
    return got


def log_tail(work: Path, lines: int = 40) -> str:
    try:
        return "\n".join((work / "driver.log").read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# ---- processes (Linux /proc)


def _process_helpers() -> Any:
    """scripts/local_cluster.py (its /proc helpers), loaded once by path: it is no package."""
    name = "local_cluster"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "scripts" / "local_cluster.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while being defined
        spec.loader.exec_module(module)
    return sys.modules[name]


# Every live descendant (parents first), a command line, running-and-not-a-zombie.
descendants = _process_helpers().descendants
cmdline = _process_helpers()._cmdline
alive = _process_helpers().alive


def wait_gone(pids: Iterable[int], timeout: float) -> tuple[list[int], float]:
    """(still alive after `timeout` seconds, seconds until all were gone or the timeout)."""
    pids = list(pids)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        left = [p for p in pids if alive(p)]
        if not left:
            return [], time.monotonic() - started
        time.sleep(0.05)
    return [p for p in pids if alive(p)], time.monotonic() - started


def kinds(pids: Iterable[int]) -> dict[str, int]:
    """How many of `pids` are JVMs, Python drivers, PySpark daemons/workers."""
    out: Counter[str] = Counter()
    for pid in pids:
        cmd = cmdline(pid)
        if "java" in cmd.split(" ", 1)[0]:
            out["jvm"] += 1
        elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
            out["pyspark_python"] += 1
        elif "fault_driver.py" in cmd:
            out["driver_python"] += 1
        elif cmd:
            out["other"] += 1
    return dict(out)


# ---- what a data set holds, read without Spark or TensorFlow


def read_committed(uri: str) -> dict[str, np.ndarray]:
    """The columns of every record of the files the manifest at `uri` names (CRCs checked)."""
    from tfspark.arrow.decode import decode_records
    from tfspark.store import manifest as mf
    from tfspark.store.fs import locate
    from tfspark.wire.tfrecord import frame_offsets

    loc = locate(uri)
    m = mf.read_manifest(loc)
    spec = m.spec
    cols: dict[str, list] = {}
    for entry in m.files:
        raw = loc.read_bytes(entry.path)
        if m.compression == "gzip":
            raw = gzip.decompress(raw)
        buf = np.frombuffer(raw, dtype=np.uint8)
        offsets = frame_offsets(buf, path=entry.path)
        assert len(offsets) - 1 == entry.records, entry
        batch = decode_records(buf, offsets, spec, framed=True)
        for name in batch.schema.names:
            cols.setdefault(name, []).append(batch.column(name).to_numpy(zero_copy_only=False))
    return {k: np.concatenate(v) if v else np.array([]) for k, v in cols.items()}


def check_values(cols: dict[str, np.ndarray]) -> None:
    """v = 3 * id and s = "s<id>" in every row (the fault driver's source)."""
    ids = cols["id"].astype(np.int64)
    assert (cols["v"].astype(np.int64) == ids * 3).all()
    assert [bytes(s) for s in cols["s"]] == [b"s%d" % i for i in ids]


def lost_duplicated(ids: Iterable[int], want: Iterable[int]) -> tuple[int, int]:
    """(lost, duplicated) of `ids` against the set `want`; an id outside `want` counts as
    duplicated (it is a row that should not be there)."""
    counts = Counter(int(i) for i in ids)
    want = set(want)
    lost = len(want - counts.keys())
    duplicated = sum(c - 1 for c in counts.values() if c > 1) + len(counts.keys() - want)
    return lost, duplicated


# ---- the figures


def report(record: dict[str, Any]) -> None:
    """Add `record` to the JSON file TFSPARK_FAULT_REPORT names (if set), under
    "driver_faults", keeping whatever else the file holds."""
    target = os.environ.get("TFSPARK_FAULT_REPORT")
    if not target:
        return
    path = Path(target)
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict):
            doc = {"previous": doc}
    except (OSError, ValueError):
        doc = {}
    doc.setdefault("driver_faults", []).append(record)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(tmp, path)
