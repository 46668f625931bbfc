"""The suite's own pytest-xdist settings (tests/conftest.py): worker count and hand-out order."""

from __future__ import annotations

import os

import pytest

from tests import conftest


def test_auto_runs_one_worker_per_core_unless_xdist_is_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert conftest.pytest_xdist_auto_num_workers(config=None) == cores  # type: ignore[arg-type]
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
        "tests/loadgen/analysis/",
    ]
    assert sorted(scopes, key=conftest.unit_rank) == [
        "tests/loadgen/analysis/",
        "tests/integration/test_durability.py",
        "tests/storage_stub/test_ledger.py",
        "tests/integration/test_cluster_failover.py",
        "tests/integration/test_cluster.py",
        "tests/emubroker/simulate/test_loop.py",
        "tests/integration/test_official_client.py",
        "tests/protocol/test_ids.py",
    ]
