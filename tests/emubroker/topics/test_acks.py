from __future__ import annotations

from typing import Any

import pytest

from emubroker.topics import ProducerHandle, TopicService
from protocol.batch import ack_set_of, indexes_of
from protocol.commands import AckType, SubType
from tests.emubroker.topics.helpers import (
    FakeConsumerSink,
    add_producer,
    mid,
    open_service,
    publish,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


async def _setup(
    service: TopicService, n: int, *, sub_type: SubType = SubType.EXCLUSIVE, **kw: Any
) -> tuple[Any, ProducerHandle, list[tuple[int, int]], FakeConsumerSink, Any]:
    topic = await service.get_topic(topic_name())
    producer = await add_producer(topic)
    ids = [await publish(topic, producer, b"%d" % i, **kw) for i in range(n)]
    sink = FakeConsumerSink()
    consumer = await subscribe(topic, sink, sub_type=sub_type)
    consumer.flow(1000)
    await settle()
    return topic, producer, ids, sink, consumer


async def test_individual_acks_move_mark_delete_when_contiguous() -> None:
    async with open_service() as service:
        topic, _, ids, _sink, consumer = await _setup(service, 4)
        ledger = ids[0][0]
        assert consumer.last_message_id() == ((ledger, 3, -1), (ledger, -1))
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 1), mid(ledger, 2)])
        assert consumer.last_message_id()[1] == (ledger, -1)
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 0)])
        assert consumer.last_message_id()[1] == (ledger, 2)
        stats = topic.stats()
        assert stats.subscriptions[0].backlog == 1
        # Pulsar tracks unacked messages only where acks are individual (Shared, Key_Shared).
        assert stats.subscriptions[0].unacked == 0
        assert stats.subscriptions[0].consumer_stats[0].unacked == 0


@pytest.mark.parametrize("sub_type", [SubType.SHARED, SubType.KEY_SHARED])
async def test_unacked_messages_are_counted_per_consumer_and_summed(sub_type: SubType) -> None:
    async with open_service() as service:
        topic, producer, ids, _sink, consumer = await _setup(service, 3, sub_type=sub_type)
        batch = await publish(topic, producer, b"b", batch=5)
        await settle()
        ledger = ids[0][0]
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 1)])
        stats = topic.stats().subscriptions[0]
        # Two single messages and a batch of five: messages, not entries.
        assert stats.consumer_stats[0].unacked == 7
        assert stats.unacked == 7
        consumer.ack(AckType.INDIVIDUAL, [mid(*batch)])
        assert topic.stats().subscriptions[0].unacked == 2


async def test_cumulative_ack_and_reader_style_odd_ids_are_safe() -> None:
    async with open_service() as service:
        _topic, _, ids, sink, consumer = await _setup(service, 4)
        ledger = ids[0][0]
        consumer.ack(AckType.CUMULATIVE, [mid(ledger, -1)])  # entry -1: a no-op
        consumer.ack(AckType.CUMULATIVE, [mid(ledger + 100, 0)])  # unknown ledger: a no-op
        assert consumer.last_message_id()[1] == (ledger, -1)
        consumer.ack(AckType.CUMULATIVE, [mid(ledger, 2)])
        assert consumer.last_message_id()[1] == (ledger, 2)
        consumer.redeliver(None)
        await settle()
        # Only entry 3 was still unacked.
        assert [m.entry_id for m in sink.messages[4:]] == [3]


async def test_batch_index_acks_redeliver_only_the_rest() -> None:
    async with open_service(batch_index_acks=True) as service:
        _, _, ids, sink, consumer = await _setup(service, 1, batch=4)
        ledger = ids[0][0]
        # Client acks messages 0 and 2: the ack_set is the bitmap of those NOT acked.
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 0, ack_set_of([1, 3], 4))])
        assert consumer.last_message_id()[1] == (ledger, -1)
        consumer.redeliver(None)
        await settle()
        again = sink.messages[-1]
        assert again.redelivery_count == 0  # Exclusive: Pulsar does not count redeliveries
        assert indexes_of(again.ack_set, 4) == {1, 3}
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 0, ack_set_of([], 4))])
        assert consumer.last_message_id()[1] == (ledger, 0)


