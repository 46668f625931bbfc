"""Topic termination (Pulsar's ``PersistentTopic.terminate``): no message is taken any more.

Producers are disconnected and refused (TopicTerminated), consumers hear REACHED_END_OF_TOPIC
once they have acknowledged everything (at termination, after an ack, on a FLOW), and the state
outlives an unload and, over the bookie stub with a metadata store, a new owner.
"""

from __future__ import annotations

import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.storage import BookieBackend
from emubroker.topics import TopicService
from emubroker.topics.settings import TopicSettings
from protocol.clock import FakeClock
from protocol.commands import AckType, InitialPosition, SubType
from protocol.errors import TopicTerminatedError
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


async def test_terminate_answers_the_last_position_and_refuses_producers() -> None:
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        psink = FakeProducerSink()
        producer = await add_producer(topic, 7, sink=psink)
        last = [await publish(topic, producer) for _ in range(3)][-1]
        assert await topic.terminate() == last
        assert psink.closed == [7]  # disconnected: its client's PRODUCER is refused next
        assert producer.closed
        with pytest.raises(TopicTerminatedError, match="Topic was already terminated"):
            await add_producer(topic, 8)
        assert await topic.terminate() == last  # again: the same position
        assert topic.terminated


async def test_an_empty_topic_terminates_at_entry_minus_one() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        ledger_id, entry_id = await topic.terminate()
        assert (ledger_id, entry_id) == (topic.ledger.current_ledger_id, -1)


async def test_consumers_hear_the_end_once_everything_is_acknowledged() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        ids = [await publish(topic, producer) for _ in range(2)]
        done, behind = FakeConsumerSink(), FakeConsumerSink()
        caught_up = await subscribe(topic, done, subscription="done", consumer_id=1)
        lagging = await subscribe(topic, behind, subscription="behind", consumer_id=2)
        caught_up.flow(10)
        lagging.flow(10)
        await settle()
        caught_up.ack(AckType.CUMULATIVE, [mid(*ids[1])])
        await topic.terminate()
        assert done.ended == [1]  # at termination: nothing left to acknowledge
        assert behind.ended == []
        lagging.ack(AckType.INDIVIDUAL, [mid(*ids[0])])
        assert behind.ended == []
        lagging.ack(AckType.INDIVIDUAL, [mid(*ids[1])])
        assert behind.ended == [2]  # after the ack that emptied its backlog


async def test_a_new_subscription_of_a_terminated_topic_hears_the_end_on_flow() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        await publish(topic, producer)
        await topic.terminate()
        sink = FakeConsumerSink()
        consumer = await subscribe(
            topic, sink, sub_type=SubType.SHARED, initial_position=InitialPosition.LATEST
        )
        assert sink.ended == []
        consumer.flow(10)
        assert sink.ended == [1]


async def test_termination_outlives_an_unload() -> None:
    async with open_service() as service:
        name = topic_name()
        topic = await service.get_topic(name)
        producer = await add_producer(topic)
        last = await publish(topic, producer)
        await topic.terminate()
        await service.unload(name)
        again = await service.get_topic(name)
        assert again.terminated
        with pytest.raises(TopicTerminatedError):
            await add_producer(again)
        assert await again.terminate() == last


async def test_termination_outlives_a_new_owner_over_the_bookie() -> None:
    clock = FakeClock()
    async with (
        open_stub_server(clock=clock) as stub,
        stub.open_local_client() as bookie,
        MemoryMetadataStore() as metadata,
    ):

        def service() -> TopicService:
            return TopicService(
                config=TopicSettings(),
                clock=clock,
                ledgers=BookieBackend(bookie),
                namespaces=KNOWN_NAMESPACES.__contains__,
                metadata=metadata,
            )

        name = topic_name()
        first = service()
        async with first.running():
            topic = await first.get_topic(name)
            producer = await add_producer(topic)
            last = await publish(topic, producer)
            assert await topic.terminate() == last
        second = service()  # another broker opening the stored topic: recovered, terminated
        async with second.running():
            topic = await second.get_topic(name)
            assert topic.terminated
            assert topic.ledger.ledger_ids == (last[0],)  # no new ledger to write to
            assert topic.ledger.last_position() == last
            with pytest.raises(TopicTerminatedError):
                await add_producer(topic)
