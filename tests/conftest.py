"""Test set-up shared by every test.

This file imports neither Spark nor TensorFlow: tests under tests/unit must run without them.
Spark and TensorFlow fixtures live in tests/integration/conftest.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# PriorState any SparkSession starts: Spark's Python workers run PYSPARK_PYTHON (default `python3`
# on PATH, which may lack pyarrow/numba/tfspark), so pin them to the interpreter running pytest.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
# Quiet TensorFlow's C++ start-up logging (INFO and WARNING).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The repo's quiet log4j2.properties and local spark-defaults.conf; the fixture sets what the
# tests rely on explicitly, so this only affects log noise.
os.environ.setdefault("SPARK_CONF_DIR", str(ROOT / "conf"))
# Every JVM the tests start (in-process sessions, CLI and job subprocesses, the loopback
# cluster's daemons and executors, the Connect server) is short-lived and works on small data:
# the C1 compiler alone and the serial collector cut the CPU a Spark start-up costs by about
# half (4 Spark-heavy test files on 2 cores: 666 -> 427 CPU-s, 358 -> 252 s wall). Test-only:
# what users run keeps the JVM's defaults.
LEAN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", LEAN_JVM)  # drivers started by spark-submit
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", LEAN_JVM)  # standalone master and workers
# Bind the local driver to loopback: no "hostname resolves to a loopback address" warning, and
# nothing listens on an outside interface.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Dummy credentials for the S3-compatible server the object-store tests start on loopback; set
# before Spark starts so its Python workers inherit them. Never real credentials.
for _key, _value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                     ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_EC2_METADATA_DISABLED", "true")):
    os.environ.setdefault(_key, _value)

# Two xdist workers (make test: -n 2 --dist loadgroup) share the suite by file, so a module's
# fixtures are built once; the loopback cluster's and the training files go to one worker, and the
# files that take minutes start first, so the run does not end waiting on one long file.
FIRST = ("tests/cluster/", "tests/packaging/", "tests/integration/test_driver_faults.py",
         "tests/integration/test_s3_faults.py", "tests/integration/test_train_on_spark.py",
         "tests/integration/test_cli.py", "tests/integration/test_examples.py")
# Training tests find their processes by the worker index in TF_CONFIG, machine-wide, and the
# cluster's files share one loopback cluster: two of them at once would see each other's.
TOGETHER = tuple(sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                        if p.parts[-2] == "cluster" or "mark.training" in p.read_text()))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return

    def first(item: pytest.Item) -> int:
        rel = item.path.relative_to(ROOT).as_posix()
        return next((i for i, p in enumerate(FIRST) if rel.startswith(p)), len(FIRST))

    items.sort(key=first)  # stable: the order within a file stays


@pytest.hookimpl(optionalhook=True)  # the PySpark 3.5 lane runs without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """--dist loadgroup, by file, with the TOGETHER files as one group. (xdist 3.8's own
    loadgroup renames node ids in a way pytest 9 ignores, so its groups never formed: the
    cluster's files ran on both workers at once.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "together" if path in TOGETHER else path

    config.option.loadscopereorder = False  # keep FIRST's order: the long files start first
    return ByFile(config, log)
