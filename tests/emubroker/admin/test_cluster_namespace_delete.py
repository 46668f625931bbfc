"""Deleting a namespace in a cluster: its emptiness is the metadata store's, not one broker's view.

Pulsar's ``NamespacesBase`` refuses to delete a namespace with topics (409) by reading the
namespace's topic list from the metadata store, which every broker writes; a broker that served
a topic before its bundle moved on must not keep the namespace alive after the topic's new owner
deleted it.
"""

from __future__ import annotations

import pytest

from emubroker.naming import TopicName
from protocol import commands as c
from protocol.clock import FakeClock
from tests.emubroker.admin.test_routes_unload import cluster_with_admins

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOPIC = "persistent://public/default/gone"
TOPIC_PATH = "/admin/v2/persistent/public/default/gone"
NAMESPACE_PATH = "/admin/v2/namespaces/public/default"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_a_topic_deleted_by_its_new_owner_leaves_the_namespace_deletable_everywhere(
    fake_clock: FakeClock,
) -> None:
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        first, _ = await cluster.lookup(TOPIC, start=0)
        before = cluster.nodes.index(first)
        await admins[before].ok("PUT", TOPIC_PATH)
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
        assert answer.broker_service_url == cluster.nodes[after].broker.service_url
        await admins[before].fails(
            "DELETE", NAMESPACE_PATH, 409, "Cannot delete non empty namespace"
        )
        await admins[after].ok("DELETE", TOPIC_PATH)
        await admins[before].ok("DELETE", NAMESPACE_PATH)
        await admins[after].fails("DELETE", NAMESPACE_PATH, 404, "does not exist")
