"""When a throttled dispatcher reads again (``dispatcher``, "Throttled reads"), on a FakeClock.

Pulsar schedules one retry ``MESSAGE_RATE_BACKOFF_MS`` after a refused read and never moves it;
acks start no read, a FLOW asks the limiters again without moving the retry. So a backlog drains
at the limit whatever the consumers do between retries: ``rate`` messages at the start (the
limiters begin full) and ``rate`` more at each retry, ``rate * (1 + floor(t / backoff))`` by time
``t`` (these tests use ``helpers.BACKOFF``). Every refused read counts one throttle event: one per
retry, plus one per FLOW that arrives while a retry is pending.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from emubroker.ratelimit.quotas import CLASSIC_FACTORY
from protocol.clock import FakeClock
from protocol.commands import AckType, SubType
from tests.emubroker.topics.helpers import (
    BACKOFF,
    FakeConsumerSink,
    PacedConsumer,
    backlog,
    mid,
    settle,
    subscribe,
    throttled,
    topic_name,
)

pytestmark = pytest.mark.anyio

FACTORIES = pytest.mark.parametrize(
    "factory", [CLASSIC_FACTORY, None], ids=["classic", "token-bucket"]
)
RUN = 5.5  # seconds of virtual time: the start and 5 retries


def limiter_config(factory: str | None, **rates: Any) -> dict[str, Any]:
    if factory is not None:
        rates["dispatchRateLimiterFactoryClassName"] = factory
    return rates


def periods(until: float) -> int:
    """Reads the limiters allow by ``until``: the first one and one per retry."""
    return 1 + math.floor(until / BACKOFF)


async def start_paced(
    tg: Any,
    topic: Any,
    clock: FakeClock,
    paces: tuple[float, ...],
    sub_type: SubType,
    subscription: str = "sub",
    ack_group_time: float = 0.1,
) -> list[PacedConsumer]:
    """Subscribe one paced consumer per pace; all grant their queue before the first round."""
    paced = []
    for pace in paces:
        client = PacedConsumer(clock, per_message=pace, ack_group_time=ack_group_time)
        handle = await subscribe(
            topic, client, subscription=subscription, sub_type=sub_type, consumer_id=id(client)
        )
        handle.flow(client.receiver_queue)
        paced.append((client, handle))
    for client, handle in paced:
        tg.start_soon(client.run, handle, False)
    return [client for client, _ in paced]


def throttle_events(throttling: Any, topic: Any, subscription: str) -> tuple[int, ...]:
    stats = throttling.subscription_throttle(topic.name, subscription).stats()
    return (
        stats.dispatchThrottledMsgEventsByBrokerLimit,
        stats.dispatchThrottledMsgEventsByTopicLimit,
        stats.dispatchThrottledMsgEventsBySubscriptionLimit,
    )


@FACTORIES
@pytest.mark.parametrize(
    ("sub_type", "paces", "ack_group_time"),
    [
        (SubType.EXCLUSIVE, (0.0,), 0.1),
        (SubType.EXCLUSIVE, (0.001,), 0.0),
        (SubType.EXCLUSIVE, (0.004,), 0.1),
        (SubType.SHARED, (0.0, 0.004), 0.1),
        (SubType.SHARED, (0.001, 0.004), 0.0),
    ],
)
async def test_a_subscription_limit_delivers_the_limit_however_fast_consumers_ack(
    fake_clock: FakeClock,
    factory: str | None,
    sub_type: SubType,
    paces: tuple[float, ...],
    ack_group_time: float,
) -> None:
    rate = 200
    config = limiter_config(factory, dispatchThrottlingRatePerSubscriptionInMsg=rate)
    async with throttled(fake_clock, **config) as (service, throttling):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 3000)
        async with anyio.create_task_group() as tg:
            clients = await start_paced(
                tg, topic, fake_clock, paces, sub_type, ack_group_time=ack_group_time
            )
            await fake_clock.advance(RUN)
            tg.cancel_scope.cancel()
        times = sorted(t for c in clients for t in c.times)
        assert len(times) == rate * periods(RUN)
        # Everything goes out at the start and at each retry, exactly BACKOFF apart.
        bursts = sorted(set(times))
        assert bursts == pytest.approx([k * BACKOFF for k in range(periods(RUN))])
        flows = sum(c.flows for c in clients)
        assert throttle_events(throttling, topic, "sub") == (0, 0, periods(RUN) + flows)


@FACTORIES
@pytest.mark.parametrize("sub_type", [SubType.EXCLUSIVE, SubType.SHARED])
async def test_a_topic_limit_shared_by_subscriptions_delivers_the_limit_in_all(
    fake_clock: FakeClock, factory: str | None, sub_type: SubType
) -> None:
    rate = 100
    config = limiter_config(factory, dispatchThrottlingRatePerTopicInMsg=rate)
    async with throttled(fake_clock, **config) as (service, throttling):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 2000)
        async with anyio.create_task_group() as tg:
            fast = await start_paced(tg, topic, fake_clock, (0.001,), sub_type, subscription="fast")
            slow = await start_paced(tg, topic, fake_clock, (0.004,), sub_type, subscription="slow")
            await fake_clock.advance(RUN)
            tg.cancel_scope.cancel()
        clients = fast + slow
        assert sum(len(c.times) for c in clients) == rate * periods(RUN)
        # Both subscriptions are refused once per period; FLOWs meet refusals too.
        events = [throttle_events(throttling, topic, s) for s in ("fast", "slow")]
        flows = sum(c.flows for c in clients)
        assert [(broker, sub) for broker, _, sub in events] == [(0, 0), (0, 0)]
        assert sum(topic_events for _, topic_events, _ in events) == 2 * periods(RUN) + flows


async def drain(fake_clock: FakeClock, clients: list[PacedConsumer], total: int) -> float:
    """Advance period by period until ``total`` messages were delivered; the last one's time."""
    for _ in range(100):
        if sum(len(c.times) for c in clients) >= total:
            break
        await fake_clock.advance(BACKOFF)
    await fake_clock.advance(1.0)  # time to acknowledge the last ones
    return max(t for c in clients for t in c.times)


