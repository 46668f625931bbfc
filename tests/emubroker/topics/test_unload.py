from __future__ import annotations

from typing import Any

import anyio
import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.naming import AssignedBroker
from emubroker.storage import BookieBackend
from emubroker.topics import SubscribeRequest, Topic, TopicService
from emubroker.topics.managed_ledger import ManagedLedger
from emubroker.topics.settings import TopicSettings
from emubroker.topics.sinks import HeldCloses
from protocol.clock import FakeClock
from protocol.commands import AccessMode, AckType, InitialPosition, SubType
from protocol.errors import ServiceNotReadyError
from storage_stub.server import open_stub_server
from tests.emubroker.topics.helpers import (
    KNOWN_NAMESPACES,
    FakeConsumerSink,
    FakeProducerSink,
    add_producer,
    mid,
    open_service,
    publish,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


async def test_unload_closes_handlers_and_keeps_data_acks_and_subscriptions() -> None:
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        psink = FakeProducerSink()
        producer = await add_producer(topic, 7, sink=psink)
        ids = [await publish(topic, producer, b"%d" % i) for i in range(4)]
        ledger = ids[0][0]
        csink = FakeConsumerSink()
        consumer = await subscribe(topic, csink, consumer_id=3, sub_type=SubType.FAILOVER)
        consumer.flow(3)
        await settle()
        assert csink.entry_ids == [0, 1, 2]
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 1)])

        await service.unload(name)
        assert psink.closed == [7]
        assert csink.closed == [3]
        assert consumer.closed
        assert producer.closed
        assert service.loaded_topic(name) is None
        with pytest.raises(ServiceNotReadyError, match="unloaded"):
            await topic.subscribe(
                SubscribeRequest(
                    subscription="x",
                    sub_type=SubType.SHARED,
                    consumer_id=1,
                    consumer_name="c",
                    durable=True,
                    initial_position=InitialPosition.LATEST,
                ),
                FakeConsumerSink(),
            )

        # The clients come back (§14.5): the producer keeps its name, the ids keep going.
        reloaded = await service.get_topic(name)
        assert reloaded is not topic
        assert isinstance(reloaded, Topic)
        assert reloaded.subscriptions() == ["sub"]
        p2 = await add_producer(reloaded, 7, producer_name=producer.producer_name, epoch=1)
        assert p2.producer_name == producer.producer_name
        # As Pulsar's reopened managed ledger: entry 0 of a fresh ledger.
        new_ledger, entry = await publish(reloaded, p2)
        assert (entry, new_ledger > ledger) == (0, True)
        again = FakeConsumerSink()
        c2 = await subscribe(reloaded, again, consumer_id=3, sub_type=SubType.FAILOVER)
        c2.flow(100)
        await settle()
        assert [(m.ledger_id, m.entry_id) for m in again.messages] == [
            (ledger, 0),
            (ledger, 2),
            (ledger, 3),
            (new_ledger, 0),
        ]
        assert [m.redelivery_count for m in again.messages] == [0, 0, 0, 0]
        assert reloaded.last_message_id() == (new_ledger, 0, -1)


async def test_unload_is_not_a_redelivery_and_resets_the_counts() -> None:
    # Pulsar keeps redelivery counts in the dispatcher: a reloaded topic starts them from 0, so
    # unloads cannot push a message to its dead-letter topic.
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        producer = await add_producer(topic)
        await publish(topic, producer)
        for round_ in range(3):
            sink = FakeConsumerSink()
            consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
            consumer.flow(2)
            await settle()
            if round_ == 0:
                consumer.redeliver(None)  # counted: the consumer asked
                await settle()
                assert [m.redelivery_count for m in sink.messages] == [0, 1]
            else:
                assert [m.redelivery_count for m in sink.messages] == [0]
            await service.unload(name)
            topic = await service.get_topic(name)


async def test_exclusive_producer_keeps_its_topic_epoch_across_unload() -> None:
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        p = await add_producer(topic, 1, access_mode=AccessMode.EXCLUSIVE)
        await service.unload(name)
        topic = await service.get_topic(name)
        again = await add_producer(
            topic,
            1,
            producer_name=p.producer_name,
            access_mode=AccessMode.EXCLUSIVE,
            topic_epoch=p.topic_epoch,
            epoch=1,
        )
        assert again.topic_epoch == p.topic_epoch


