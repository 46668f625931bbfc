"""Registered brokers over REST: list, ownedNamespaces, health, load-report and ``pulsar_lb_*``."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest
from aiohttp.test_utils import TestClient, TestServer

from emubroker.admin import build_admin_app
from emubroker.app import Broker, open_broker
from emubroker.config import load_config
from emubroker.metadata import MemoryMetadataTree
from emubroker.naming import TopicName
from emubroker.policies import ClusterData, PolicyStore
from protocol.clock import FakeClock
from tests.emubroker.admin.conftest import Admin, Wire
from tests.support.prometheus import parse_exposition

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def start(
    stack: AsyncExitStack, tree: MemoryMetadataTree, clock: FakeClock, port: int
) -> tuple[Broker, Admin]:
    config = load_config(overrides={"brokerServicePort": port - 1430, "webServicePort": port})
    broker = await stack.enter_async_context(
        open_broker(config, clock=clock, metadata=tree.open_session(), listen=False, admin=False)
    )
    assert broker.admin is not None
    client = await stack.enter_async_context(TestClient(TestServer(build_admin_app(broker.admin))))
    return broker, Admin(client)


async def no_redirect(admin: Admin, path: str) -> tuple[int, str]:
    response = await admin.client.get(path, allow_redirects=False)
    return response.status, response.headers.get("Location", "")


async def test_brokers_are_listed_from_their_registrations(fake_clock: FakeClock) -> None:
    tree = MemoryMetadataTree()
    async with AsyncExitStack() as outer:
        _, first = await start(outer, tree, fake_clock, 8080)
        async with AsyncExitStack() as inner:
            await start(inner, tree, fake_clock, 8081)
            both = ["127.0.0.1:8080", "127.0.0.1:8081"]
            assert await first.ok("GET", "/admin/v2/brokers/standalone") == both
            assert await first.ok("GET", "/admin/v2/brokers") == both
        # The second broker stopped: its registration went with it.
        assert await first.ok("GET", "/admin/v2/brokers/standalone") == ["127.0.0.1:8080"]


async def test_owned_namespaces_of_another_broker_redirect_to_it(fake_clock: FakeClock) -> None:
    tree = MemoryMetadataTree()
    async with AsyncExitStack() as stack:
        _, first = await start(stack, tree, fake_clock, 8080)
        await start(stack, tree, fake_clock, 8081)
        path = "/admin/v2/brokers/standalone/127.0.0.1:8081/ownedNamespaces"
        assert await no_redirect(first, path) == (307, f"http://127.0.0.1:8081{path}")
        # Pulsar also accepts the broker's URL as its id.
        assert await no_redirect(
            first, "/admin/v2/brokers/standalone/http:%2F%2F127.0.0.1:8081/ownedNamespaces"
        ) == (
            307,
            f"http://127.0.0.1:8081{path.replace('127.0.0.1:8081', 'http:%2F%2F127.0.0.1:8081')}",
        )
        await first.fails(
            "GET",
            "/admin/v2/brokers/standalone/10.9.9.9:8080/ownedNamespaces",
            404,
            "Broker id '10.9.9.9:8080' not found in available brokers.",
        )
        # Its own: answered here.
        assert (
            await first.ok("GET", "/admin/v2/brokers/standalone/127.0.0.1:8080/ownedNamespaces")
            == {}
        )


async def test_another_cluster_is_redirected_to_its_service_url(fake_clock: FakeClock) -> None:
    async with AsyncExitStack() as stack:
        broker, admin = await start(stack, MemoryMetadataTree(), fake_clock, 8080)
        await PolicyStore(broker.metadata).create_cluster(
            "other", ClusterData(service_url="http://127.0.0.2:9090")
        )
        assert await no_redirect(admin, "/admin/v2/brokers/other") == (
            307,
            "http://127.0.0.2:9090/admin/v2/brokers/other",
        )
        await admin.fails("GET", "/admin/v2/brokers/nowhere", 404, "Cluster does not exist")


async def test_health_produces_and_reads_on_the_heartbeat_topic(fake_clock: FakeClock) -> None:
    async with AsyncExitStack() as stack:
        broker, admin = await start(stack, MemoryMetadataTree(), fake_clock, 8080)
        assert await admin.ok("GET", "/admin/v2/brokers/health") == "ok"
        assert await admin.ok("GET", "/admin/v2/brokers/health?topicVersion=V2") == "ok"
        assert await admin.ok("GET", "/admin/v2/brokers/health?brokerId=127.0.0.1:8080") == "ok"
        for name in (
            "persistent://pulsar/standalone/127.0.0.1:8080/healthcheck",
            "persistent://pulsar/127.0.0.1:8080/healthcheck",
        ):
            topic = broker.topics.loaded_topic(TopicName.parse(name))
            assert topic is not None, name
            stats = topic.stats()
            assert stats.msg_in >= 1
            assert stats.producers == 0  # closed after the check
            assert stats.subscriptions == ()  # the reader's subscription went with it
        await admin.fails(
            "GET", "/admin/v2/brokers/health?topicVersion=V3", 404, "Invalid topicVersion"
        )
        await admin.fails(
            "GET",
            "/admin/v2/brokers/health?brokerId=10.9.9.9:1",
            404,
            "Broker id '10.9.9.9:1' not found in available brokers.",
        )
        # Not a broker id at all (it would not even be a metadata path): still a 404.
        await admin.fails(
            "GET",
            "/admin/v2/brokers/health?brokerId=a//b",
            404,
            "Broker id 'a//b' not found in available brokers.",
        )


async def test_health_of_another_broker_redirects(fake_clock: FakeClock) -> None:
    tree = MemoryMetadataTree()
    async with AsyncExitStack() as stack:
        _, first = await start(stack, tree, fake_clock, 8080)
        await start(stack, tree, fake_clock, 8081)
        assert await no_redirect(first, "/admin/v2/brokers/health?brokerId=127.0.0.1:8081") == (
            307,
            "http://127.0.0.1:8081/admin/v2/brokers/health?brokerId=127.0.0.1:8081",
        )


async def test_a_failing_health_check_is_a_500_with_the_reason(fake_clock: FakeClock) -> None:
    async def refuse(host: str, port: int) -> Any:
        raise OSError("no route to the broker")

    async with AsyncExitStack() as stack:
        broker, _ = await start(stack, MemoryMetadataTree(), fake_clock, 8080)
        assert broker.admin is not None
        broker.admin.health._connector = refuse
        client = await stack.enter_async_context(
            TestClient(TestServer(build_admin_app(broker.admin)))
        )
        await Admin(client).fails(
            "GET", "/admin/v2/brokers/health", 500, "health check on persistent://pulsar/"
        )


async def test_load_report_is_this_brokers_local_broker_data(
    fake_clock: FakeClock, admin: Admin, wire: Wire
) -> None:
    await wire.produce("persistent://public/default/t", 3)
    report = await admin.ok("GET", "/admin/v2/broker-stats/load-report")
    assert report["webServiceUrl"] == "http://127.0.0.1:8080"
    assert report["pulsarServiceUrl"] == "pulsar://127.0.0.1:6650"
    assert report["loadReportType"] == "LocalBrokerData"
    assert report["loadManagerClassName"].endswith("ModularLoadManagerImpl")
    assert set(report) >= {"cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"}
    # The topic's bundle shows once the bundle stats were sampled (statsUpdateFrequencyInSecs).
    await fake_clock.advance(60.0)
    report = await admin.ok("GET", "/admin/v2/broker-stats/load-report")
    [bundle] = [b for b in report["bundles"] if b.startswith("public/default/")]
    assert report["lastStats"][bundle]["topics"] == 1
    assert report["lastStats"][bundle]["producerCount"] == 1
    assert report["numProducers"] >= 1


async def test_metrics_carry_pulsars_load_balancing_usages(
    fake_clock: FakeClock, admin: Admin, wire: Wire, broker: Broker
) -> None:
    text = await admin.ok("GET", "/metrics")
    labels = '{cluster="standalone", broker="127.0.0.1", metric="loadBalancing"}'
    names = [
        "pulsar_lb_bandwidth_in_usage",
        "pulsar_lb_bandwidth_out_usage",
        "pulsar_lb_cpu_usage",
        "pulsar_lb_directMemory_usage",
        "pulsar_lb_memory_usage",
    ]
    for name in names:
        assert f"# TYPE {name} gauge" in text.splitlines()
        assert any(line.startswith(f"{name}{labels} ") for line in text.splitlines()), name
    families = parse_exposition(text)
    [sample] = families["pulsar_lb_memory_usage"].samples
    assert sample.labels == {
        "cluster": "standalone",
        "broker": "127.0.0.1",
        "metric": "loadBalancing",
    }
    assert 0 < sample.value < 100
    assert "pulsar_bundle_msg_rate_in" not in families  # exposeBundlesMetricsInPrometheus=false
    await admin.ok("POST", "/admin/v2/brokers/configuration/exposeBundlesMetricsInPrometheus/true")
    await wire.produce("persistent://public/default/t", 2)
    await fake_clock.advance(60.0)
    families = parse_exposition(await admin.ok("GET", "/metrics"))
    bundle = str(broker.ownership.bundle_of(TopicName.parse("persistent://public/default/t")))
    [topics] = [
        s for s in families["pulsar_bundle_topics_count"].samples if s.labels["bundle"] == bundle
    ]
    assert topics.value == 1
    assert topics.labels == {
        "cluster": "standalone",
        "broker": "127.0.0.1",
        "bundle": bundle,
        "metric": "bundle",
    }
    assert [
        s.value
        for s in families["pulsar_bundle_producer_count"].samples
        if s.labels["bundle"] == bundle
    ] == [1]


async def test_the_registration_node_holds_the_report(fake_clock: FakeClock) -> None:
    tree = MemoryMetadataTree()
    async with AsyncExitStack() as stack:
        await start(stack, tree, fake_clock, 8080)
        async with tree.open_session() as observer:
            node = await observer.get("/loadbalance/brokers/127.0.0.1:8080")
            assert node is not None
            assert node.ephemeral
            data = json.loads(node.value)
            assert data["pulsarServiceUrl"] == "pulsar://127.0.0.1:6650"
            assert data["brokerVersionString"]
        await anyio.lowlevel.checkpoint()
