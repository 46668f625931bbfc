"""protocol.client against a real in-process emubroker over TCP (the scenarios of its unit tests).

The broker runs in the test's own event loop (`open_broker`, no admin server), the client talks
to it over a loopback socket with the real clock. Waits are bounded by `anyio.fail_after` guards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from emubroker.app import Broker, open_broker
from emubroker.config import BrokerConfig
from emubroker.naming import TopicName
from protocol.client import (
    EARLIEST,
    LATEST,
    Client,
    Consumer,
    InitialPosition,
    Message,
    MultiConsumer,
    PartitionedProducer,
    Producer,
    SubType,
    open_client,
)
from protocol.errors import ConsumerBusyError, TopicNotFoundError

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

GUARD = 10.0  # seconds; a don't-hang guard, never a behaviour timeout


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    config = BrokerConfig(brokerServicePort=0, webServicePort=0)
    async with open_broker(config, admin=False) as running:
        yield running


@pytest.fixture
async def client(broker: Broker) -> AsyncIterator[Client]:
    async with open_client(broker.service_url, operation_timeout=5.0) as c:
        yield c


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/pc-{uuid.uuid4().hex[:12]}"


async def receive(consumer: Consumer | MultiConsumer, count: int) -> list[Message]:
    with anyio.fail_after(GUARD):
        return [await consumer.receive() for _ in range(count)]


async def producer_on(client: Client, topic: str, **options: Any) -> Producer:
    producer = await client.create_producer(topic, **options)
    assert isinstance(producer, Producer)
    return producer


async def consumer_on(client: Client, topic: str, sub: str = "s", **options: Any) -> Consumer:
    options.setdefault("initial_position", InitialPosition.EARLIEST)
    consumer = await client.subscribe(topic, sub, **options)
    assert isinstance(consumer, Consumer)
    return consumer


@pytest.mark.parametrize("batching", [False, True])
async def test_produce_consume_ids_match_and_entries_start_at_zero(
    client: Client, topic: str, batching: bool
) -> None:
    producer = await producer_on(client, topic, batching_enabled=batching)
    futures = [await producer.send_async(b"m%d" % i, properties={"i": str(i)}) for i in range(20)]
    await producer.flush()
    ids = [await f for f in futures]
    assert ids[0].entry_id == 0
    if batching:
        assert ids[0].batch_index == 0
        assert ids[0].batch_size > 0
    else:
        assert [i.entry_id for i in ids] == list(range(20))
    consumer = await consumer_on(client, topic)
    received = await receive(consumer, 20)
    assert [m.message_id for m in received] == ids
    assert [m.payload for m in received] == [b"m%d" % i for i in range(20)]
    assert received[3].properties == {"i": "3"}
    assert received[0].topic == topic


async def test_exclusive_refuses_a_second_consumer(client: Client, topic: str) -> None:
    await consumer_on(client, topic, sub_type=SubType.EXCLUSIVE)
    with pytest.raises(ConsumerBusyError):
        await consumer_on(client, topic, sub_type=SubType.EXCLUSIVE)


@pytest.mark.parametrize("sub_type", [SubType.SHARED, SubType.KEY_SHARED, SubType.FAILOVER])
async def test_subscription_types_deliver_everything_once(
    client: Client, topic: str, sub_type: SubType
) -> None:
    first = await consumer_on(client, topic, sub_type=sub_type, receiver_queue_size=10)
    second = await consumer_on(client, topic, sub_type=sub_type, receiver_queue_size=10)
    producer = await producer_on(client, topic)
    for i in range(40):
        await producer.send(b"m%d" % i, key=f"k{i % 4}")
    got: list[Message] = []
    with anyio.fail_after(GUARD):
        while len(got) < 40:
            for consumer in (first, second):
                message = consumer.receive_nowait()
                if message is not None:
                    got.append(message)
                    consumer.acknowledge(message)
            await anyio.sleep(0.001)
    assert sorted(m.payload for m in got) == sorted(b"m%d" % i for i in range(40))
    assert {m.key for m in got} == {"k0", "k1", "k2", "k3"}


async def test_readers_from_earliest_latest_and_inside_a_batch(client: Client, topic: str) -> None:
    producer = await producer_on(client, topic, batching_enabled=True)
    futures = [await producer.send_async(b"m%d" % i) for i in range(5)]
    await producer.flush()
    ids = [await f for f in futures]

    earliest = await client.create_reader(topic, EARLIEST)
    with anyio.fail_after(GUARD):
        assert [(await earliest.read_next()).message_id for _ in range(5)] == ids
        assert not await earliest.has_message_available()

    inside = await client.create_reader(topic, ids[2])
    with anyio.fail_after(GUARD):
        assert (await inside.read_next()).message_id == ids[3]

    latest = await client.create_reader(topic, LATEST)
    assert not await latest.has_message_available()
    new = await producer.send(b"new")
    with anyio.fail_after(GUARD):
        assert await latest.has_message_available()
        assert (await latest.read_next()).message_id == new


async def test_partitioned_topic(client: Client, broker: Broker, topic: str) -> None:
    await broker.topics.create_partitioned_topic(TopicName.parse(topic), 3)
    assert len(await client.get_partitions(topic)) == 3
    producer = await client.create_producer(topic)
    assert isinstance(producer, PartitionedProducer)
    consumer = await client.subscribe(topic, "s", initial_position=InitialPosition.EARLIEST)
    assert isinstance(consumer, MultiConsumer)
    sent = [await producer.send(b"m%d" % i) for i in range(9)]
    assert {m.partition for m in sent} == {0, 1, 2}
    received = await receive(consumer, 9)
    assert sorted(m.message_id for m in received) == sorted(sent)
    assert {m.message_id.partition for m in received} == {0, 1, 2}
    keyed = await producer.send(b"k", key="same")
    keyed_again = await producer.send(b"k", key="same")
    assert keyed.partition == keyed_again.partition


async def test_negative_acks_redeliver_with_growing_counts(client: Client, topic: str) -> None:
    consumer = await consumer_on(
        client, topic, sub_type=SubType.SHARED, negative_ack_redelivery_delay=0.1
    )
    producer = await producer_on(client, topic)
    await producer.send(b"hello")
    counts = []
    for _ in range(4):
        (message,) = await receive(consumer, 1)
        counts.append(message.redelivery_count)
        consumer.negative_acknowledge(message)
    assert counts == [0, 1, 2, 3]


async def test_negative_ack_on_exclusive(client: Client, topic: str) -> None:
    consumer = await consumer_on(client, topic, negative_ack_redelivery_delay=0.1)
    producer = await producer_on(client, topic)
    await producer.send(b"a")
    (message,) = await receive(consumer, 1)
    consumer.negative_acknowledge(message)
    (again,) = await receive(consumer, 1)
    assert again.message_id == message.message_id
    assert again.redelivery_count == 0  # Exclusive: Pulsar does not count redeliveries


async def test_seek_by_id_and_by_time(client: Client, topic: str) -> None:
    producer = await producer_on(client, topic)
    ids = [await producer.send(b"m%d" % i) for i in range(6)]
    consumer = await consumer_on(client, topic)
    received = await receive(consumer, 6)
    with anyio.fail_after(GUARD):
        await consumer.seek(ids[2])
    assert [m.message_id for m in await receive(consumer, 3)] == ids[3:]
    with anyio.fail_after(GUARD):
        await consumer.seek(received[4].publish_time)
    assert (await receive(consumer, 1))[0].publish_time >= received[4].publish_time
    with anyio.fail_after(GUARD):
        await consumer.seek(EARLIEST)
    assert (await receive(consumer, 1))[0].message_id == ids[0]


async def test_cumulative_ack_survives_a_resubscribe(client: Client, topic: str) -> None:
    producer = await producer_on(client, topic)
    ids = [await producer.send(b"m%d" % i) for i in range(5)]
    consumer = await consumer_on(client, topic, ack_group_time=0)
    received = await receive(consumer, 3)
    consumer.acknowledge_cumulative(received[2])
    await consumer.aclose()
    again = await consumer_on(client, topic)
    assert [m.message_id for m in await receive(again, 2)] == ids[3:]


async def test_last_message_id(client: Client, topic: str) -> None:
    consumer = await consumer_on(client, topic)
    assert (await consumer.get_last_message_id()).entry_id == -1
    producer = await producer_on(client, topic)
    for i in range(3):
        await producer.send(b"m")
        last = await consumer.get_last_message_id()
        assert (last.entry_id, last.batch_index) == (i, -1)


async def test_unknown_namespace_is_topic_not_found(client: Client) -> None:
    with pytest.raises(TopicNotFoundError):
        await client.create_producer("acme/nowhere/t")


async def test_topic_unload_reconnects_producer_and_consumer(
    client: Client, broker: Broker, topic: str
) -> None:
    producer = await producer_on(client, topic)
    consumer = await consumer_on(client, topic)
    first = await producer.send(b"before")
    await broker.topics.unload(TopicName.parse(topic))
    with anyio.fail_after(GUARD):
        second = await producer.send(b"after")
    assert second > first
    assert [m.payload for m in await receive(consumer, 2)] == [b"before", b"after"]


async def test_ten_mib_chunked_message(client: Client, topic: str) -> None:
    producer = await producer_on(client, topic, chunking_enabled=True)
    payload = uuid.uuid4().bytes * (10 * 1024 * 1024 // 16)
    consumer = await consumer_on(client, topic)
    with anyio.fail_after(GUARD * 3):
        message_id = await producer.send(payload)
    (message,) = await receive(consumer, 1)
    assert message.payload == payload
    assert message.message_id == message_id
    consumer.acknowledge(message)


async def test_official_client_reads_what_we_produce(
    broker: Broker, client: Client, topic: str
) -> None:
    import pulsar

    producer = await producer_on(client, topic, batching_enabled=True)
    futures = [
        await producer.send_async(b"m%d" % i, key=f"k{i}", properties={"i": str(i)})
        for i in range(3)
    ]
    await producer.flush()
    ours = [await f for f in futures]

    def consume() -> list[tuple[bytes, str, dict[str, str], tuple[int, int, int]]]:
        official = pulsar.Client(
            broker.service_url,
            operation_timeout_seconds=5,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            consumer = official.subscribe(
                topic, "official", initial_position=pulsar.InitialPosition.Earliest
            )
            out = []
            for _ in range(3):
                msg = consumer.receive(timeout_millis=5000)
                mid = msg.message_id()
                out.append(
                    (
                        msg.data(),
                        msg.partition_key(),
                        msg.properties(),
                        (mid.ledger_id(), mid.entry_id(), mid.batch_index()),
                    )
                )
            return out
        finally:
            official.close()

    got = await anyio.to_thread.run_sync(consume)
    assert [g[0] for g in got] == [b"m0", b"m1", b"m2"]
    assert [g[1] for g in got] == ["k0", "k1", "k2"]
    assert [g[2] for g in got] == [{"i": "0"}, {"i": "1"}, {"i": "2"}]
    assert [g[3] for g in got] == [(m.ledger_id, m.entry_id, m.batch_index) for m in ours]


async def test_we_read_what_the_official_client_produces(
    broker: Broker, client: Client, topic: str
) -> None:
    import pulsar

    consumer = await consumer_on(client, topic)

    def produce() -> list[tuple[int, int, int]]:
        official = pulsar.Client(
            broker.service_url,
            operation_timeout_seconds=5,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )
        try:
            producer = official.create_producer(
                topic, batching_enabled=True, batching_max_publish_delay_ms=10
            )
            ids = []
            for i in range(3):
                producer.send_async(b"o%d" % i, None, properties={"i": str(i)}, partition_key="k")
            producer.flush()
            plain = official.create_producer(topic, batching_enabled=False)
            mid = plain.send(b"plain")
            ids.append((mid.ledger_id(), mid.entry_id(), mid.batch_index()))
            return ids
        finally:
            official.close()

    (plain_id,) = await anyio.to_thread.run_sync(produce)
    received = await receive(consumer, 4)
    assert [m.payload for m in received] == [b"o0", b"o1", b"o2", b"plain"]
    assert [m.message_id.batch_index for m in received[:3]] == [0, 1, 2]
    assert [m.properties for m in received[:3]] == [{"i": "0"}, {"i": "1"}, {"i": "2"}]
    assert {m.key for m in received[:3]} == {"k"}
    last = received[3].message_id
    assert (last.ledger_id, last.entry_id, last.batch_index) == plain_id
