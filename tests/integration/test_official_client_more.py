"""The official client on partitioned topics, its asyncio API, topic unloads and the pytest plugin.

The asyncio API runs against the shared ``service_url`` brokers of ``conftest``. Partitioned
topics come from auto-creation (``allowAutoTopicCreationType=partitioned``,
``defaultNumPartitions=3``): set by keyword for the in-process broker and through ``--config``
for the subprocess, which also exercises the CLI's properties-file loading.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pulsar.asyncio
import pytest

from emubroker.naming import TopicName
from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.conftest import OPERATION_TIMEOUT, make_client
from tests.support.broker import standalone_process

pytestmark = pytest.mark.integration

RECEIVE_MS = 5000


@pytest.fixture(scope="module", params=["in-thread", "subprocess"])
def partitioned_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "in-thread":
        with run_broker_in_thread(
            allowAutoTopicCreationType="partitioned", defaultNumPartitions=3
        ) as running:
            yield running.service_url
    else:
        conf: Path = tmp_path_factory.mktemp("conf") / "broker.conf"
        conf.write_text(
            "# partitioned auto-creation\n"
            "allowAutoTopicCreationType=partitioned\n"
            "defaultNumPartitions=3\n"
            "advertisedAddress=\n"
        )
        with standalone_process("--config", str(conf)) as proc:
            yield proc.service_url


def key(message_id: pulsar.MessageId) -> tuple[int, int, int, int]:
    return (
        message_id.ledger_id(),
        message_id.entry_id(),
        message_id.partition(),
        message_id.batch_index(),
    )


def unique(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:10]}"


def test_partitioned_topic_round_robin_and_ids(partitioned_url: str) -> None:
    client = make_client(partitioned_url)
    try:
        topic = unique("part")
        assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(topic)
        sent = [producer.send(f"p{i}".encode()) for i in range(9)]
        assert {i.partition() for i in sent} == {0, 1, 2}
        received = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(9)]
        assert sorted(m.data() for m in received) == sorted(f"p{i}".encode() for i in range(9))
        assert sorted(m.message_id() for m in received) == sorted(sent)
        for m in received:
            assert m.topic_name() == f"{topic}-partition-{m.message_id().partition()}"
            consumer.acknowledge(m)
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert sorted(reader.read_next(RECEIVE_MS).data() for _ in range(9)) == sorted(
            f"p{i}".encode() for i in range(9)
        )
    finally:
        client.close()


def test_keyed_messages_stay_on_one_partition(partitioned_url: str) -> None:
    client = make_client(partitioned_url)
    try:
        topic = unique("keyed")
        producer = client.create_producer(topic)
        partitions = {producer.send(b"x", partition_key="same").partition() for _ in range(6)}
        assert len(partitions) == 1
    finally:
        client.close()


async def test_asyncio_api_round_trip(service_url: str) -> None:
    client = pulsar.asyncio.Client(
        service_url,
        operation_timeout_seconds=OPERATION_TIMEOUT,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        topic = unique("aio")
        consumer = await client.subscribe(topic, "sub")
        producer = await client.create_producer(topic)  # batching on by default here
        sent = []
        for i in range(6):
            sent.append(await producer.send(f"a{i}".encode()))
            # test_consumer_get_last_message_id: entry ids are 0, 1, 2 ... per topic
            assert (await consumer.get_last_message_id()).entry_id() == i
        received = [await consumer.receive() for _ in range(6)]
        assert [key(m.message_id()) for m in received] == [key(i) for i in sent]
        for m in received:
            await consumer.acknowledge(m)
        with pytest.raises(pulsar.asyncio.PulsarException) as info:
            await client.create_producer(f"nosuch/ns/t-{uuid.uuid4().hex[:8]}")
        assert info.value.error() == pulsar.Result.TopicNotFound
        await producer.close()
        await consumer.close()
    finally:
        await client.close()


# asyncio tests need an event loop: the anyio plugin provides it on the asyncio backend.
test_asyncio_api_round_trip = pytest.mark.anyio(test_asyncio_api_round_trip)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the official asyncio API runs on asyncio only


@pytest.fixture(scope="module")
def thread_broker() -> Iterator[RunningBroker]:
    with run_broker_in_thread() as running:
        yield running


def test_unload_reconnects_producer_and_consumer(thread_broker: RunningBroker) -> None:
    client = make_client(thread_broker.service_url)
    try:
        topic = unique("unload")
        consumer = client.subscribe(topic, "sub")
        producer = client.create_producer(topic)
        before = producer.send(b"before")
        first = consumer.receive(timeout_millis=RECEIVE_MS)
        assert first.message_id() == before  # delivered, not acked
        thread_broker.call(thread_broker.broker.topics.unload, TopicName.parse(topic))
        after = producer.send(b"after")  # waits for the producer's reconnection
        assert after > before
        got = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(2)]
        assert [m.data() for m in got] == [b"before", b"after"]
        assert got[0].redelivery_count() == 0  # an unload is not a redelivery
    finally:
        client.close()


def test_plugin_fixture_serves_a_fresh_broker(pulsar_broker: RunningBroker) -> None:
    assert pulsar_broker.service_url.startswith("pulsar://127.0.0.1:")
    assert pulsar_broker.admin_url.startswith("http://127.0.0.1:")
    client = make_client(pulsar_broker.service_url)
    try:
        producer = client.create_producer("fixture-topic")
        assert producer.send(b"x").entry_id() == 0
    finally:
        client.close()
