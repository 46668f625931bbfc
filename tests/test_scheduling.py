"""The suite's own pytest-xdist settings (tests/conftest.py): worker count and hand-out order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest


def test_auto_runs_a_worker_per_core_and_one_more_unless_xdist_is_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert conftest.pytest_xdist_auto_num_workers(config=None) == cores + 1  # type: ignore[arg-type]
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert conftest.pytest_xdist_auto_num_workers(config=None) is None  # type: ignore[arg-type]


def test_the_longest_units_are_handed_out_first_then_the_long_folders_then_the_rest() -> None:
    scopes = [
        "tests/protocol/test_ids.py",
        "tests/integration/test_official_client.py",
        "tests/integration/test_cluster.py",
        "tests/integration/test_cluster_failover.py",
        "tests/emubroker/simulate/test_loop.py",
        "tests/storage_stub/test_ledger.py",
        "tests/integration/test_durability.py",
        "tests/emubroker/simulate/test_simulate.py::test_another_seed_gives_other_traces",
        "tests/emubroker/simulate/test_simulate.py::test_a_failover_runs_in_virtual_time_the_same_every_run",
        "tests/loadgen/analysis/",
    ]
    assert sorted(scopes, key=conftest.unit_rank) == [
        "tests/loadgen/analysis/",
        "tests/emubroker/simulate/test_simulate.py::test_a_failover_runs_in_virtual_time_the_same_every_run",
        "tests/integration/test_durability.py",
        "tests/integration/test_cluster_failover.py",
        "tests/storage_stub/test_ledger.py",
        "tests/integration/test_cluster.py",
        "tests/emubroker/simulate/test_loop.py",
        "tests/emubroker/simulate/test_simulate.py::test_another_seed_gives_other_traces",
        "tests/integration/test_official_client.py",
        "tests/protocol/test_ids.py",
    ]


def test_a_unit_is_a_file_the_spark_folder_or_one_test_of_a_split_file() -> None:
    assert (
        conftest.unit_of("tests/protocol/test_ids.py::test_a[trio]") == "tests/protocol/test_ids.py"
    )
    assert conftest.unit_of("tests/integration/test_security.py::TestX::test_y") == (
        "tests/integration/test_security.py"
    )
    assert (
        conftest.unit_of("tests/loadgen/analysis/test_jobs.py::test_z") == "tests/loadgen/analysis/"
    )
    one_test = "tests/emubroker/simulate/test_simulate.py::test_another_seed_gives_other_traces"
    assert conftest.unit_of(one_test) == one_test
    assert conftest.unit_of("tests/loadgen/test_cluster_runs.py::test_a") == (
        "tests/loadgen/test_cluster_runs.py::test_a"
    )


def test_the_files_split_test_by_test_have_no_module_scoped_fixture() -> None:
    # A module-scoped fixture of a split file would start once per test, on either worker.
    plan = subprocess.run(
        [sys.executable, "-m", "pytest", "--setup-plan", "-q", *conftest.SPLIT_FILES],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(conftest.__file__).parents[1],
    )
    assert plan.returncode == 0, plan.stdout[-2000:]
    assert "SETUP    F" in plan.stdout  # the plan lists fixtures, so it would list these
    assert "SETUP    M" not in plan.stdout
