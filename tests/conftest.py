"""Fixtures and settings shared by the whole suite (STYLE.md §4)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from protocol.clock import FakeClock
from tests.support import settle
from tests.support.etcd import EtcdServer, run_etcd

# Settling tasks on asyncio without anyio's 0.1 s real-time poll (tests/support/settle.py).
settle.install()

# deadline=None in both: a slow shared machine must not turn timing into flaky failures.
settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# The Spark tests share one SparkSession (tests/loadgen/analysis/conftest.py: a JVM, slow to
# start): under pytest-xdist their folder is one unit of work, run by one worker.
SPARK_TESTS = "tests/loadgen/analysis/"
# Files whose tests share no module-scoped fixture and together take minutes: each of their tests
# is a unit of work of its own, so that they spread over the workers instead of one worker
# running the whole file while the other runs out of work.
SPLIT_FILES = (
    "tests/emubroker/simulate/test_simulate.py",
    "tests/loadgen/test_cluster_runs.py",
    "tests/integration/test_cluster.py",
    "tests/integration/test_cluster_failover.py",
    "tests/integration/test_cluster_shedding_split.py",
    "tests/integration/test_cluster_stub_faults.py",
    "tests/integration/test_dispatch_throttling.py",
    "tests/integration/test_durability.py",
    "tests/integration/test_soak.py",
)
# Units handed out first, longest first, so that the many short files of the rest fill the
# workers' ends evenly instead of one worker starting a long unit last: the Spark folder (the
# longest unit), then single tests and files that took 20 s or more in a whole run
# (`python -m pytest -n auto --durations=80`, docs/development.md), then the folders whose files
# take long, mostly waiting on real brokers, clusters and runs. A unit not listed keeps its
# folder's place; within a place, xdist's order (most tests first).
LONG_FIRST = (
    SPARK_TESTS,
    "tests/emubroker/simulate/test_simulate.py::test_the_shipped_ten_minute_experiment",
    "tests/emubroker/simulate/test_simulate.py::test_a_simulated_failover_matches_a_real_time",
    "tests/emubroker/simulate/test_simulate.py::test_a_failover_runs_in_virtual_time",
    "tests/emubroker/simulate/test_simulate.py::test_a_simulation_sheds_load_and_writes",
    "tests/emubroker/simulate/test_simulate.py::test_the_simulated_decisions_match_a_real_time",
    "tests/loadgen/test_cluster_runs.py",
    "tests/integration/test_durability.py",
    "tests/integration/test_cluster_shedding_split.py",
    "tests/integration/test_cluster_failover.py",
    "tests/integration/test_dashboard_browser.py",
    "tests/storage_stub/test_ledger.py",
    "tests/integration/test_dispatch_throttling.py",
    "tests/integration/test_cluster.py",
    "tests/integration/test_cluster_stub_faults.py",
    "tests/integration/test_soak.py",
    "tests/integration/test_bundle_split.py",
    "tests/emubroker/simulate/",
    "tests/loadgen/",
    "tests/integration/",
    "tests/examples/",
)


def unit_rank(scope: str) -> int:
    """A unit of work's place in the hand-out order: its first entry in LONG_FIRST, else last."""
    return next((i for i, p in enumerate(LONG_FIRST) if scope.startswith(p)), len(LONG_FIRST))


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file, the Spark folder, or itself (SPLIT_FILES)."""
    if nodeid.startswith(SPARK_TESTS):
        return SPARK_TESTS
    path = nodeid.split("::", 1)[0]
    return nodeid if path in SPLIT_FILES else path


# Workers for ``-n auto``: one per core and one more. A worker spends much of its time waiting on
# real brokers, clusters and runs, so with one per core a core idled: on a quiet 2-core machine
# the suite took 385 s with two workers and 310 s with three (CPU 390 s and 403 s; HYPOTHESIS
# profile ci, one clone, run one after the other). Two per core went too far: in a CI-like run on
# a loaded 2-core machine four workers starved the Spark tests past their timeout (which leaves
# the shared SparkSession broken for the rest of its tests) and a real-time throttling test below
# its floor. PYTEST_XDIST_AUTO_NUM_WORKERS, xdist's own setting, still overrides it.
EXTRA_WORKERS = 1


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without xdist, never called
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: a worker per core this process may run on, and ``EXTRA_WORKERS`` more."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's hook reads it
    return max(1, len(os.sched_getaffinity(0))) + EXTRA_WORKERS


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: without xdist, never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (pyproject's addopts), with the Spark tests' folder as one file.

    Each file runs on one worker: its tests share module-scoped fixtures (a broker per module in
    tests/integration), which would otherwise start once per worker that runs one of them. The
    files of ``SPLIT_FILES`` share none, and each of their tests is a unit of its own.
    pytest-xdist's ``xdist_group`` mark would say the same, but ``--dist loadgroup`` does not
    group anything under pytest 9.2 (it renames items through an attribute pytest no longer
    reads), so the grouping is done here, on the controller, by path.
    """
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            # Stable and idempotent: within a rank the files keep xdist's order (most tests
            # first); a few hundred files, sorted again at each assignment.
            for scope in sorted(self.workqueue, key=unit_rank):
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
