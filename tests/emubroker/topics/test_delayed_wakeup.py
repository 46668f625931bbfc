"""Delayed delivery when the dispatcher is idle before the delayed entry is published.

The official client's consumer sends FLOW long before a producer publishes, so the dispatcher is
already asleep when a delayed entry arrives; it must still wake at the entry's delivery time
(issue 3: delayed delivery on Shared and Key_Shared subscriptions).
"""

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


@pytest.mark.parametrize("sub_type", [SubType.SHARED, SubType.KEY_SHARED])
async def test_an_idle_dispatcher_wakes_for_a_delayed_entry(sub_type: SubType) -> None:
    clock = FakeClock()
    async with open_service(clock) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=sub_type)
        consumer.flow(10)
        await settle()  # the dispatcher ran its round and sleeps: nothing to deliver
        now_ms = clock.wall_ns() // 1_000_000
        await publish(topic, producer, b"late", key="k", deliver_at_time=now_ms + 2_000)
        await settle()
        assert sink.entry_ids == []
        await clock.advance(1.9)
        assert sink.entry_ids == []
        await clock.advance(0.2)
        assert sink.entry_ids == [0]