async def test_cumulative_ack_inside_a_batch_acks_the_entry_partly() -> None:
    async with open_service(batch_index_acks=True) as service:
        _, _, ids, sink, consumer = await _setup(service, 2, batch=3)
        ledger = ids[0][0]
        consumer.ack(AckType.CUMULATIVE, [mid(ledger, 1, ack_set_of([2], 3))])
        assert consumer.last_message_id()[1] == (ledger, 0)
        consumer.redeliver(None)
        await settle()
        assert [(m.entry_id, set(indexes_of(m.ack_set, 3))) for m in sink.messages[2:]] == [
            (1, {2})
        ]


async def test_without_batch_index_acks_a_partly_acked_batch_comes_back_whole() -> None:
    # acknowledgmentAtBatchIndexLevelEnabled=false (Pulsar 4.0's default): the cursor keeps no
    # batch masks, so an individual ack with an ack_set changes nothing, and a cumulative one
    # inside a batch covers the entries before it only.
    async with open_service() as service:
        _, _, ids, sink, consumer = await _setup(service, 2, batch=4)
        ledger = ids[0][0]
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 0, ack_set_of([1, 3], 4))])
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 1, ack_set_of([], 4))])
        consumer.ack(AckType.CUMULATIVE, [mid(ledger, 1, ack_set_of([3], 4))])
        assert consumer.last_message_id()[1] == (ledger, 0)
        consumer.redeliver(None)
        await settle()
        assert [(m.entry_id, m.ack_set) for m in sink.messages[2:]] == [(1, ())]
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 1)])  # the whole entry, no ack_set
        assert consumer.last_message_id()[1] == (ledger, 1)


async def test_three_negative_acks_give_redelivery_count_three() -> None:
    async with open_service() as service:
        _, _, ids, sink, consumer = await _setup(service, 1, sub_type=SubType.SHARED)
        for expected in (1, 2):
            consumer.redeliver(None)  # everything unacked, as the client's redeliver() asks
            await settle()
            assert sink.messages[-1].redelivery_count == expected
        consumer.redeliver([mid(*ids[0])])  # by id, as a Shared consumer's negative ack asks
        await settle()
        assert sink.messages[-1].redelivery_count == 3
        assert len(sink.messages) == 4


@pytest.mark.parametrize("sub_type", [SubType.EXCLUSIVE, SubType.FAILOVER])
async def test_single_active_subscriptions_do_not_count_redeliveries(sub_type: SubType) -> None:
    # Pulsar's single-active-consumer dispatcher has its redelivery tracker disabled.
    async with open_service() as service:
        _, _, ids, sink, consumer = await _setup(service, 1, sub_type=sub_type)
        consumer.redeliver(None)
        await settle()
        consumer.redeliver([mid(*ids[0])])
        await settle()
        assert [m.redelivery_count for m in sink.messages] == [0, 0, 0]


async def test_redelivery_of_specific_ids_goes_first_and_in_order() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        for i in range(4):
            await publish(topic, producer, b"%d" % i)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
        consumer.flow(3)
        await settle()
        ledger = sink.messages[0].ledger_id
        assert sink.entry_ids == [0, 1, 2]
        consumer.redeliver([mid(ledger, 2), mid(ledger, 0), mid(ledger, 9)])
        consumer.flow(3)
        await settle()
        assert sink.entry_ids == [0, 1, 2, 0, 2, 3]
        assert [m.redelivery_count for m in sink.messages[3:]] == [1, 1, 0]


async def test_closed_consumers_unacked_go_to_the_other_consumer() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        first, second = FakeConsumerSink(), FakeConsumerSink()
        c1 = await subscribe(topic, first, consumer_id=1, sub_type=SubType.SHARED)
        c2 = await subscribe(topic, second, consumer_id=2, sub_type=SubType.SHARED)
        c1.flow(10)
        for i in range(3):
            await publish(topic, producer, b"%d" % i)
        await settle()
        assert first.entry_ids == [0, 1, 2]
        c1.ack(AckType.INDIVIDUAL, [mid(first.messages[1].ledger_id, 1)])
        await c1.close()
        c2.flow(10)
        await settle()
        assert second.entry_ids == [0, 2]
        # Replayed because their consumer left, not because anyone asked: not a redelivery.
        assert all(m.redelivery_count == 0 for m in second.messages)
        c1.flow(5)  # a closed handle ignores everything
        c1.ack(AckType.CUMULATIVE, [mid(first.messages[1].ledger_id, 2)])
        assert topic.stats().subscriptions[0].backlog == 2
