"""A topic's properties in a cluster and across restarts: they are where every broker finds them.

A non-partitioned topic's live in its managed ledger's stored info, which the next owner opens;
a partitioned topic's in its metadata, which every broker reads and changes.
"""

from __future__ import annotations

import anyio
import pytest
from aiohttp.test_utils import TestClient, TestServer

from emubroker.admin import build_admin_app
from emubroker.app import open_broker
from emubroker.config import load_config
from emubroker.metadata import MemoryMetadataStore
from emubroker.naming import TopicName
from emubroker.storage import BookieBackend
from protocol import commands as c
from protocol.clock import FakeClock
from storage_stub.server import open_stub_server
from tests.emubroker.admin.conftest import Admin
from tests.emubroker.admin.test_routes_unload import cluster_with_admins

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOPIC = "persistent://public/default/props"
TOPIC_PATH = "/admin/v2/persistent/public/default/props"
PARTITIONED_PATH = "/admin/v2/persistent/public/default/props-p"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_properties_follow_the_topic_to_its_next_owner(fake_clock: FakeClock) -> None:
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        first, _ = await cluster.lookup(TOPIC, start=0)
        before = cluster.nodes.index(first)
        await admins[before].ok("PUT", TOPIC_PATH, json={"a": "1"})
        await admins[before].ok("PUT", f"{TOPIC_PATH}/properties", json={"b": "2"})
        # The bundle moves on (as the leader's shedding moves it) and another broker takes it.
        assert first.broker.unloader is not None
        assert await first.broker.unloader.unload(
            first.broker.ownership.bundle_of(TopicName.parse(TOPIC))
        )
        after = (before + 1) % 3
        client = await cluster.nodes[after].client()
        await client.send(c.LookupTopic(topic=TOPIC, request_id=1, authoritative=True))
        answer = await client.receive_command()
        assert isinstance(answer, c.LookupTopicResponse), answer
        assert answer.response is c.LookupType.CONNECT, answer
        assert await admins[after].ok("GET", f"{TOPIC_PATH}/properties") == {"a": "1", "b": "2"}
        await admins[after].ok("DELETE", f"{TOPIC_PATH}/properties?key=a")
        assert await admins[after].ok("GET", f"{TOPIC_PATH}/properties") == {"b": "2"}


async def test_properties_outlive_a_broker_restart(fake_clock: FakeClock) -> None:
    config = load_config(overrides={"brokerServicePort": 6650, "webServicePort": 8080})
    async with (
        open_stub_server(clock=fake_clock) as stub,
        stub.open_local_client() as bookie,
        MemoryMetadataStore() as store,
    ):
        for run in range(2):
            async with (
                open_broker(
                    config,
                    clock=fake_clock,
                    metadata=store,
                    ledgers=BookieBackend(bookie),
                    listen=False,
                    admin=False,
                ) as broker,
                TestClient(TestServer(build_admin_app(broker.admin))) as http,
            ):
                admin = Admin(http)
                if run == 0:
                    await admin.ok("PUT", TOPIC_PATH, json={"a": "1"})
                    await admin.ok("PUT", f"{PARTITIONED_PATH}/partitions", data="2")
                    await admin.ok("PUT", f"{PARTITIONED_PATH}/properties", json={"p": "q"})
                else:
                    assert await admin.ok("GET", f"{TOPIC_PATH}/properties") == {"a": "1"}
                    assert await admin.ok("GET", f"{PARTITIONED_PATH}/properties") == {"p": "q"}


async def test_a_partitioned_topics_properties_are_the_same_through_every_broker(
    fake_clock: FakeClock,
) -> None:
    async with cluster_with_admins(fake_clock) as (_, admins):
        response = await admins[0].client.put(
            f"{PARTITIONED_PATH}/partitions",
            data='{"partitions": 2, "properties": {"a": "1"}}',
            headers={"Content-Type": "application/vnd.partitioned-topic-metadata+json"},
        )
        assert response.status == 204, await response.text()
        await admins[1].ok("PUT", f"{PARTITIONED_PATH}/properties", json={"b": "2"})
        await admins[2].ok("DELETE", f"{PARTITIONED_PATH}/properties?key=a")
        await anyio.wait_all_tasks_blocked()  # every broker's watch has seen the changes
        for admin in admins:
            assert await admin.ok("GET", f"{PARTITIONED_PATH}/properties") == {"b": "2"}
