"""One Spark session for every Spark test (STYLE.md §4): local, two cores, few partitions."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark import SPARK_TEST_CONF

# pytest-timeout interrupts a test inside its py4j call, which leaves the shared session's gateway
# out of step: every later Spark test then fails ("org does not exist in the JVM"). On a loaded
# machine the first test, which starts the JVM, took 129 s, so these tests' guard against hangs
# is longer than the suite's 120 s.
SPARK_TIMEOUT = 300


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SPARK_TIMEOUT))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from loadgen.analysis.session import open_session

    session = open_session("local[2]", SPARK_TEST_CONF, app_name="loadgen-analysis-tests")
    yield session
    session.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture(autouse=True)
def _finalize_py4j_sockets() -> Iterator[None]:
    """Collect the sockets pyspark's result readers leave to the garbage collector.

    pyspark (4.0) reads `collect()` results over local sockets that it does not close itself;
    collected here, with their ResourceWarning silenced, they cannot fail a later test that
    happens to trigger the collection (`filterwarnings = error`).
    """
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