@FACTORIES
@pytest.mark.parametrize(
    ("sub_type", "paces"),
    [
        (SubType.EXCLUSIVE, (0.0,)),
        (SubType.EXCLUSIVE, (0.004,)),
        (SubType.SHARED, (0.0, 0.004)),
        (SubType.FAILOVER, (0.002,)),
    ],
)
async def test_throttled_subscriptions_drain_at_the_limit(
    fake_clock: FakeClock, factory: str | None, sub_type: SubType, paces: tuple[float, ...]
) -> None:
    rate, count = 200, 1000
    config = limiter_config(factory, dispatchThrottlingRatePerSubscriptionInMsg=rate)
    async with throttled(fake_clock, **config) as (service, _):
        topic = await service.get_topic(topic_name())
        await backlog(topic, count)
        async with anyio.create_task_group() as tg:
            clients = await start_paced(tg, topic, fake_clock, paces, sub_type)
            last = await drain(fake_clock, clients, count)
            tg.cancel_scope.cancel()
        delivered = sorted(m.entry_id for c in clients for m in c.messages)
        assert delivered == list(range(count))  # each once
        assert last == pytest.approx((count // rate - 1) * BACKOFF)
        assert topic.stats().subscriptions[0].backlog == 0  # and every one acknowledged


@FACTORIES
async def test_subscriptions_sharing_a_topic_limit_drain_at_it_together(
    fake_clock: FakeClock, factory: str | None
) -> None:
    rate, count = 100, 300
    config = limiter_config(factory, dispatchThrottlingRatePerTopicInMsg=rate)
    async with throttled(fake_clock, **config) as (service, _):
        topic = await service.get_topic(topic_name())
        await backlog(topic, count)
        async with anyio.create_task_group() as tg:
            clients = [
                *await start_paced(
                    tg, topic, fake_clock, (0.0,), SubType.EXCLUSIVE, subscription="a"
                ),
                *await start_paced(
                    tg, topic, fake_clock, (0.004, 0.001), SubType.SHARED, subscription="b"
                ),
            ]
            last = await drain(fake_clock, clients, 2 * count)
            tg.cancel_scope.cancel()
        assert sum(len(c.times) for c in clients) == 2 * count
        assert last == pytest.approx((2 * count // rate - 1) * BACKOFF)
        assert [s.backlog for s in topic.stats().subscriptions] == [0, 0]


@contextlib.asynccontextmanager
async def ten_a_second(
    clock: FakeClock, factory: str | None
) -> AsyncIterator[tuple[Any, Any, FakeConsumerSink, Any]]:
    """A subscription limited to 10 msg/s over a backlog of 100, granted 1000 permits at 0 s.

    The first read is cut from 100 entries to the 10 tokens and the next one refused: two
    throttle events and a retry at ``BACKOFF``.
    """
    config = limiter_config(factory, dispatchThrottlingRatePerSubscriptionInMsg=10)
    async with throttled(clock, **config) as (service, throttling):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 100)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1000)
        await settle()
        yield topic, throttling, sink, consumer


@FACTORIES
async def test_acks_during_the_backoff_neither_read_nor_move_the_retry(
    fake_clock: FakeClock, factory: str | None
) -> None:
    async with ten_a_second(fake_clock, factory) as (topic, throttling, sink, consumer):
        first = sink.take()
        assert len(first) == 10
        assert throttle_events(throttling, topic, "sub") == (0, 0, 2)
        for delivery in first:  # acked one by one through the backoff
            await fake_clock.advance(0.0625)
            consumer.ack(AckType.INDIVIDUAL, [mid(delivery.ledger_id, delivery.entry_id)])
        assert throttle_events(throttling, topic, "sub") == (0, 0, 2)
        await fake_clock.advance(BACKOFF - 0.625)  # the retry, where the first refusal put it
        assert len(sink.take()) == 10
        assert throttle_events(throttling, topic, "sub") == (0, 0, 4)


@FACTORIES
async def test_a_flow_during_the_backoff_asks_the_limiters_but_keeps_the_retry(
    fake_clock: FakeClock, factory: str | None
) -> None:
    async with ten_a_second(fake_clock, factory) as (topic, throttling, sink, consumer):
        assert len(sink.take()) == 10
        await fake_clock.advance(0.5)
        consumer.flow(1)  # refused: the limiters are empty until 1 s
        await settle()
        assert sink.take() == []
        assert throttle_events(throttling, topic, "sub") == (0, 0, 3)
        await fake_clock.advance(0.5005)  # past the refill, before the retry
        consumer.flow(1)
        await settle()
        assert len(sink.take()) == 10  # the FLOW read what the refill allows (2 events)
        await fake_clock.advance(BACKOFF - 1.0005)  # the retry still comes, and is refused
        assert sink.take() == []
        assert throttle_events(throttling, topic, "sub") == (0, 0, 6)
        await fake_clock.advance(BACKOFF)  # the next one is BACKOFF after it
        assert len(sink.take()) == 10
        assert throttle_events(throttling, topic, "sub") == (0, 0, 8)
