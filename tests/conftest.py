"""Fixtures and settings shared by the whole suite (STYLE.md §4)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from protocol.clock import FakeClock
from tests.support.etcd import EtcdServer, run_etcd

# deadline=None in both: a slow shared machine must not turn timing into flaky failures.
settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# The Spark tests share one SparkSession (tests/loadgen/analysis/conftest.py: a JVM, slow to
# start): under pytest-xdist their folder is one unit of work, run by one worker.
SPARK_TESTS = "tests/loadgen/analysis/"
# Folders whose files take long, mostly waiting on real brokers, clusters and runs: handed out
# first (the Spark folder, the longest unit, before them), so that the many short files of the
# rest fill the workers' ends evenly instead of one worker finishing a long file alone.
LONG_FIRST = (
    SPARK_TESTS,
    "tests/emubroker/simulate/",
    "tests/loadgen/",
    "tests/integration/",
    "tests/examples/",
)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without xdist, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (pyproject's addopts), with the Spark tests' folder as one file.

    Each file runs on one worker: its tests share module-scoped fixtures (a broker per module in
    tests/integration), which would otherwise start once per worker that runs one of them.
    pytest-xdist's ``xdist_group`` mark would say the same, but ``--dist loadgroup`` does not
    group anything under pytest 9.2 (it renames items through an attribute pytest no longer
    reads), so the grouping is done here, on the controller, by path.
    """
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    def rank(scope: str) -> int:
        return next((i for i, p in enumerate(LONG_FIRST) if scope.startswith(p)), len(LONG_FIRST))

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SPARK_TESTS if nodeid.startswith(SPARK_TESTS) else super()._split_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # Stable and idempotent: within a rank the files keep xdist's order (most tests
            # first); a few hundred files, sorted again at each assignment.
            for scope in sorted(self.workqueue, key=rank):
                self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return Scheduling(config, log)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every `pytest.mark.anyio` test on both backends, as anyio's own suite does."""
    backend: str = request.param
    return backend


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    """One real etcd for the session (tests keep apart with a chroot each); see tests/support."""
    with run_etcd() as server:
        yield server
