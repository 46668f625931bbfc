from __future__ import annotations

from typing import Any

import pytest

from emubroker.topics import ProducerHandle, TopicService
from protocol.commands import AckType, InitialPosition, MessageIdData, SubType
from protocol.errors import MetadataError, NotAllowedError
from protocol.ids import EARLIEST, LATEST
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


async def _topic_with(
    service: TopicService, n: int
) -> tuple[Any, ProducerHandle, list[tuple[int, int]]]:
    topic = await service.get_topic(topic_name())
    producer = await add_producer(topic)
    ids = [await publish(topic, producer, publish_time=1000 + 10 * i) for i in range(n)]
    return topic, producer, ids


async def test_durable_subscription_starts_at_latest_or_earliest() -> None:
    async with open_service() as service:
        topic, producer, _ = await _topic_with(service, 2)
        late, early = FakeConsumerSink(), FakeConsumerSink()
        c1 = await subscribe(
            topic, late, subscription="late", initial_position=InitialPosition.LATEST
        )
        c2 = await subscribe(topic, early, subscription="early")
        c1.flow(10)
        c2.flow(10)
        await publish(topic, producer)
        await settle()
        assert late.entry_ids == [2]
        assert early.entry_ids == [0, 1, 2]
        assert topic.subscriptions() == ["early", "late"]


async def test_existing_durable_subscription_resumes_at_first_unacked() -> None:
    async with open_service() as service:
        topic, _, ids = await _topic_with(service, 4)
        ledger = ids[0][0]
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(10)
        await settle()
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 0), mid(ledger, 2)])
        await consumer.close()
        again = FakeConsumerSink()
        # The initial position of an existing subscription is ignored.
        c2 = await subscribe(topic, again, initial_position=InitialPosition.LATEST)
        c2.flow(10)
        await settle()
        assert again.entry_ids == [1, 3]


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (EARLIEST.to_data(), [0, 1, 2, 3, 4]),
        (LATEST.to_data(), [4]),
        ("inside", [2, 3, 4]),
    ],
)
async def test_reader_start_positions(start: MessageIdData | str, expected: list[int]) -> None:
    async with open_service() as service:
        topic, producer, ids = await _topic_with(service, 4)
        if isinstance(start, str):  # an id inside the topic, known only once it exists
            start = MessageIdData(ledger_id=ids[2][0], entry_id=2, batch_index=1)
        sink = FakeConsumerSink()
        reader = await subscribe(
            topic,
            sink,
            subscription="reader-1",
            durable=False,
            start_message_id=start,
            initial_position=InitialPosition.LATEST,
        )
        reader.flow(10)
        await publish(topic, producer)
        await settle()
        assert sink.entry_ids == expected


async def test_reader_mark_delete_and_removal_with_its_last_consumer() -> None:
    async with open_service() as service:
        topic, _, ids = await _topic_with(service, 3)
        ledger = ids[0][0]
        sink = FakeConsumerSink()
        reader = await subscribe(
            topic, sink, subscription="r", durable=False, start_message_id=LATEST.to_data()
        )
        # A reader created at latest: mark-delete is the last entry.
        assert reader.last_message_id() == ((ledger, 2, -1), (ledger, 2))
        early = await subscribe(
            topic,
            FakeConsumerSink(),
            subscription="r2",
            durable=False,
            start_message_id=EARLIEST.to_data(),
        )
        assert early.last_message_id()[1] == (ledger, -1)
        with pytest.raises(NotAllowedError, match="non-durable"):
            await subscribe(topic, FakeConsumerSink(), subscription="r", consumer_id=9)
        await reader.close()
        assert "r" not in topic.subscriptions()


