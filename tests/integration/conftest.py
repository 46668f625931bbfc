"""Fixtures for tests against real brokers: in-process (background thread) and subprocess."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pulsar
import pytest

from emubroker.testing import RunningBroker, pulsar_broker, run_broker_in_thread
from tests.support.broker import standalone_process

__all__ = ["pulsar_broker"]  # the plugin's fixture, importable here until the entry point exists

OPERATION_TIMEOUT = 5


def make_client(service_url: str) -> pulsar.Client:
    """The official client with short timeouts and quiet logs."""
    return pulsar.Client(
        service_url,
        operation_timeout_seconds=OPERATION_TIMEOUT,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


@pytest.fixture(scope="module", params=["in-thread", "subprocess"])
def service_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """One broker per module and kind, shared by its tests (topic names are unique)."""
    if request.param == "in-thread":
        with run_broker_in_thread() as running:
            yield running.service_url
    else:
        with standalone_process() as proc:
            yield proc.service_url


@pytest.fixture(scope="module")
def thread_broker() -> Iterator[RunningBroker]:
    """An in-process broker, for tests that reach into it (e.g. unload a topic)."""
    with run_broker_in_thread() as running:
        yield running


@pytest.fixture
def client(service_url: str) -> Iterator[pulsar.Client]:
    c = make_client(service_url)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/it-{uuid.uuid4().hex[:12]}"
