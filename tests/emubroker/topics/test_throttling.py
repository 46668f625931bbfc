"""Dispatch throttling through a real TopicService on a FakeClock (spec/pulsar-behaviour.md §1).

These tests use a backoff of 1.001 s (``helpers.BACKOFF``) and read "period k" as the deliveries
between two retries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pyarrow.parquet as pq
import pytest

from emubroker.naming import TopicName
from emubroker.policies import Policies, TopicPolicies
from emubroker.ratelimit.quotas import CLASSIC_FACTORY, DispatchRate, DispatchThrottlingConfig
from emubroker.storage import MemoryBackend
from emubroker.topics import TopicService, TopicSettings
from emubroker.topics.throttling import DispatchThrottling
from emubroker.topics.trace_sink import DispatchTraceSink
from protocol.clock import FakeClock
from protocol.commands import SubType
from storage_stub.ledger import LedgerStore
from tests.emubroker.topics.helpers import (
    BACKOFF,
    KNOWN_NAMESPACES,
    FakeConsumerSink,
    add_producer,
    backlog,
    make_entry,
    settle,
    subscribe,
    throttled,
    topic_name,
)

pytestmark = pytest.mark.anyio


def messages(sink: FakeConsumerSink, per_entry: int = 1) -> int:
    return len(sink.take()) * per_entry


async def per_period(
    clock: FakeClock, sinks: list[FakeConsumerSink], periods: int, per_entry: int = 1
) -> list[list[int]]:
    """Messages each sink received in period 0 (now) and each following period."""
    await settle()
    out = [[messages(s, per_entry) for s in sinks]]
    for _ in range(periods):
        await clock.advance(BACKOFF)
        await settle()
        out.append([messages(s, per_entry) for s in sinks])
    return out


@pytest.mark.parametrize("factory", [CLASSIC_FACTORY, None])
async def test_subscription_limit_drains_backlog_at_rate_per_period(
    fake_clock: FakeClock, factory: str | None
) -> None:
    extra: dict[str, Any] = {"dispatchRateLimiterFactoryClassName": factory} if factory else {}
    async with throttled(fake_clock, dispatchThrottlingRatePerSubscriptionInMsg=10, **extra) as (
        service,
        _,
    ):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 45)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1000)
        got = await per_period(fake_clock, [sink], 5)
        assert [p[0] for p in got] == [10, 10, 10, 10, 5, 0]


async def test_no_limit_means_the_plain_path(fake_clock: FakeClock) -> None:
    async with throttled(fake_clock) as (service, throttling):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 300)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1000)
        await settle()
        assert len(sink.messages) == 300
        assert not throttling.subscription_throttle(topic.name, "sub").active


async def test_byte_limit_turns_into_an_entry_cap(fake_clock: FakeClock) -> None:
    probe = make_entry(b"p" * 100)[0]
    section = len(probe) + 6  # what MESSAGE carries and what is charged: checksum section too
    async with throttled(fake_clock, dispatchThrottlingRatePerSubscriptionInByte=3 * section) as (
        service,
        _,
    ):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 10, payload=b"p" * 100)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1000)
        got = await per_period(fake_clock, [sink], 3)
        assert [p[0] for p in got] == [3, 3, 3, 1]


async def test_topic_limit_is_shared_by_its_subscriptions(fake_clock: FakeClock) -> None:
    async with throttled(fake_clock, dispatchThrottlingRatePerTopicInMsg=10) as (service, th):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 100)
        sinks = [FakeConsumerSink(), FakeConsumerSink()]
        for i, sink in enumerate(sinks):
            consumer = await subscribe(topic, sink, subscription=f"s{i}", consumer_id=i)
            consumer.flow(1000)
        got = await per_period(fake_clock, sinks, 4)
        assert [sum(p) for p in got] == [10] * 5
        limiter = th.topic_limiter(topic.name)
        assert limiter is not None
        assert th.subscription_throttle(topic.name, "s0").chain.limiter(limiter.level) is limiter
        assert th.subscription_throttle(topic.name, "s1").chain.limiter(limiter.level) is limiter


async def test_broker_limit_applies_across_topics(fake_clock: FakeClock) -> None:
    async with throttled(fake_clock, dispatchThrottlingRateInMsg=10) as (service, _):
        sinks = [FakeConsumerSink(), FakeConsumerSink()]
        for i, sink in enumerate(sinks):
            topic = await service.get_topic(topic_name(f"t{i}"))
            await backlog(topic, 100)
            consumer = await subscribe(topic, sink)
            consumer.flow(1000)
        got = await per_period(fake_clock, sinks, 4)
        assert [sum(p) for p in got] == [10] * 5


async def test_precedence_and_live_policy_changes(fake_clock: FakeClock) -> None:
    namespace = Policies(
        subscriptionDispatchRate={"standalone": {"dispatchThrottlingRateInMsg": 20}}
    )
    async with throttled(
        fake_clock, namespace=namespace, dispatchThrottlingRatePerSubscriptionInMsg=50
    ) as (service, throttling):
        name = topic_name()
        throttling.set_topic_policies(name, TopicPolicies(subscriptionDispatchRate=DispatchRate(5)))
        topic = await service.get_topic(name)
        await backlog(topic, 200)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1000)
        assert (await per_period(fake_clock, [sink], 1))[0] == [5]  # topic > namespace > broker
        throttling.set_topic_policies(name, None)  # live: the namespace's 20 applies
        assert [p[0] for p in await per_period(fake_clock, [sink], 1)] == [0, 20]
        namespace.subscriptionDispatchRate.clear()  # live: the broker's 50
        throttling.namespace_changed(name.namespace, namespace)
        got = await per_period(fake_clock, [sink], 1)
        assert got[1] == [50]


async def test_batches_over_deliver_and_the_debt_is_carried(fake_clock: FakeClock) -> None:
    # Limit 10 msg/s, 6 messages per entry: a read asks for 10 *entries* (60 messages), charged
    # 60 -> balance -50: the next five periods deliver nothing (spec §1.2/§1.5).
    async with throttled(fake_clock, dispatchThrottlingRatePerSubscriptionInMsg=10) as (
        service,
        _,
    ):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 30, batch=6)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(10_000)
        got = await per_period(fake_clock, [sink], 7, per_entry=6)
        assert [p[0] for p in got] == [60, 0, 0, 0, 0, 0, 60, 0]


async def test_batch_entry_mode_charges_entries(fake_clock: FakeClock) -> None:
    async with throttled(
        fake_clock,
        dispatchThrottlingRatePerSubscriptionInMsg=5,
        dispatchThrottlingOnBatchMessageEnabled=True,
    ) as (service, _):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 12, batch=100)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
        consumer.flow(100_000)
        got = await per_period(fake_clock, [sink], 2, per_entry=100)
        assert [p[0] for p in got] == [500, 500, 200]


async def test_tail_readers_are_exempt_when_configured(fake_clock: FakeClock) -> None:
    async with throttled(
        fake_clock,
        dispatchThrottlingRatePerSubscriptionInMsg=10,
        dispatchThrottlingOnNonBacklogConsumerEnabled=False,
    ) as (service, _):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 40)  # within the backlogged threshold: the cursor is "active"
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1000)
        await settle()
        assert len(sink.messages) == 40


async def test_throttle_events_are_counted_per_level(fake_clock: FakeClock) -> None:
    async with throttled(fake_clock, dispatchThrottlingRatePerSubscriptionInMsg=10) as (
        service,
        throttling,
    ):
        topic = await service.get_topic(topic_name())
        await backlog(topic, 30)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1000)
        await per_period(fake_clock, [sink], 2)
        stats = throttling.subscription_throttle(topic.name, "sub").stats()
        assert stats.dispatchThrottledMsgEventsBySubscriptionLimit >= 3
        assert stats.dispatchThrottledMsgEventsByBrokerLimit == 0
        assert stats.dispatchThrottledMsgEventsByTopicLimit == 0


async def test_trace_rows_are_written_and_read_back(fake_clock: FakeClock, tmp_path: Path) -> None:
    sink_trace = DispatchTraceSink(tmp_path, broker_id="b:1", flush_every=4)
    async with anyio.create_task_group() as tg:
        await tg.start(sink_trace.run)
        async with throttled(
            fake_clock, trace=sink_trace, dispatchThrottlingRatePerSubscriptionInMsg=10
        ) as (service, _):
            name = TopicName.parse("persistent://public/default/traced")
            topic = await service.get_topic(name)
            await backlog(topic, 25)
            sink = FakeConsumerSink()
            consumer = await subscribe(topic, sink)
            consumer.flow(1000)
            await per_period(fake_clock, [sink], 3)
        tg.cancel_scope.cancel()
    table = pq.read_table(sink_trace.writer.files).to_pylist()
    dispatches = [r for r in table if r["event"] == "dispatch"]
    assert [r["messages"] for r in dispatches] == [10, 10, 5]
    assert all(r["subscription_msg_charged"] == r["messages"] for r in dispatches)
    assert all(r["subscription_msg_rate"] == 10 and r["broker_msg_rate"] == -1 for r in table)
    assert {r["topic"] for r in table} == {str(name)}
    assert {r["broker"] for r in table} == {"b:1"}
    throttled_rows = [r for r in table if r["event"] == "throttled"]
    assert throttled_rows
    assert all(r["throttled_by"] == "subscription" for r in throttled_rows)


async def test_a_publish_that_meets_an_exhausted_limiter_is_retried_after_the_backoff(
    fake_clock: FakeClock,
) -> None:
    async with throttled(fake_clock, dispatchThrottlingRateInMsg=10) as (service, _):
        first = await service.get_topic(topic_name("a"))
        await backlog(first, 10)
        drained = FakeConsumerSink()
        (await subscribe(first, drained)).flow(100)
        await settle()
        assert len(drained.take()) == 10  # the broker's tokens are gone
        second = await service.get_topic(topic_name("b"))
        sink = FakeConsumerSink()
        (await subscribe(second, sink)).flow(100)
        await settle()
        await backlog(second, 5)  # delivered from the publish path: throttled there
        await settle()
        assert sink.messages == []
        await fake_clock.advance(BACKOFF)
        await settle()
        assert len(sink.messages) == 5


@pytest.mark.parametrize("factory", [CLASSIC_FACTORY, None])
async def test_relative_to_publish_rate_follows_the_stats_update(
    fake_clock: FakeClock, factory: str | None
) -> None:
    # limit = floor(smoothed publish rate) + configured rate, the publish rate being refreshed
    # every statsUpdateFrequencyInSecs (spec §1.1).
    extra: dict[str, Any] = {"dispatchRateLimiterFactoryClassName": factory} if factory else {}
    throttling = DispatchThrottling(
        DispatchThrottlingConfig(**extra),
        clock=fake_clock,
        namespace_policies=lambda ns: None,
        backoff=BACKOFF,
    )
    service = TopicService(
        config=TopicSettings(stats_update_frequency=10.0),
        clock=fake_clock,
        ledgers=MemoryBackend(LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
        throttling=throttling,
    )
    async with service.running():
        name = topic_name()
        relative = DispatchRate(dispatchThrottlingRateInMsg=5, relativeToPublishRate=True)
        throttling.set_topic_policies(name, TopicPolicies(subscriptionDispatchRate=relative))
        topic = await service.get_topic(name)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(10_000)
        await fake_clock.advance(10.0)  # first stats update: nothing published yet
        await backlog(topic, 300)  # 300 messages in this interval: 30 msg/s
        before = [p[0] for p in await per_period(fake_clock, [sink], 3)]
        assert before == [5, 5, 5, 5]  # only the configured 5 while the rate is still 0
        await fake_clock.advance(10.0 - 3 * BACKOFF)  # second stats update: 30 msg/s
        await settle()
        sink.take()
        after = [p[0] for p in await per_period(fake_clock, [sink], 3)][1:]
        assert after == [35, 35, 35]  # floor(30) + 5


async def test_throttled_key_shared_replays_before_reading_on(fake_clock: FakeClock) -> None:
    # A throttled round that stops inside the replay set must resume there: reading on would
    # send a key's newer messages before its redelivered older ones.
    async with throttled(fake_clock, dispatchThrottlingRatePerSubscriptionInMsg=2) as (
        service,
        _,
    ):
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        for i in range(6):
            entry, crc, info = make_entry(b"%d" % i, sequence_id=i, key="k")
            await topic.publish(producer, entry, crc, info)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.KEY_SHARED)
        consumer.flow(100)
        await per_period(fake_clock, [], 1)  # two periods: entries 0-3 go out
        assert sink.entry_ids == [0, 1, 2, 3]
        consumer.redeliver(None)
        await per_period(fake_clock, [], 4)
        assert sink.entry_ids[4:] == [0, 1, 2, 3, 4, 5]
