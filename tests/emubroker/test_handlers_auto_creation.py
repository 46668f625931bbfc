"""The namespace's ``autoTopicCreationOverride`` on the wire, learnt through the policy watch.

The override is written to the metadata store as the admin API of any broker writes it, never
handed to the broker directly: each broker learns it from its namespace watch, and applies it at
the next PARTITIONED_METADATA, PRODUCER or SUBSCRIBE of a topic that does not exist yet, without
a restart. On a cluster, the policy written through one broker is applied by the topic's owner.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from emubroker.app import Broker
from emubroker.naming import NamespaceName
from emubroker.policies import Policies, PolicyStore
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.errors import ServerError
from tests.emubroker.test_handlers import Connections
from tests.emubroker.test_handlers import broker as broker  # the in-memory broker fixture
from tests.emubroker.test_handlers import conns as conns
from tests.support.broker import WireClient
from tests.support.inprocess_cluster import inprocess_cluster

pytestmark = pytest.mark.anyio

NAMESPACE = NamespaceName("public", "default")
OFF: dict[str, Any] = {"allowAutoTopicCreation": False}
PARTITIONED_3: dict[str, Any] = {
    "allowAutoTopicCreation": True,
    "topicType": "partitioned",
    "defaultNumPartitions": 3,
}


async def write_override(broker: Broker, override: dict[str, Any] | None) -> None:
    """Write the override as the admin API does, and let every namespace watch deliver it."""

    def change(policies: Policies) -> Policies:
        return msgspec.structs.replace(policies, autoTopicCreationOverride=override)

    await PolicyStore(broker.metadata).update_namespace(NAMESPACE, change)
    await anyio.wait_all_tasks_blocked()


async def partitioned_metadata(
    client: WireClient, topic: str
) -> c.PartitionedTopicMetadataResponse:
    await client.send(c.PartitionedTopicMetadata(topic=topic, request_id=client.request_id()))
    reply = await client.receive_command()
    assert isinstance(reply, c.PartitionedTopicMetadataResponse), reply
    return reply


async def producer(client: WireClient, topic: str, producer_id: int = 1) -> c.Command:
    await client.send(
        c.Producer(topic=topic, producer_id=producer_id, request_id=client.request_id())
    )
    return await client.receive_command()


async def test_an_override_refusing_creation_refuses_metadata_producers_and_consumers(
    broker: Broker, conns: Connections
) -> None:
    client = await conns.open()
    topic = "persistent://public/default/refused"
    await write_override(broker, OFF)  # the broker allows (Pulsar's default)
    reply = await partitioned_metadata(client, topic)
    assert (reply.response, reply.error) == (c.MetadataResult.FAILED, ServerError.TopicNotFound)
    refused = await producer(client, topic)
    assert isinstance(refused, c.Error), refused
    assert refused.error is ServerError.TopicNotFound
    request_id = client.request_id()
    await client.send(
        c.Subscribe(
            topic=topic,
            subscription="s",
            sub_type=c.SubType.EXCLUSIVE,
            consumer_id=1,
            request_id=request_id,
        )
    )
    missing = await client.receive_command()
    assert isinstance(missing, c.Error), missing
    assert missing.error is ServerError.TopicNotFound
    # Removed: the broker's allowAutoTopicCreation decides again, at once.
    await write_override(broker, None)
    reply = await partitioned_metadata(client, topic)
    assert (reply.response, reply.partitions) == (c.MetadataResult.SUCCESS, 0)
    assert isinstance(await producer(client, topic, producer_id=2), c.ProducerSuccess)


async def test_an_override_creates_partitioned_topics_of_its_count(
    broker: Broker, conns: Connections
) -> None:
    client = await conns.open()
    await write_override(broker, PARTITIONED_3)
    reply = await partitioned_metadata(client, "persistent://public/default/parts")
    assert (reply.response, reply.partitions) == (c.MetadataResult.SUCCESS, 3)
    created = await producer(client, "persistent://public/default/parts-partition-2")
    assert isinstance(created, c.ProducerSuccess), created
    beyond = await producer(client, "persistent://public/default/parts-partition-3", 2)
    assert isinstance(beyond, c.Error)
    assert beyond.error is ServerError.TopicNotFound


async def test_a_policy_written_through_one_broker_is_applied_by_the_owner(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock, 2) as cluster:
        topic = "persistent://public/default/owned-elsewhere"
        owner, _ = await cluster.lookup(topic)
        other = next(node for node in cluster.nodes if node is not owner)
        await write_override(other.broker, OFF)
        client = await owner.client()
        reply = await partitioned_metadata(client, topic)
        assert reply.error is ServerError.TopicNotFound
        refused = await producer(client, topic)
        assert isinstance(refused, c.Error), refused
        assert refused.error is ServerError.TopicNotFound
        await write_override(other.broker, PARTITIONED_3)
        reply = await partitioned_metadata(client, topic)
        assert reply.partitions == 3
