"""Backlog quotas enforced (``emubroker.topics.backlog_quota``), on a FakeClock."""

from __future__ import annotations

from typing import Any

import pytest

from emubroker.policies import Policies
from emubroker.policies.backlog_quota import (
    BacklogQuota,
    BacklogQuotaError,
    RetentionPolicy,
    decode_backlog_quota,
)
from emubroker.topics.backlog_quota import default_quota
from emubroker.topics.settings import TopicSettings
from protocol.clock import FakeClock
from protocol.commands import AckType
from protocol.errors import (
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
)
from tests.emubroker.topics.helpers import (
    FakeConsumerSink,
    add_producer,
    make_entry,
    mid,
    open_service,
    publish,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio

EPOCH_MS = 1_700_000_000_000  # FakeClock's wall time at now=0
PAYLOAD = b"p" * 100
ENTRY = len(make_entry(PAYLOAD)[0])  # bytes one entry of PAYLOAD takes


def _quota(kind: str, policy: str, *, size: int = -1, seconds: int = -1) -> Policies:
    stored = {"limit": size, "limitSize": size, "limitTime": seconds, "policy": policy}
    return Policies(backlog_quota_map={kind: stored})


async def _backlogged(service: Any, entries: int, **kw: Any) -> tuple[Any, Any, Any]:
    topic = await service.get_topic(topic_name())
    consumer = await subscribe(topic, FakeConsumerSink())  # never reads: all is backlog
    producer = await add_producer(topic)
    for i in range(entries):
        await publish(topic, producer, PAYLOAD, sequence_id=i, **kw)
    return topic, consumer, producer


def test_quota_bodies_read_as_pulsars_setters_do() -> None:
    # The Go client's tests post the size as a string, under the deprecated name.
    quota = decode_backlog_quota(b'{"limit": "10240", "policy": "producer_request_hold"}')
    assert quota == BacklogQuota(10240, 10240, 0, RetentionPolicy.producer_request_hold)
    quota = decode_backlog_quota(b'{"limitTime": 30, "policy": "consumer_backlog_eviction"}')
    assert (quota.limitSize, quota.limitTime) == (0, 30)
    with pytest.raises(BacklogQuotaError, match="Invalid backlog quota"):
        decode_backlog_quota(b'{"policy": "drop_everything"}')


def test_the_broker_default_prefers_gigabytes_when_positive() -> None:
    assert default_quota(TopicSettings()) == BacklogQuota(
        -1, -1, -1, RetentionPolicy.producer_request_hold
    )
    settings = TopicSettings(
        backlog_quota_default_limit_gb=0.5,
        backlog_quota_default_limit_bytes=7,
        backlog_quota_default_limit_second=9,
        backlog_quota_default_retention_policy="producer_exception",
    )
    assert default_quota(settings) == BacklogQuota(
        1 << 29, 1 << 29, 9, RetentionPolicy.producer_exception
    )


async def test_backlog_bytes_count_whole_ledgers_and_part_of_the_first_by_its_average() -> None:
    async with open_service(managed_ledger_max_entries_per_ledger=3) as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink())  # keeps every ledger
        producer = await add_producer(topic)
        for _ in range(8):  # ledgers of 3, 3 and 2 entries, all of one size
            await publish(topic, producer, PAYLOAD)
        ledger = topic.ledger
        assert len(ledger.ledger_ids) == 3
        whole = ledger.bytes_from(0)
        assert whole % 8 == 0
        assert whole >= 8 * ENTRY  # stored entries carry their checksum
        for index in (2, 3, 7, 8, 99):
            assert ledger.bytes_from(index) == max(8 - index, 0) * whole // 8, index


async def test_held_producers_are_disconnected_at_the_check_and_refused_until_it_drains() -> None:
    clock = FakeClock()
    policies = {topic_name().namespace: _quota("destination_storage", "producer_request_hold")}
    policies[topic_name().namespace].backlog_quota_map["destination_storage"]["limitSize"] = (
        3 * ENTRY
    )
    async with open_service(clock, namespace_policies=policies.get) as service:
        topic, consumer, producer = await _backlogged(service, 4)
        await publish(topic, producer, PAYLOAD, sequence_id=9)  # sends are never refused
        await clock.advance(59)
        assert producer.sink.closed == []  # the check runs every 60 s
        await clock.advance(1)
        assert producer.sink.closed == [1]
        assert topic.producers() == []
        with pytest.raises(ProducerBlockedQuotaExceededError, match="backlog quota exceeded"):
            await add_producer(topic, 2)
        ledger = topic.ledger.current_ledger_id
        consumer.ack(AckType.CUMULATIVE, [mid(ledger, 2)])  # 2 entries left: under the quota
        await add_producer(topic, 3)


