"""A pytest plugin for client developers: an in-process Pulsar broker or cluster per test.

Installed with the package (the ``pytest11`` entry point ``emubroker``); ask for a fixture::

    def test_roundtrip(pulsar_broker):
        client = pulsar.Client(pulsar_broker.service_url)
        ...

    @pytest.mark.pulsar_cluster(brokers=5, config={"loadBalancerSheddingEnabled": True})
    def test_failover(pulsar_cluster):
        client = pulsar.Client(pulsar_cluster.service_url)
        ...
        pulsar_cluster.kill(pulsar_cluster.owner_of(topic))

``pulsar_broker`` is one broker (``testing.broker``); ``pulsar_cluster`` is N brokers sharing
one metadata store and one bookie stub, with the controls of ``testing.cluster.PulsarCluster``
(unload, split, kill, stop, restart, throttling, slow storage, waits). Both run in a background
thread with its own event loop, so they work from synchronous tests, from the official client's
threads, and from async tests on any loop (``cluster.aio`` has the controls as coroutines).
``pulsar_cluster_factory(brokers=..., config=..., mode=...)`` makes more clusters in one test;
for a module- or session-wide one, use :func:`run_pulsar_cluster` (or
:func:`run_broker_in_thread`) in a fixture of your own. docs/testing-with-emubroker.md is the
guide.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import pytest

from emubroker.testing.backend import BrokerHandle
from emubroker.testing.broker import RunningBroker, run_broker_in_thread
from emubroker.testing.cluster import PulsarCluster
from emubroker.testing.errors import (
    ClusterAdminError,
    ClusterStoppedError,
    ClusterTimeoutError,
    PulsarClusterError,
    UnknownBrokerError,
)
from emubroker.testing.runner import DEFAULT_CONFIG, ClusterMode, run_pulsar_cluster
from emubroker.testing.targets import Bundle

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "DEFAULT_CONFIG",
    "BrokerHandle",
    "Bundle",
    "ClusterAdminError",
    "ClusterStoppedError",
    "ClusterTimeoutError",
    "PulsarCluster",
    "PulsarClusterError",
    "RunningBroker",
    "UnknownBrokerError",
    "pulsar_broker",
    "pulsar_cluster",
    "pulsar_cluster_factory",
    "run_broker_in_thread",
    "run_pulsar_cluster",
]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "pulsar_cluster(brokers=3, config=None, mode='thread'): how the pulsar_cluster "
        "fixture starts the cluster",
    )


@pytest.fixture
def pulsar_broker() -> Iterator[RunningBroker]:
    """A fresh in-process broker for one test (``.service_url``, ``.admin_url``)."""
    with run_broker_in_thread() as running:
        yield running


@pytest.fixture
def pulsar_cluster(request: pytest.FixtureRequest) -> Iterator[PulsarCluster]:
    """A fresh cluster for one test: 3 brokers unless ``@pytest.mark.pulsar_cluster`` says."""
    marker = request.node.get_closest_marker("pulsar_cluster")
    options: dict[str, Any] = {} if marker is None else dict(marker.kwargs)
    if marker is not None and marker.args:
        options.setdefault("brokers", marker.args[0])
    with run_pulsar_cluster(**options) as cluster:
        yield cluster


@pytest.fixture
def pulsar_cluster_factory() -> Iterator[Callable[..., PulsarCluster]]:
    """Start clusters on demand (``factory(brokers=5, config={...})``); all stop after the test."""
    with contextlib.ExitStack() as stack:

        def start(
            brokers: int = 3, *, config: dict[str, Any] | None = None, mode: ClusterMode = "thread"
        ) -> PulsarCluster:
            return stack.enter_context(run_pulsar_cluster(brokers, config=config, mode=mode))

        yield start
