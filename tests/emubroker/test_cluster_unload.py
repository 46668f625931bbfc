"""Unload, lost ownership and graceful shutdown across brokers (spec §6.3), in one process.

Three brokers share a metadata tree and an in-process stub (bookie mode). A bundle unloaded
closes its clients with CLOSE_PRODUCER / CLOSE_CONSUMER and leaves nothing cached behind: when
it comes back to a broker after another one wrote to its topics, that broker serves what the
other wrote. A broker whose session expired drops its bundles without writing; one shutting
down hands every bundle over first.
"""

from __future__ import annotations

import anyio
import pytest

from emubroker.naming import NamespaceBundle, TopicName
from protocol import commands as c
from protocol.clock import FakeClock
from tests.support.broker import WireClient
from tests.support.inprocess_cluster import InProcessCluster, Node, inprocess_cluster

pytestmark = pytest.mark.anyio

TOPIC = "persistent://public/default/handover"


async def produce(node: Node, first: int, count: int) -> WireClient:
    """A producer on ``node`` that stored messages ``first .. first+count-1``."""
    client = await node.client()
    await client.send(c.Producer(topic=TOPIC, producer_id=1, request_id=1))
    ready = await client.receive_command()
    assert isinstance(ready, c.ProducerSuccess), ready
    for seq in range(first, first + count):
        meta = c.MessageMetadata(
            producer_name=ready.producer_name, sequence_id=seq, publish_time=1_700_000_000_000
        )
        await client.send_message(1, seq, b"m%d" % seq, metadata=meta)
    for _ in range(count):
        assert isinstance(await client.receive_command(), c.SendReceipt)
    return client


async def subscribe(node: Node, permits: int) -> WireClient:
    client = await node.client()
    await client.send(
        c.Subscribe(
            topic=TOPIC,
            subscription="sub",
            sub_type=c.SubType.SHARED,
            consumer_id=1,
            request_id=2,
            initial_position=c.InitialPosition.EARLIEST,
        )
    )
    assert await client.receive_command() == c.Success(request_id=2)
    if permits:
        await client.send(c.Flow(consumer_id=1, message_permits=permits))
    return client


async def received(client: WireClient, count: int) -> list[bytes]:
    payloads = []
    for _ in range(count):
        with anyio.fail_after(10):  # a failure guard only: a broken broker never sends them
            frame = await client.receive()
        assert isinstance(frame.command, c.Message), frame.command
        assert frame.payload is not None
        payloads.append(bytes(frame.payload.body))
    return payloads


async def take(cluster: InProcessCluster, index: int) -> Node:
    """Make broker ``index`` own TOPIC's bundle (an authoritative lookup, as after the leader's
    redirect)."""
    node = cluster.nodes[index]
    client = await node.client()
    await client.send(c.LookupTopic(topic=TOPIC, request_id=1, authoritative=True))
    answer = await client.receive_command()
    assert isinstance(answer, c.LookupTopicResponse)
    assert answer.broker_service_url == node.broker.service_url, answer
    return node


def bundle_of(node: Node) -> NamespaceBundle:
    return node.broker.ownership.bundle_of(TopicName.parse(TOPIC))


async def test_an_unload_closes_the_clients_and_forgets_the_topic(fake_clock: FakeClock) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        first = await take(cluster, 1)
        producer = await produce(first, 0, 3)
        consumer = await subscribe(first, permits=0)
        assert first.broker.unloader is not None
        assert await first.broker.unloader.unload(bundle_of(first))
        assert await producer.receive_command() == c.CloseProducer(producer_id=1, request_id=0)
        assert await consumer.receive_command() == c.CloseConsumer(consumer_id=1, request_id=0)
        assert not first.broker.ownership.is_owned(bundle_of(first))
        assert first.broker.topics.loaded_topic(TopicName.parse(TOPIC)) is None
        # Another broker takes the bundle and writes; back on the first broker, what the other
        # wrote is served: nothing the first one cached about the topic was reused.
        second = await take(cluster, 2)
        await produce(second, 3, 2)
        assert second.broker.unloader is not None
        assert await second.broker.unloader.unload(bundle_of(second))
        again = await take(cluster, 1)
        reader = await subscribe(again, permits=10)
        assert await received(reader, 5) == [b"m%d" % i for i in range(5)]


async def test_a_lost_bundle_is_dropped_without_writing(fake_clock: FakeClock) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        zombie = await take(cluster, 1)
        producer = await produce(zombie, 0, 2)
        # Its session ends on the store (frozen past the session timeout) while it runs on.
        await zombie.store.expire_session()
        await anyio.wait_all_tasks_blocked()
        assert await producer.receive_command() == c.CloseProducer(producer_id=1, request_id=0)
        assert not zombie.broker.ownership.is_owned(bundle_of(zombie))
        assert zombie.broker.topics.loaded_topic(TopicName.parse(TOPIC)) is None
        heir = await take(cluster, 2)
        reader = await subscribe(heir, permits=10)
        assert await received(reader, 2) == [b"m0", b"m1"]


async def test_a_broker_shutting_down_hands_its_bundles_over(fake_clock: FakeClock) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        leaving = await take(cluster, 1)
        producer = await produce(leaving, 0, 1)
        await leaving.broker.shutdown()
        assert await producer.receive_command() == c.CloseProducer(producer_id=1, request_id=0)
        assert leaving.broker.ownership.owned_bundles() == []
        # Unregistered first: the leader places the bundle elsewhere.
        owner, _ = await cluster.lookup(TOPIC, start=0)
        assert owner is not leaving
        reader = await subscribe(owner, permits=10)
        assert await received(reader, 1) == [b"m0"]


async def test_an_unload_under_heavy_produce_loses_nothing_acknowledged(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        owner = await take(cluster, 1)
        client = await owner.client()
        await client.send(c.Producer(topic=TOPIC, producer_id=1, request_id=1))
        ready = await client.receive_command()
        assert isinstance(ready, c.ProducerSuccess)
        for seq in range(300):
            meta = c.MessageMetadata(
                producer_name=ready.producer_name, sequence_id=seq, publish_time=1_700_000_000_000
            )
            await client.send_message(1, seq, b"m%d" % seq, metadata=meta)
        assert owner.broker.unloader is not None
        async with anyio.create_task_group() as tg:
            tg.start_soon(owner.broker.unloader.unload, bundle_of(owner))
            acknowledged = []
            while True:
                with anyio.fail_after(10):
                    reply = await client.receive_command()
                if isinstance(reply, c.CloseProducer):
                    break
                assert isinstance(reply, c.SendReceipt), reply
                acknowledged.append(reply.sequence_id)
        assert acknowledged == list(range(len(acknowledged)))
        heir = await take(cluster, 2)
        reader = await subscribe(heir, permits=1000)
        stored = await received(reader, len(acknowledged))
        assert stored == [b"m%d" % seq for seq in acknowledged]