async def test_producer_exception_refuses_with_the_non_retriable_error() -> None:
    policies = {topic_name().namespace: _quota("destination_storage", "producer_exception")}
    policies[topic_name().namespace].backlog_quota_map["destination_storage"]["limitSize"] = ENTRY
    async with open_service(namespace_policies=policies.get) as service:
        topic, _, _ = await _backlogged(service, 1)
        with pytest.raises(ProducerBlockedQuotaExceededException):
            await add_producer(topic, 2)


async def test_the_age_quota_refuses_producers_once_the_oldest_backlog_is_too_old() -> None:
    clock = FakeClock()
    policies = {topic_name().namespace: _quota("message_age", "producer_request_hold", seconds=30)}
    async with open_service(clock, namespace_policies=policies.get) as service:
        topic, _, _ = await _backlogged(service, 2, publish_time=EPOCH_MS)
        await add_producer(topic, 2)  # 0 s old
        await clock.advance(31)
        with pytest.raises(ProducerBlockedQuotaExceededError):
            await add_producer(topic, 3)
        stats = service.quotas.stats(topic)
        assert stats == {
            "backlogQuotaLimitSize": -1,
            "backlogQuotaLimitTime": 30,
            "oldestBacklogMessageAgeSeconds": 31,
            "oldestBacklogMessageSubscriptionName": "sub",
        }


async def test_eviction_skips_the_slowest_subscriptions_oldest_backlog_to_90_percent() -> None:
    clock = FakeClock()
    policies = {topic_name().namespace: _quota("destination_storage", "consumer_backlog_eviction")}
    policies[topic_name().namespace].backlog_quota_map["destination_storage"]["limitSize"] = (
        5 * ENTRY
    )
    async with open_service(clock, namespace_policies=policies.get) as service:
        topic, _, producer = await _backlogged(service, 10)
        await clock.advance(60)
        # 10 entries, target 4.5: skip (10 - 4.5) / 10 of 10 = 5, then 5 > 4.5: skip
        # (5 - 4.5) / 5 of 5 = 0 entries, and stop.
        assert topic.subscription("sub").stats().backlog == 5
        assert producer.sink.closed == []  # producers stay


async def test_age_eviction_expires_what_is_older_than_90_percent_of_the_limit() -> None:
    clock = FakeClock()
    policies = {
        topic_name().namespace: _quota("message_age", "consumer_backlog_eviction", seconds=100)
    }
    async with open_service(clock, namespace_policies=policies.get) as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink())
        producer = await add_producer(topic)
        for age in (200, 150, 95, 85, 10):
            await publish(topic, producer, PAYLOAD, publish_time=EPOCH_MS + 60_000 - age * 1000)
        await clock.advance(60)  # the oldest is 200 s old: over 100; expire older than 90
        assert topic.subscription("sub").stats().backlog == 2


async def test_a_disabled_check_never_acts_but_stats_show_the_quota() -> None:
    clock = FakeClock()
    policies = {topic_name().namespace: _quota("destination_storage", "producer_request_hold")}
    policies[topic_name().namespace].backlog_quota_map["destination_storage"]["limitSize"] = ENTRY
    async with open_service(
        clock, namespace_policies=policies.get, backlog_quota_check_enabled=False
    ) as service:
        topic, _, producer = await _backlogged(service, 3)
        await clock.advance(600)
        assert producer.sink.closed == []
        assert service.quotas.stats(topic)["backlogQuotaLimitSize"] == ENTRY


async def test_a_new_broker_default_applies_from_the_next_check() -> None:
    # The checks keep the broker's default quota between rounds; dynamic configuration
    # replaces the settings, and the next round must use the new default.
    clock = FakeClock()
    async with open_service(clock) as service:
        _, _, producer = await _backlogged(service, 4)
        await clock.advance(60)
        assert producer.sink.closed == []  # no quota by default
        service.reconfigure(TopicSettings(backlog_quota_default_limit_bytes=3 * ENTRY))
        await clock.advance(60)
        assert producer.sink.closed == [1]
