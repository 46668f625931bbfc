"""Fixtures and settings shared by the whole suite (STYLE.md §4)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from protocol.clock import FakeClock
from tests.support.etcd import EtcdServer, run_etcd

# deadline=None in both: a slow shared machine must not turn timing into flaky failures.
settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


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
