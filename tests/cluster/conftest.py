"""Fixtures for tests on a real Spark standalone cluster on loopback (scripts/local_cluster.py).

`local_cluster` (session): one master and two workers, separate JVMs started from the installed
pyspark, stopped (process groups and every process they started) at the end of the session.
`cluster_spark` (module): the driver is this pytest process, with one executor per worker
(`cluster_session` builds it; a module may build its own with more conf, e.g. GPUs).
It is module-scoped on purpose: a process has one SparkContext, and a cluster session left
running would be returned by the integration suite's `SparkSession.builder.getOrCreate()`.

Skips, with the reason, when Java is missing; a cluster that fails to start is an error.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_launcher() -> ModuleType:
    name = "local_cluster"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "local_cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


launcher = _load_launcher()


@pytest.fixture(scope="session", name="launcher")
def launcher_module() -> ModuleType:
    """scripts/local_cluster.py: process helpers (executor pids, open files, ...)."""
    return launcher


@pytest.fixture(scope="session")
def fault_log(pytestconfig: pytest.Config) -> list[dict[str, Any]]:
    """Fault-injection figures, filled by the tests and printed at the end of the run."""
    log: list[dict[str, Any]] = []
    pytestconfig._tfspark_fault_log = log  # type: ignore[attr-defined]
    return log


@pytest.fixture(scope="session")
def timings(pytestconfig: pytest.Config) -> dict[str, Any]:
    """Seconds measured by the tests (start-up, the 200k-row workflow), printed at the end."""
    found: dict[str, Any] = {}
    pytestconfig._tfspark_timings = found  # type: ignore[attr-defined]
    return found


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory,
                  timings: dict[str, Any]) -> Iterator[Any]:
    if launcher.find_java() is None:
        pytest.skip("Java is not installed (no JAVA_HOME, no java on PATH): the standalone "
                    "cluster tests need Java 17+")
    # One fake GPU per worker: only the apps that ask for GPUs (test_train_gpus.py) see them.
    cluster = launcher.LocalCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1,
                                    memory="1g", gpus=1)
    started = time.perf_counter()
    cluster.start(timeout=180)
    timings["cluster_start_s"] = round(time.perf_counter() - started, 1)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster_spark(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory,
                  timings: dict[str, Any]) -> Iterator[Any]:
    yield from cluster_session(local_cluster, tmp_path_factory, timings)


@pytest.fixture(scope="module")
def gpu_cluster_spark(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory,
                      timings: dict[str, Any]) -> Iterator[Any]:
    """cluster_spark asking for one GPU per executor and per task (the cluster's fake ones)."""
    yield from cluster_session(local_cluster, tmp_path_factory, timings, {
        "spark.executor.resource.gpu.amount": "1", "spark.task.resource.gpu.amount": "1"})


def cluster_session(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory,
                    timings: dict[str, Any], extra: dict[str, str] | None = None
                    ) -> Iterator[Any]:
    """A SparkSession driving `local_cluster` from this process (conf `extra` on top), stopped
    with its JVM at the end."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    other = SparkContext._active_spark_context
    if other is not None and other.master != local_cluster.master_url:
        # One SparkContext per process: a local session from tests run earlier in this
        # process (e.g. `pytest tests/integration tests/cluster`) has to make room.
        sys.stderr.write(f"\ntests/cluster: stopping the running {other.master} SparkContext "
                         f"to drive the standalone cluster\n")
        other.stop()
    builder = SparkSession.builder.appName("tfspark-cluster-tests")
    tmp = tmp_path_factory.mktemp("cluster-driver")
    conf = {**launcher.cluster_conf(local_cluster, tmp), **(extra or {})}
    for key, value in conf.items():
        builder = builder.config(key, value)
    started = time.perf_counter()
    session = builder.getOrCreate()
    try:
        assert session.sparkContext.master == local_cluster.master_url
        launcher.wait_for_executors(session, 2)
        timings.setdefault("app_start_s", round(time.perf_counter() - started, 1))
        import tfspark

        tfspark.register(session)
        yield session
    finally:
        session.stop()
        _shut_down_gateway()


def _shut_down_gateway() -> None:
    """End the driver JVM, so the next SparkSession in this process (the integration suite's)
    starts a fresh one instead of inheriting this one's spark.* system properties."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None or SparkContext._active_spark_context is not None:
        return
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:  # the JVM exits when its stdin closes
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - it would not stop: end it
            launcher.stop_tree(proc.pid)


@pytest.fixture(scope="session")
def tf() -> ModuleType:
    """The tensorflow module; skips the test when TensorFlow is not installed."""
    return pytest.importorskip("tensorflow")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    rows = getattr(terminalreporter.config, "_tfspark_fault_log", [])
    found = getattr(terminalreporter.config, "_tfspark_timings", {})
    if not rows and not found:
        return
    report = os.environ.get("TFSPARK_FAULT_REPORT")  # optional: the figures as JSON
    if report:
        Path(report).write_text(json.dumps({"timings": found, "faults": rows}, indent=1) + "\n")
    tr = terminalreporter
    tr.section("tfspark cluster: timings and injected faults")
    tr.write_line("timings: " + ", ".join(f"{k} {v}" for k, v in found.items()))
    tr.write_line(f"{'fault':<16}{'round':>6}{'killed after':>13}{'job s':>8}{'failed tasks':>13}"
                  f"{'rows':>8}{'lost':>6}{'dup':>5}{'stray files':>12}")
    for r in rows:
        killed = "-" if r["killed_after_s"] is None else f"{r['killed_after_s']:.1f}s"
        tr.write_line(f"{r['fault']:<16}{r['round']:>6}{killed:>13}"
                      f"{r['job_s']:>8.1f}{r['failed_tasks']:>13}{r['rows']:>8}{r['lost']:>6}"
                      f"{r['duplicated']:>5}{r['stray_files']:>12}")