async def test_seek_by_id_resets_cursor_and_closes_every_consumer() -> None:
    async with open_service() as service:
        topic, _, ids = await _topic_with(service, 4)
        ledger = ids[0][0]
        s1, s2 = FakeConsumerSink(), FakeConsumerSink()
        c1 = await subscribe(topic, s1, consumer_id=1, sub_type=SubType.SHARED)
        c2 = await subscribe(topic, s2, consumer_id=2, sub_type=SubType.SHARED)
        c1.flow(10)
        await settle()
        c1.ack(AckType.INDIVIDUAL, [mid(ledger, i) for i in range(4)])
        await c1.seek(message_id=mid(ledger, 1))
        assert (s1.closed, s2.closed) == ([1], [2])
        assert c1.closed
        assert c2.closed
        again = FakeConsumerSink()
        c3 = await subscribe(topic, again, consumer_id=1, sub_type=SubType.SHARED)
        assert c3.last_message_id()[1] == (ledger, 0)
        c3.flow(10)
        await settle()
        assert again.entry_ids == [1, 2, 3]  # acks after the seek position were forgotten
        assert all(m.redelivery_count == 0 for m in again.messages)


async def test_seek_by_time_finds_first_entry_at_or_after() -> None:
    async with open_service() as service:
        topic, _, _ = await _topic_with(service, 4)  # publish times 1000, 1010, 1020, 1030
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        await consumer.seek(publish_time=1015)
        assert sink.closed == [1]
        again = FakeConsumerSink()
        c2 = await subscribe(topic, again)
        c2.flow(10)
        await settle()
        assert again.entry_ids == [2, 3]
        await c2.seek(publish_time=1020)  # a message's own publish time returns it
        c3 = await subscribe(topic, third := FakeConsumerSink())
        c3.flow(10)
        await settle()
        assert third.entry_ids == [2, 3]


async def test_seek_keeps_a_reader_subscription_for_the_resubscribe() -> None:
    async with open_service() as service:
        topic, _, _ids = await _topic_with(service, 3)
        sink = FakeConsumerSink()
        reader = await subscribe(
            topic, sink, subscription="r", durable=False, start_message_id=EARLIEST.to_data()
        )
        await reader.seek(publish_time=1010)
        assert "r" in topic.subscriptions()
        # The client comes back with start id "earliest"; the reset cursor wins.
        again = FakeConsumerSink()
        r2 = await subscribe(
            topic, again, subscription="r", durable=False, start_message_id=EARLIEST.to_data()
        )
        r2.flow(10)
        await settle()
        assert again.entry_ids == [1, 2]
        await reader.close()  # a closed handle: nothing happens
        assert "r" in topic.subscriptions()


async def test_seek_to_latest_and_earliest() -> None:
    async with open_service() as service:
        topic, _, ids = await _topic_with(service, 2)
        consumer = await subscribe(topic, FakeConsumerSink())
        await consumer.seek(message_id=LATEST.to_data())
        c2 = await subscribe(topic, FakeConsumerSink())
        assert c2.last_message_id()[1] == (ids[0][0], 1)
        await c2.seek(message_id=EARLIEST.to_data())
        c3 = await subscribe(topic, FakeConsumerSink())
        assert c3.last_message_id()[1] == (ids[0][0], -1)
        with pytest.raises(NotAllowedError):
            await c2.seek(message_id=EARLIEST.to_data())  # closed by the seek


async def test_unsubscribe_deletes_the_subscription_unless_others_are_attached() -> None:
    async with open_service() as service:
        topic, _, ids = await _topic_with(service, 2)
        c1 = await subscribe(topic, FakeConsumerSink(), consumer_id=1, sub_type=SubType.SHARED)
        c2 = await subscribe(topic, FakeConsumerSink(), consumer_id=2, sub_type=SubType.SHARED)
        c1.flow(10)
        await settle()
        c1.ack(AckType.INDIVIDUAL, [mid(ids[0][0], 0)])
        with pytest.raises(MetadataError, match="shared consumer attempting to unsubscribe"):
            await c1.unsubscribe()
        await c2.close()
        await c1.unsubscribe()
        assert topic.subscriptions() == []
        # A new subscription of that name starts from scratch.
        sink = FakeConsumerSink()
        c3 = await subscribe(topic, sink)
        c3.flow(10)
        await settle()
        assert sink.entry_ids == [0, 1]