async def test_unloading_a_partitioned_topic_unloads_its_partitions() -> None:
    async with open_service() as service:
        parent = topic_name("pt")
        await service.create_partitioned_topic(parent, 2)
        sinks = []
        for i in range(2):
            t = await service.get_topic(parent.partition(i))
            sinks.append(FakeConsumerSink())
            await subscribe(t, sinks[-1], consumer_id=i)
        await service.unload(parent)
        assert [s.closed for s in sinks] == [[0], [1]]
        assert service.statistics().topics_count == 0


async def test_reader_subscriptions_do_not_survive_unload() -> None:
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        await subscribe(topic, FakeConsumerSink(), subscription="r", durable=False)
        await service.unload(name)
        assert (await service.get_topic(name)).subscriptions() == []


async def test_sends_of_closed_producers_are_refused_and_not_stored() -> None:
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        producer = await add_producer(topic)
        await publish(topic, producer)
        await service.unload(name)
        with pytest.raises(ServiceNotReadyError, match="SEND dropped"):
            await publish(topic, producer)
        reloaded = await service.get_topic(name)
        assert reloaded.last_message_id()[1] == 0
        np_topic = await service.get_topic(topic_name("np", "non-persistent"))
        np_producer = await add_producer(np_topic)
        await np_topic.remove_producer(np_producer)
        with pytest.raises(ServiceNotReadyError, match="SEND dropped"):
            await publish(np_topic, np_producer)


async def test_a_load_overtaken_by_its_bundles_hand_over_registers_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ``loading`` rule 5 (a durable backend): the state a load opened while the bundle started
    # leaving is dropped.
    gate = anyio.Event()
    opened = ManagedLedger.open

    async def slow_open(*args: Any, **kwargs: Any) -> ManagedLedger | None:
        await gate.wait()
        return await opened(*args, **kwargs)

    monkeypatch.setattr(ManagedLedger, "open", slow_open)
    hand_overs = {"count": 0}
    clock = FakeClock()
    async with (
        open_stub_server(clock=clock) as stub,
        stub.open_local_client() as bookie,
        MemoryMetadataStore() as metadata,
    ):
        service = TopicService(
            config=TopicSettings(),
            clock=clock,
            ledgers=BookieBackend(bookie),
            namespaces=KNOWN_NAMESPACES.__contains__,
            metadata=metadata,
            hand_overs=lambda name: hand_overs["count"],
        )
        async with service.running():
            name = topic_name()
            failures: list[Exception] = []

            async def load() -> None:
                try:
                    await service.get_topic(name)
                except ServiceNotReadyError as exc:
                    failures.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(load)
                await anyio.wait_all_tasks_blocked()
                hand_overs["count"] += 1  # the bundle starts leaving while the state opens
                await service.close_topics(lambda n: n == name, graceful=True)
                gate.set()
            assert len(failures) == 1
            assert service.loaded_topic(name) is None
            # Loaded afresh once the bundle is back.
            assert (await service.get_topic(name)).name == name


async def test_closing_for_a_transfer_holds_the_clients_until_their_destination_is_known() -> None:
    # sinks.HeldCloses (ownership.unloading rule 5): the topic closes at once, its producers
    # stop publishing (held), and nobody hears of it until send(), which names where to go.
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        psink = FakeProducerSink()
        producer = await add_producer(topic, 7, sink=psink)
        csink = FakeConsumerSink()
        consumer = await subscribe(topic, csink, consumer_id=3)
        held = HeldCloses()
        assert await service.close_topics(lambda n: n == name, graceful=True, held=held) == 1
        assert producer.closed
        assert consumer.closed
        assert service.loaded_topic(name) is None
        assert (psink.held, psink.closed, csink.closed) == ([7], [], [])
        assert held
        assert held.topics == [name]
        there = AssignedBroker("pulsar://elsewhere:6650", "pulsar+ssl://elsewhere:6651")
        held.send(there)
        assert (psink.closed, psink.assigned) == ([7], [there])
        assert (csink.closed, csink.assigned) == ([3], [there])
        held.send(None)  # told once
        assert (psink.closed, csink.closed) == ([7], [3])
