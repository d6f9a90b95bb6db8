"""Session-scoped Spark and TensorFlow fixtures for integration tests.

Spark and TensorFlow are imported inside the fixtures, so collecting these tests costs nothing
until a test asks for them. The fixtures mark nothing: mark tests with `spark` / `tf` yourself.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

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
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def tf() -> ModuleType:
    """The tensorflow module; skips the test when TensorFlow is not installed."""
    return pytest.importorskip("tensorflow")
