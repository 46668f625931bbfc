"""Message TTL (``emubroker.topics.expiry``): search core, mark-delete moves, periodic check."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from emubroker.policies import Policies
from emubroker.storage import MemoryBackend
from emubroker.topics import TopicService, TopicSettings
from emubroker.topics.expiry import newest_matching
from protocol.clock import FakeClock
from protocol.commands import AckType, SubType
from storage_stub.ledger import LedgerStore
from tests.emubroker.topics.helpers import (
    KNOWN_NAMESPACES,
    FakeConsumerSink,
    add_producer,
    mid,
    open_service,
    publish,
    settle,
    subscribe,
    topic_name,
)

EPOCH_MS = 1_700_000_000_000  # FakeClock's wall time at now=0


# ---- the pure core ----------------------------------------------------------------------------


@pytest.mark.parametrize("count", range(1, 24))
def test_newest_matching_finds_the_end_of_a_matching_prefix(count: int) -> None:
    for matching in range(count + 1):
        found = newest_matching(10, 10 + count - 1, lambda i, m=matching: i < 10 + m)
        assert found == (None if matching == 0 else 10 + matching - 1)


def test_newest_matching_of_an_empty_range_is_none() -> None:
    assert newest_matching(5, 4, lambda i: True) is None


def test_newest_matching_judges_out_of_order_entries_as_pulsars_binary_search() -> None:
    # Entry 7 is "old" (a producer with a slow clock) after new ones: Pulsar's probes (5, 2, 3)
    # never see it, so the answer is 2 where "the newest old entry" would be 7.
    old = {0, 1, 2, 7}
    assert newest_matching(0, 9, old.__contains__) == 2
    # First entry new: nothing expires at all, whatever follows (Pulsar issue 5579).
    assert newest_matching(0, 9, lambda i: i != 0) is None


# ---- component: the topic layer with a FakeClock ----------------------------------------------


def _service_running(
    clock: FakeClock, ttl: int | None, **settings: Any
) -> AbstractAsyncContextManager[TopicService]:
    return TopicService(
        config=TopicSettings(**settings),
        clock=clock,
        ledgers=MemoryBackend(LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
        namespace_policies=lambda ns: Policies(message_ttl_in_seconds=ttl),
    ).running()


async def _publish_aged(topic: Any, ages_s: list[int], **kw: Any) -> None:
    producer = await add_producer(topic)
    for age in ages_s:
        await publish(topic, producer, publish_time=EPOCH_MS - age * 1000, **kw)


@pytest.mark.anyio
async def test_periodic_check_expires_messages_older_than_the_namespace_ttl() -> None:
    clock = FakeClock()
    async with _service_running(clock, 60) as service:
        topic = await service.get_topic(topic_name())
        sink = FakeConsumerSink()
        await subscribe(topic, sink)  # subscribes at the earliest entry; no permits
        await _publish_aged(topic, [600, 500, 400, 30, 0])
        await clock.advance(5 * 60 - 1)
        assert topic.subscription("sub").stats().backlog == 5  # not yet: every 5 minutes
        await clock.advance(1)
        stats = topic.subscription("sub").stats()
        # Ages are now 900..300 s: all older than 60 s.
        assert stats.backlog == 0
        assert stats.msg_expired == 5
        assert stats.last_expire == EPOCH_MS + 300_000


@pytest.mark.anyio
async def test_check_moves_mark_delete_to_newest_expired_entry_and_counts_backlog() -> None:
    clock = FakeClock()
    async with _service_running(clock, 100) as service:
        topic = await service.get_topic(topic_name())
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
        await _publish_aged(topic, [500, 400, 300, 200, 50, 10])
        ledger = topic.ledger.current_ledger_id
        # Entry 1 was acked: it does not count as expired. Entry 4 was acked too and follows
        # the newest expired entry 3, so the mark-delete position folds it in.
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 1), mid(ledger, 4)])
        service.check_message_expiry()
        sub = topic.subscription("sub")
        assert sub.cursor.mark_delete == 4  # ages 500..200 > 100 s, then acked 4
        assert sub.stats().msg_expired == 3  # 0, 2 and 3: backlog 4 before, 1 after
        assert sub.stats().backlog == 1  # entry 5
        assert sub.stats().last_mark_delete_advanced == EPOCH_MS


@pytest.mark.anyio
async def test_mark_delete_folds_in_individually_acked_entries_after_the_cut() -> None:
    clock = FakeClock()
    async with _service_running(clock, 100) as service:
        topic = await service.get_topic(topic_name())
        consumer = await subscribe(topic, FakeConsumerSink(), sub_type=SubType.SHARED)
        await _publish_aged(topic, [500, 400, 50, 10])
        ledger = topic.ledger.current_ledger_id
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 2)])
        service.check_message_expiry()
        assert topic.subscription("sub").cursor.mark_delete == 2
        assert topic.subscription("sub").stats().msg_expired == 2


@pytest.mark.anyio
async def test_batch_entry_is_judged_by_its_publish_time_as_a_whole() -> None:
    clock = FakeClock()
    async with _service_running(clock, 100) as service:
        topic = await service.get_topic(topic_name())
        consumer = await subscribe(topic, FakeConsumerSink(), sub_type=SubType.SHARED)
        await _publish_aged(topic, [500], batch=4)
        ledger = topic.ledger.current_ledger_id
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 0, (0b1100,))])  # 2 of 4 acked
        service.check_message_expiry()
        sub = topic.subscription("sub")
        assert sub.cursor.mark_delete == 0
        assert not sub.cursor.partial_acks()


@pytest.mark.anyio
async def test_zero_namespace_ttl_overrides_the_broker_default() -> None:
    clock = FakeClock()
    async with _service_running(clock, 0, ttl_duration_default_in_seconds=10) as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink())
        await _publish_aged(topic, [500])
        service.check_message_expiry()
        assert topic.subscription("sub").stats().backlog == 1


@pytest.mark.anyio
async def test_broker_default_ttl_applies_without_namespace_ttl() -> None:
    clock = FakeClock()
    async with open_service(clock, ttl_duration_default_in_seconds=10) as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink())
        await _publish_aged(topic, [500, 5])
        service.check_message_expiry()
        assert topic.subscription("sub").stats().backlog == 1


@pytest.mark.anyio
async def test_check_interval_comes_from_the_settings() -> None:
    clock = FakeClock()
    async with _service_running(clock, 1, message_expiry_check_interval_in_minutes=1) as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink())
        await _publish_aged(topic, [0])
        await clock.advance(60)
        assert topic.subscription("sub").stats().msg_expired == 1


@pytest.mark.anyio
async def test_readers_are_expired_too() -> None:
    clock = FakeClock()
    async with _service_running(clock, 100) as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink(), subscription="reader", durable=False)
        await _publish_aged(topic, [500])
        service.check_message_expiry()
        assert topic.subscription("reader").cursor.mark_delete == 0


@pytest.mark.anyio
async def test_expired_entries_are_not_delivered_to_a_consumer_flowing_later() -> None:
    clock = FakeClock()
    async with _service_running(clock, 100) as service:
        topic = await service.get_topic(topic_name())
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        await _publish_aged(topic, [500, 400, 10])
        service.check_message_expiry()
        consumer.flow(100)
        await settle()
        assert sink.entry_ids == [2]


@pytest.mark.anyio
async def test_delivered_unacked_expired_entries_are_settled() -> None:
    clock = FakeClock()
    async with _service_running(clock, 100) as service:
        topic = await service.get_topic(topic_name())
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
        consumer.flow(100)
        await _publish_aged(topic, [500, 400, 10])
        await settle()
        assert consumer.unacked == 3
        service.check_message_expiry()
        assert consumer.unacked == 1
        consumer.redeliver(None)
        await settle()
        assert sink.entry_ids == [0, 1, 2, 2]


@pytest.mark.anyio
async def test_expire_by_time_is_refused_for_an_empty_backlog() -> None:
    clock = FakeClock()
    async with open_service(clock) as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink())
        sub = topic.subscription("sub")
        assert not sub.expire_by_time(10, EPOCH_MS)
        await _publish_aged(topic, [500, 5])
        # A connected subscription with a small backlog: only when its oldest entry is older
        # than 1.5 times the given time.
        assert not sub.expire_by_time(400, EPOCH_MS)
        assert sub.expire_by_time(300, EPOCH_MS)
        assert sub.stats().backlog == 1
        assert sub.stats().last_expire == EPOCH_MS
