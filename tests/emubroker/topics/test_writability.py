"""Persistent delivery waits while a consumer's connection is unwritable (nothing is dropped).

A consumer whose session has more than its high water mark queued gets nothing more until the
session drains and calls ``resume_delivery``; the entries stay in the ledger meanwhile, so a
consumer with a million permits that stops reading its socket costs its session at most the
high water mark (docs/reliability.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from protocol.commands import KeySharedMeta, KeySharedMode, SubType
from tests.emubroker.topics.helpers import (
    FakeConsumerSink,
    add_producer,
    open_service,
    publish,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


@dataclass
class FillingSink(FakeConsumerSink):
    """Turns unwritable once it holds ``room`` messages, as a session past its high water mark."""

    room: int = 3

    def send_message(self, *args: object) -> None:
        super().send_message(*args)  # type: ignore[arg-type]  # the ConsumerSink signature
        if len(self.messages) >= self.room:
            self.writable = False


async def test_an_unwritable_consumer_gets_nothing_until_it_drains() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink(writable=False)
        consumer = await subscribe(topic, sink)
        consumer.flow(100)
        for i in range(5):
            await publish(topic, producer, b"m%d" % i)
        await settle()
        assert sink.messages == []
        sink.writable = True
        consumer.resume_delivery()
        await settle()
        assert sink.entry_ids == [0, 1, 2, 3, 4]


async def test_delivery_stops_where_the_connection_turned_unwritable() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        for i in range(10):
            await publish(topic, producer, b"m%d" % i)
        sink = FillingSink(room=3)
        consumer = await subscribe(topic, sink)
        consumer.flow(1_000_000)  # permits are not what stops it
        await settle()
        assert sink.entry_ids == [0, 1, 2]
        sink.room = 100
        sink.writable = True
        consumer.resume_delivery()
        await settle()
        assert sink.entry_ids == list(range(10))  # in order, nothing lost or repeated


async def test_shared_subscription_skips_the_unwritable_consumer() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        stuck, reading = FakeConsumerSink(writable=False), FakeConsumerSink()
        first = await subscribe(topic, stuck, consumer_id=1, sub_type=SubType.SHARED)
        second = await subscribe(topic, reading, consumer_id=2, sub_type=SubType.SHARED)
        first.flow(100)
        second.flow(100)
        for i in range(6):
            await publish(topic, producer, b"m%d" % i)
        await settle()
        assert stuck.messages == []
        assert reading.entry_ids == list(range(6))


async def test_key_shared_parks_the_keys_of_an_unwritable_consumer() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        meta = KeySharedMeta(key_shared_mode=KeySharedMode.AUTO_SPLIT)
        sinks = [FakeConsumerSink(), FakeConsumerSink()]
        consumers = [
            await subscribe(
                topic,
                sink,
                consumer_id=i,
                sub_type=SubType.KEY_SHARED,
                key_shared_meta=meta,
            )
            for i, sink in enumerate(sinks)
        ]
        for consumer in consumers:
            consumer.flow(1000)
        sinks[0].writable = False
        for i in range(40):
            await publish(topic, producer, b"m%d" % i, key=f"k{i}")
        await settle()
        assert sinks[0].messages == []
        delivered = sinks[1].entry_ids
        assert 0 < len(delivered) < 40  # the other consumer's keys flow meanwhile
        sinks[0].writable = True
        consumers[0].resume_delivery()
        await settle()
        assert sorted(sinks[0].entry_ids + sinks[1].entry_ids) == list(range(40))
