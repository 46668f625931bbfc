"""``TopicStatsView.stats`` per producer, consumer and subscription, on a fake clock.

Rates are deltas over the ``RateTracker`` window (as ``msgRateIn`` of the topic); counters and
timestamps (epoch ms of the injected clock) come from the topic's snapshot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from emubroker.admin.metrics import RateTracker
from emubroker.admin.topic_stats import TopicStatsView
from emubroker.topics import TopicService
from emubroker.topics.compaction import CompactionRecord
from emubroker.topics.pickers import failover_ring_pick
from protocol.clock import FakeClock
from protocol.commands import AckType, SubType
from storage_stub.ledger import LedgerStore
from tests.emubroker.topics.helpers import (
    FakeConsumerSink,
    add_producer,
    make_entry,
    mid,
    open_service,
    publish,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


def _ms(clock: FakeClock) -> int:
    return clock.wall_ms()


class _Stats:
    def __init__(self, service: TopicService, clock: FakeClock, ledgers: LedgerStore) -> None:
        self._service = service
        self.view = TopicStatsView(
            service,
            RateTracker(clock=clock),
            ledgers,
            broker_id="localhost:8080",
            dedup_enabled=lambda _topic: False,
        )

    def __call__(self, topic: Any) -> dict[str, Any]:
        self.view.refresh()
        return self.view.stats(topic)


@pytest.fixture
async def service(fake_clock: FakeClock) -> AsyncIterator[tuple[TopicService, _Stats]]:
    ledgers = LedgerStore()
    async with open_service(fake_clock, ledgers=ledgers) as running:
        yield running, _Stats(running, fake_clock, ledgers)


async def test_counters_rates_metadata_and_timestamps_of_producer_and_consumer(
    service: tuple[TopicService, _Stats], fake_clock: FakeClock
) -> None:
    topics, stats = service
    topic = await topics.get_topic(topic_name("rates"))
    producer = await add_producer(topic, metadata={"app": "y"})
    sink = FakeConsumerSink()
    consumer = await subscribe(topic, sink, sub_type=SubType.SHARED, metadata={"team": "x"})
    stats(topic)  # opens the first rate window at t=0
    flowed_at = _ms(fake_clock)
    consumer.flow(10)
    await fake_clock.advance(0.5)
    sent_at = _ms(fake_clock)
    entries = [make_entry(b"x" * 100, sequence_id=i) for i in range(10)]
    await topic.publish_many(producer, entries)
    await settle()
    assert len(sink.messages) == 10
    bytes_out = sum(len(m.section) for m in sink.messages)
    bytes_in = sum(len(entry) for entry, _, _ in entries)

    await fake_clock.advance(1.5)
    acked_at = _ms(fake_clock)
    ledger = sink.messages[0].ledger_id
    consumer.ack(AckType.INDIVIDUAL, [mid(ledger, i) for i in range(4)])
    consumer.redeliver([mid(ledger, 9)])
    doc = stats(topic)  # closes the window: 2 s

    (publisher,) = doc["publishers"]
    assert publisher["metadata"] == {"app": "y"}
    assert publisher["msgRateIn"] == pytest.approx(5.0)
    assert publisher["msgThroughputIn"] == pytest.approx(bytes_in / 2)
    assert publisher["averageMsgSize"] == pytest.approx(bytes_in / 10)

    sub = doc["subscriptions"]["sub"]
    (con,) = sub["consumers"]
    assert con["metadata"] == {"team": "x"}
    assert con["msgOutCounter"] == 10
    assert con["bytesOutCounter"] == bytes_out
    assert con["msgRateOut"] == pytest.approx(5.0)
    assert con["msgThroughputOut"] == pytest.approx(bytes_out / 2)
    assert con["messageAckRate"] == pytest.approx(2.0)  # 4 messages acked over 2 s
    assert con["msgRateRedeliver"] == pytest.approx(0.5)  # 1 message over 2 s
    assert con["unackedMessages"] == 5
    assert con["availablePermits"] == 0
    assert con["lastConsumedTimestamp"] == sent_at
    assert con["lastAckedTimestamp"] == acked_at
    assert con["lastConsumedFlowTimestamp"] == flowed_at
    assert con["firstConsumedFlowTimestamp"] == flowed_at

    assert sub["messageAckRate"] == pytest.approx(2.0)
    assert sub["msgRateRedeliver"] == pytest.approx(0.5)
    assert sub["lastConsumedTimestamp"] == sent_at
    assert sub["lastAckedTimestamp"] == acked_at
    assert sub["lastConsumedFlowTimestamp"] == flowed_at
    assert sub["lastMarkDeleteAdvancedTimestamp"] == acked_at  # entries 0..3 acked
    assert sub["msgOutCounter"] == doc["msgOutCounter"] == 10
    assert sub["bytesOutCounter"] == con["bytesOutCounter"]

    # The next window saw nothing: rates fall back to 0, counters stay.
    await fake_clock.advance(2.0)
    later = stats(topic)
    con = later["subscriptions"]["sub"]["consumers"][0]
    assert (con["msgRateOut"], con["messageAckRate"], con["msgOutCounter"]) == (0.0, 0.0, 10)
    assert later["publishers"][0]["msgRateIn"] == 0.0


async def test_cumulative_ack_counts_once_as_in_pulsar(
    service: tuple[TopicService, _Stats], fake_clock: FakeClock
) -> None:
    topics, stats = service
    topic = await topics.get_topic(topic_name("cumulative"))
    producer = await add_producer(topic)
    sink = FakeConsumerSink()
    consumer = await subscribe(topic, sink)  # Exclusive
    consumer.flow(10)
    for i in range(3):
        await publish(topic, producer, sequence_id=i)
    await settle()
    stats(topic)
    await fake_clock.advance(1.0)
    consumer.ack(AckType.CUMULATIVE, [mid(sink.messages[-1].ledger_id, 2)])
    doc = stats(topic)
    sub = doc["subscriptions"]["sub"]
    assert sub["consumers"][0]["messageAckRate"] == pytest.approx(1.0)
    assert sub["lastAckedTimestamp"] == sub["lastMarkDeleteAdvancedTimestamp"] == _ms(fake_clock)
    consumer.redeliver(None)  # Exclusive: Pulsar keeps no pending acks, so nothing counts
    await fake_clock.advance(1.0)
    assert stats(topic)["subscriptions"]["sub"]["msgRateRedeliver"] == 0.0
    # A rate is a double in Pulsar's JSON even when zero (0.0, not 0), as its other rates here.
    assert repr(stats(topic)["subscriptions"]["sub"]["chunkedMessageRate"]) == "0.0"


async def test_msg_delayed_counts_entries_waiting_for_their_time(
    service: tuple[TopicService, _Stats], fake_clock: FakeClock
) -> None:
    topics, stats = service
    topic = await topics.get_topic(topic_name("delayed"))
    producer = await add_producer(topic)
    sink = FakeConsumerSink()
    consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
    consumer.flow(10)
    await publish(topic, producer, b"late", deliver_at_time=_ms(fake_clock) + 5_000)
    await publish(topic, producer, b"now", sequence_id=1)
    await settle()
    sub = stats(topic)["subscriptions"]["sub"]
    assert (sub["msgBacklog"], sub["msgDelayed"], sub["msgBacklogNoDelayed"]) == (2, 1, 1)
    await fake_clock.advance(5.0)
    assert sink.entry_ids == [1, 0]
    sub = stats(topic)["subscriptions"]["sub"]
    assert (sub["msgBacklog"], sub["msgDelayed"], sub["msgBacklogNoDelayed"]) == (2, 0, 2)


async def test_non_persistent_consumers_and_producers_have_counters_too(
    service: tuple[TopicService, _Stats], fake_clock: FakeClock
) -> None:
    topics, stats = service
    topic = await topics.get_topic(topic_name("np", "non-persistent"))
    producer = await add_producer(topic, metadata={"k": "v"})
    sink = FakeConsumerSink()
    consumer = await subscribe(topic, sink, durable=False)
    consumer.flow(5)
    stats(topic)
    await fake_clock.advance(1.0)
    for i in range(3):
        await publish(topic, producer, b"abc", sequence_id=i)
    await fake_clock.advance(1.0)
    doc = stats(topic)
    assert doc["publishers"][0]["metadata"] == {"k": "v"}
    assert doc["publishers"][0]["msgRateIn"] == pytest.approx(1.5)
    (con,) = doc["subscriptions"]["sub"]["consumers"]
    assert con["msgOutCounter"] == 3
    assert con["bytesOutCounter"] == sum(len(m.section) for m in sink.messages)
    assert con["msgRateOut"] == pytest.approx(1.5)
    assert con["lastConsumedTimestamp"] == _ms(fake_clock) - 1_000
    # NonPersistentTopicStats and NonPersistentSubscriptionStats as Pulsar 4.0.7 fills them:
    # no deduplication status, no active consumer's name.
    assert "deduplicationStatus" not in doc
    assert "activeConsumerName" not in doc["subscriptions"]["sub"]


async def test_messages_dropped_for_a_consumer_show_as_the_subscriptions_drop_rate(
    service: tuple[TopicService, _Stats], fake_clock: FakeClock
) -> None:
    topics, stats = service
    topic = await topics.get_topic(topic_name("np-drop", "non-persistent"))
    producer = await add_producer(topic)
    stuck, reading = FakeConsumerSink(), FakeConsumerSink()
    (await subscribe(topic, stuck, subscription="stuck")).flow(100)
    (await subscribe(topic, reading, subscription="reading", consumer_id=2)).flow(100)
    stuck.writable = False
    stats(topic)
    for i in range(6):
        await publish(topic, producer, sequence_id=i)
    await fake_clock.advance(2.0)
    doc = stats(topic)
    assert doc["subscriptions"]["stuck"]["msgDropRate"] == pytest.approx(3.0)
    assert doc["subscriptions"]["reading"]["msgDropRate"] == 0.0
    assert doc["msgDropRate"] == 0.0  # Pulsar leaves the topic's own field at 0
    persistent = await topics.get_topic(topic_name("p-drop"))
    await subscribe(persistent, FakeConsumerSink())
    assert "msgDropRate" not in stats(persistent)["subscriptions"]["sub"]


async def test_active_consumer_name_is_the_single_active_consumer_only(
    service: tuple[TopicService, _Stats],
) -> None:
    topics, stats = service
    name = topic_name("active")
    topic = await topics.get_topic(name)
    for consumer_id, consumer_name in enumerate(["a", "b"]):
        await subscribe(
            topic,
            FakeConsumerSink(),
            subscription="fo",
            consumer_id=consumer_id,
            consumer_name=consumer_name,
            sub_type=SubType.FAILOVER,
        )
        await subscribe(
            topic,
            FakeConsumerSink(),
            subscription="sh",
            consumer_id=10 + consumer_id,
            consumer_name=consumer_name,
            sub_type=SubType.SHARED,
        )
    subscriptions = stats(topic)["subscriptions"]
    # The Failover subscription's active consumer is the one the topic's hash ring picks, not
    # the first to join; a Shared subscription has none (Pulsar leaves the field null).
    assert (
        subscriptions["fo"]["activeConsumerName"] == "ab"[failover_ring_pick(str(name), ["a", "b"])]
    )
    assert subscriptions["sh"]["activeConsumerName"] is None


async def test_replay_set_size_and_readable_times(
    service: tuple[TopicService, _Stats], fake_clock: FakeClock
) -> None:
    # msgInReplay: entries waiting in the dispatcher's replay set; lastAckedTime and
    # lastConsumedTime: the ISO-8601 twins of the epoch-ms timestamps (Pulsar's DateFormatter,
    # ISO_OFFSET_DATE_TIME in the broker's zone; epoch 0 before the first).
    topics, stats = service
    topic = await topics.get_topic(topic_name("replay"))
    producer = await add_producer(topic)
    sink = FakeConsumerSink()
    consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
    before = stats(topic)["subscriptions"]["sub"]
    assert before["msgInReplay"] == 0
    assert _parsed(before["consumers"][0]["lastAckedTime"]) == 0
    consumer.flow(3)
    await topic.publish_many(producer, [make_entry(b"x", sequence_id=i) for i in range(3)])
    await settle()
    await fake_clock.advance(1.25)
    ledger = sink.messages[0].ledger_id
    consumer.ack(AckType.INDIVIDUAL, [mid(ledger, 0)])
    consumer.redeliver([mid(ledger, 1), mid(ledger, 2)])  # no permits left: they wait
    sub = stats(topic)["subscriptions"]["sub"]
    assert sub["msgInReplay"] == 2
    (con,) = sub["consumers"]
    assert _parsed(con["lastAckedTime"]) == con["lastAckedTimestamp"] == _ms(fake_clock)
    assert _parsed(con["lastConsumedTime"]) == con["lastConsumedTimestamp"]
    consumer.flow(2)
    await settle()
    assert stats(topic)["subscriptions"]["sub"]["msgInReplay"] == 0


def _parsed(text: str) -> int:
    """Epoch ms of an ISO_OFFSET_DATE_TIME string (``Z`` or ``+hh:mm``)."""
    assert text[10] == "T", text
    assert text.endswith("Z") or text[-6] in "+-", text
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


async def test_the_compaction_block_reports_the_last_compactions(
    service: tuple[TopicService, _Stats], fake_clock: FakeClock
) -> None:
    topics, stats = service
    topic = await topics.get_topic(topic_name("compacted"))
    zeros = {
        "lastCompactionRemovedEventCount": 0,
        "lastCompactionSucceedTimestamp": 0,
        "lastCompactionFailedTimestamp": 0,
        "lastCompactionDurationTimeInMills": 0,
    }
    assert stats(topic)["compaction"] == zeros  # no compaction service: as Pulsar's never-run
    records = {topic.name: CompactionRecord(3, 1_000, 2_000, 7)}
    stats.view = TopicStatsView(
        topics,
        RateTracker(clock=fake_clock),
        LedgerStore(),
        broker_id="localhost:8080",
        dedup_enabled=lambda _topic: False,
        compaction_record=records.get,
    )
    assert stats(topic)["compaction"] == {
        "lastCompactionRemovedEventCount": 3,
        "lastCompactionSucceedTimestamp": 1_000,
        "lastCompactionFailedTimestamp": 2_000,
        "lastCompactionDurationTimeInMills": 7,
    }
    other = await topics.get_topic(topic_name("never-compacted"))
    assert stats(other)["compaction"] == zeros


@pytest.mark.parametrize("domain", ["persistent", "non-persistent"])
async def test_creation_and_last_publish_times_come_from_the_clock(
    service: tuple[TopicService, _Stats], fake_clock: FakeClock, domain: str
) -> None:
    topics, stats = service
    await fake_clock.advance(3.0)
    created_at = _ms(fake_clock)
    topic = await topics.get_topic(topic_name("times", domain))
    producer = await add_producer(topic)
    await fake_clock.advance(2.0)
    doc = stats(topic)
    assert doc["topicCreationTimeStamp"] == created_at
    assert doc["lastPublishTimeStamp"] == 0  # nothing published yet
    await publish(topic, producer, b"x")
    await settle()
    assert stats(topic)["lastPublishTimeStamp"] == _ms(fake_clock) == created_at + 2_000
