"""Memory mode trims ledgers every subscription has consumed, as Pulsar trims them."""

from __future__ import annotations

from typing import Any

import pytest

from emubroker.policies import Policies
from emubroker.topics.compacted import Compactor
from protocol.commands import AckType
from protocol.ids import EARLIEST
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

PER_LEDGER = 4


async def _publish(topic: Any, n: int, producer_id: int = 1) -> list[tuple[int, int]]:
    producer = await add_producer(topic, producer_id=producer_id)
    return [await publish(topic, producer, b"%d" % i) for i in range(n)]


async def test_without_subscriptions_every_closed_ledger_goes_as_it_closes() -> None:
    async with open_service(managed_ledger_max_entries_per_ledger=PER_LEDGER) as service:
        topic = await service.get_topic(topic_name())
        ids = await _publish(topic, 10)
        # Entries 8 and 9 are in the current ledger; the two closed ones were trimmed.
        assert topic.ledger.ledger_ids == (ids[-1][0],)
        assert topic.ledger.first_index == 8
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(100)
        await settle()
        assert [(m.ledger_id, m.entry_id) for m in sink.messages] == ids[8:]


async def test_the_slowest_subscription_holds_ledgers_until_it_acks_past_them() -> None:
    async with open_service(managed_ledger_max_entries_per_ledger=PER_LEDGER) as service:
        topic = await service.get_topic(topic_name())
        fast = await subscribe(topic, FakeConsumerSink(), subscription="fast")
        slow = await subscribe(topic, FakeConsumerSink(), subscription="slow", consumer_id=2)
        ids = await _publish(topic, 10)
        assert len(topic.ledger.ledger_ids) == 3
        fast.ack(AckType.CUMULATIVE, [mid(*ids[9])])
        assert len(topic.ledger.ledger_ids) == 3  # "slow" has consumed nothing
        slow.ack(AckType.CUMULATIVE, [mid(*ids[2])])
        assert len(topic.ledger.ledger_ids) == 3  # not yet the whole first ledger
        slow.ack(AckType.CUMULATIVE, [mid(*ids[5])])
        assert topic.ledger.ledger_ids == (ids[4][0], ids[8][0])
        await slow.unsubscribe()  # the slowest one gone: "fast" has consumed everything closed
        assert topic.ledger.ledger_ids == (ids[8][0],)


async def test_a_reader_holds_what_it_has_not_read() -> None:
    async with open_service(managed_ledger_max_entries_per_ledger=PER_LEDGER) as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink(), subscription="reader", durable=False)
        await _publish(topic, 10)
        assert len(topic.ledger.ledger_ids) == 3


async def test_retention_keeps_consumed_ledgers() -> None:
    retained = Policies(retention_policies={"retentionTimeInMinutes": 60, "retentionSizeInMB": 0})
    async with open_service(
        managed_ledger_max_entries_per_ledger=PER_LEDGER,
        namespace_policies=lambda namespace: retained,
    ) as service:
        topic = await service.get_topic(topic_name())
        await _publish(topic, 10)
        assert len(topic.ledger.ledger_ids) == 3
        assert topic.trim_consumed() == 0


async def test_a_compacted_topic_keeps_its_ledgers() -> None:
    async with open_service(managed_ledger_max_entries_per_ledger=PER_LEDGER) as service:
        topic = await service.get_topic(topic_name())
        await _publish(topic, 2)
        topic.install_compacted(Compactor(retain_null_key=False).result(topic.ledger.count))
        await _publish(topic, 8, producer_id=2)
        assert len(topic.ledger.ledger_ids) == 3


async def test_a_seek_to_the_earliest_after_a_trim_reads_from_the_first_stored_entry() -> None:
    async with open_service(managed_ledger_max_entries_per_ledger=PER_LEDGER) as service:
        topic = await service.get_topic(topic_name())
        consumer = await subscribe(topic, FakeConsumerSink())
        ids = await _publish(topic, 10)
        consumer.ack(AckType.CUMULATIVE, [mid(*ids[9])])
        assert topic.ledger.first_index == 8  # the two closed ledgers were trimmed
        await consumer.seek(message_id=EARLIEST.to_data())
        sink = FakeConsumerSink()
        again = await subscribe(topic, sink)
        again.flow(100)
        await settle()
        assert [(m.ledger_id, m.entry_id) for m in sink.messages] == ids[8:]
