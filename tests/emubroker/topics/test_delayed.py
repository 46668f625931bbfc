from __future__ import annotations

import pytest

from protocol.clock import FakeClock
from protocol.commands import SubType
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


def _now_ms(clock: FakeClock) -> int:
    return clock.wall_ns() // 1_000_000


async def test_shared_holds_delayed_entries_until_the_clock_passes() -> None:
    clock = FakeClock()
    async with open_service(clock) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
        consumer.flow(10)
        await publish(topic, producer, b"late", deliver_at_time=_now_ms(clock) + 5_000)
        await publish(topic, producer, b"later", deliver_at_time=_now_ms(clock) + 9_000)
        await publish(topic, producer, b"now")
        await settle()
        assert sink.entry_ids == [2]
        await clock.advance(4.9)
        assert sink.entry_ids == [2]
        await clock.advance(0.2)
        assert sink.entry_ids == [2, 0]
        assert sink.messages[-1].redelivery_count == 0
        await clock.advance(4.0)
        assert sink.entry_ids == [2, 0, 1]


async def test_delay_is_ignored_by_exclusive_subscriptions() -> None:
    clock = FakeClock()
    async with open_service(clock) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(10)
        await publish(topic, producer, deliver_at_time=_now_ms(clock) + 60_000)
        await settle()
        assert sink.entry_ids == [0]


async def test_delayed_entries_wait_for_permits_after_they_are_due() -> None:
    clock = FakeClock()
    async with open_service(clock) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.KEY_SHARED)
        consumer.flow(1)
        await publish(topic, producer, key="k", deliver_at_time=_now_ms(clock) + 1_000)
        await publish(topic, producer, key="k")
        await settle()
        assert sink.entry_ids == [1]
        await clock.advance(2)
        assert sink.entry_ids == [1]  # due, but no permits left
        consumer.flow(1)
        await settle()
        assert sink.entry_ids == [1, 0]
