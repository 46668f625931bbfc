"""One Spark session for every Spark test (STYLE.md §4): local, two cores, few partitions."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from loadgen.analysis.session import open_session

    session = open_session(
        "local[2]",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        app_name="loadgen-analysis-tests",
    )
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
