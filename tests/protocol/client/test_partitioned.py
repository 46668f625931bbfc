"""Partitioned topics: one child per partition, routing, a shared receive queue."""

from __future__ import annotations

import anyio
import pytest

from protocol import commands as c
from protocol.client import (
    EARLIEST,
    Client,
    InitialPosition,
    MessageId,
    MultiConsumer,
    PartitionedProducer,
    partition_for_key,
)
from protocol.clock import FakeClock
from tests.support.fake_broker import LEDGER, FakeBroker

pytestmark = pytest.mark.anyio

TOPIC = "persistent://public/default/p"


@pytest.fixture
def partitioned(broker: FakeBroker) -> FakeBroker:
    broker.partitions[TOPIC] = 3
    return broker


async def test_producer_has_one_child_per_partition_and_round_robins(
    client: Client, partitioned: FakeBroker
) -> None:
    producer = await client.create_producer("p")
    assert isinstance(producer, PartitionedProducer)
    lookups = [lk.topic for lk in partitioned.of_type(c.LookupTopic)]
    assert lookups == [f"{TOPIC}-partition-{i}" for i in range(3)]
    assert [p.topic for p in partitioned.of_type(c.Producer)] == lookups
    ids = [await producer.send(b"m%d" % i) for i in range(4)]
    assert ids == [
        MessageId(LEDGER, 0, 0),
        MessageId(LEDGER, 0, 1),
        MessageId(LEDGER, 0, 2),
        MessageId(LEDGER, 1, 0),
    ]


async def test_keyed_messages_go_to_the_hashed_partition(
    client: Client, partitioned: FakeBroker
) -> None:
    producer = await client.create_producer("p")
    for key in ("alpha", "beta", "gamma", "alpha"):
        message_id = await producer.send(b"x", key=key)
        assert message_id.partition == partition_for_key(key, 3)


async def test_consumer_receives_from_every_partition_with_partition_ids(
    client: Client, partitioned: FakeBroker
) -> None:
    producer = await client.create_producer("p")
    consumer = await client.subscribe("p", "s", initial_position=InitialPosition.EARLIEST)
    assert isinstance(consumer, MultiConsumer)
    await anyio.wait_all_tasks_blocked()
    sent = {await producer.send(b"m%d" % i) for i in range(6)}
    received = [await consumer.receive() for _ in range(6)]
    assert {m.message_id for m in received} == sent
    assert {m.topic for m in received} == {f"{TOPIC}-partition-{i}" for i in range(3)}
    for message in received:
        consumer.acknowledge(message)
    consumer.flush_acks()
    await anyio.wait_all_tasks_blocked()
    acked = {(a.consumer_id, d.entry_id) for a in partitioned.of_type(c.Ack) for d in a.message_id}
    assert len(acked) == 6  # each ack went to its partition's consumer
    subscribes = partitioned.of_type(c.Subscribe)
    assert {s.subscription for s in subscribes} == {"s"}
    assert len({s.consumer_id for s in subscribes}) == 3


async def test_partition_queues_share_the_total_budget(client: Client, broker: FakeBroker) -> None:
    broker.partitions[TOPIC] = 100
    await client.subscribe("p", "s")
    await anyio.wait_all_tasks_blocked()
    assert {f.message_permits for f in broker.of_type(c.Flow)} == {500}  # min(1000, 50000/100)


async def test_partitioned_reader_from_earliest(client: Client, partitioned: FakeBroker) -> None:
    producer = await client.create_producer("p")
    sent = {await producer.send(b"m%d" % i) for i in range(3)}
    reader = await client.create_reader("p", EARLIEST)
    assert {(await reader.read_next()).message_id for _ in range(3)} == sent
    assert not await reader.has_message_available()


async def test_child_reconnects_alone(
    client: Client, partitioned: FakeBroker, fake_clock: FakeClock
) -> None:
    producer = await client.create_producer("p")
    assert isinstance(producer, PartitionedProducer)
    child = producer.producers[1]
    partitioned.sessions[0].send(c.CloseProducer(producer_id=child.producer_id, request_id=0))
    await anyio.wait_all_tasks_blocked()
    assert not child.is_connected()
    assert producer.producers[0].is_connected()
    await fake_clock.advance(0.1)
    assert producer.is_connected()
    assert partitioned.of_type(c.LookupTopic)[-1].topic == f"{TOPIC}-partition-1"
