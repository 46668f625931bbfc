from __future__ import annotations

import pytest

from emubroker.topics import NonPersistentTopic
from emubroker.topics.keyshared import HASH_RANGE_SIZE
from emubroker.topics.pickers import key_hash
from protocol.commands import AckType, IntRange, KeySharedMeta, KeySharedMode, SubType
from protocol.errors import ConsumerBusyError, UnknownError
from tests.emubroker.topics.helpers import (
    FakeConsumerSink,
    add_producer,
    make_entry,
    mid,
    open_service,
    publish,
    split_section,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


async def test_delivers_immediately_and_drops_without_permits() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name("np", "non-persistent"))
        assert isinstance(topic, NonPersistentTopic)
        producer = await add_producer(topic)
        ready, starved = FakeConsumerSink(), FakeConsumerSink()
        c1 = await subscribe(topic, ready, subscription="a")
        await subscribe(topic, starved, subscription="b")
        c1.flow(2)
        ids = [await publish(topic, producer, b"%d" % i) for i in range(3)]
        ledger = ids[0][0]
        assert ledger > 0
        assert [e for _, e in ids] == [0, 1, 2]
        # No await needed: delivery happens inside publish.
        assert ready.entry_ids == [0, 1]
        assert starved.messages == []
        stats = topic.stats()
        assert stats.msg_in == 3
        assert stats.msg_out == 2
        assert stats.msg_dropped == 4
        assert topic.last_message_id() == (ledger, 2, -1)
        with pytest.raises(UnknownError, match="not supported on non-persistent"):
            c1.last_message_id()  # GET_LAST_MESSAGE_ID: Pulsar refuses it here


async def test_shared_round_robin_and_subscriptions_end_with_their_consumers() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name("np", "non-persistent"))
        producer = await add_producer(topic)
        sinks = [FakeConsumerSink(), FakeConsumerSink()]
        consumers = [
            await subscribe(topic, s, consumer_id=i, sub_type=SubType.SHARED)
            for i, s in enumerate(sinks)
        ]
        for c in consumers:
            c.flow(10)
        for _ in range(4):
            await publish(topic, producer)
        assert [s.entry_ids for s in sinks] == [[0, 2], [1, 3]]
        with pytest.raises(ConsumerBusyError):
            await subscribe(topic, FakeConsumerSink(), consumer_id=5)
        consumers[0].ack(AckType.INDIVIDUAL, [mid(1, 0)])  # nothing to do, no error
        consumers[0].redeliver(None)
        await consumers[0].seek(message_id=mid(1, 0))  # a no-op that succeeds, as in Pulsar
        assert not consumers[0].closed
        for c in consumers:
            await c.close()
        assert topic.subscriptions() == []


async def test_unload_closes_non_persistent_handlers() -> None:
    async with open_service() as service:
        name = topic_name("np", "non-persistent")
        topic = await service.get_topic(name)
        sink = FakeConsumerSink()
        await subscribe(topic, sink, consumer_id=4)
        await service.unload(name)
        assert sink.closed == [4]
        again = await service.get_topic(name)
        p = await add_producer(again)
        first_ledger = topic.last_message_id()[0]
        assert (await publish(again, p))[0] > first_ledger  # ids keep increasing


async def test_failover_and_key_shared_rules_apply_to_non_persistent_topics() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name("np", "non-persistent"))
        producer = await add_producer(topic)
        b, a = FakeConsumerSink(), FakeConsumerSink()
        cb = await subscribe(topic, b, consumer_id=1, consumer_name="b", sub_type=SubType.FAILOVER)
        ca = await subscribe(topic, a, consumer_id=2, consumer_name="a", sub_type=SubType.FAILOVER)
        # Pulsar's non-persistent single-active dispatcher never tells a change (its
        # scheduleReadOnActiveConsumer does nothing); only a join that changes nothing is told.
        assert b.active_changes == []
        assert a.active_changes == []
        cb.flow(5)
        await publish(topic, producer)  # the active "a" has no permits: dropped
        ca.flow(5)
        await publish(topic, producer)
        assert (a.entry_ids, b.entry_ids) == ([1], [])
        assert topic.stats().msg_dropped == 1

        sinks = [FakeConsumerSink(), FakeConsumerSink()]
        for i, s in enumerate(sinks):
            c = await subscribe(
                topic, s, subscription="ks", consumer_id=10 + i, sub_type=SubType.KEY_SHARED
            )
            c.flow(100)
        for round_ in range(3):
            for k in range(10):
                await publish(topic, producer, b"%d" % round_, key=f"k{k}")
        owners: dict[str, int] = {}
        for i, s in enumerate(sinks):
            for m in s.messages:
                key = split_section(m.section)[0].partition_key or ""
                assert owners.setdefault(key, i) == i
        assert len(owners) == 10


def dropped(topic: NonPersistentTopic) -> dict[str, int]:
    return {sub.name: sub.msg_dropped for sub in topic.stats().subscriptions}


async def test_a_consumer_whose_connection_is_not_writable_loses_what_is_published() -> None:
    # Pulsar's NonPersistentDispatcherSingleActiveConsumer: permits > 0 && isWritable(), else
    # the entry is dropped and counted for that subscription.
    async with open_service() as service:
        topic = await service.get_topic(topic_name("np", "non-persistent"))
        assert isinstance(topic, NonPersistentTopic)
        producer = await add_producer(topic)
        stuck, reading = FakeConsumerSink(), FakeConsumerSink()
        (await subscribe(topic, stuck, subscription="stuck")).flow(1000)
        (await subscribe(topic, reading, subscription="reading", consumer_id=2)).flow(1000)
        stuck.writable = False  # its session has more than the high water mark queued
        for i in range(3):
            await publish(topic, producer, b"%d" % i, batch=2)
        assert (stuck.entry_ids, reading.entry_ids) == ([], [0, 1, 2])
        assert dropped(topic) == {"reading": 0, "stuck": 6}  # messages, batches counted whole
        assert topic.stats().msg_dropped == 6
        stuck.writable = True  # drained below the low water mark
        await publish(topic, producer)
        assert stuck.entry_ids == [3]
        assert dropped(topic)["stuck"] == 6


async def test_shared_and_key_shared_skip_or_drop_for_unwritable_consumers() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name("np", "non-persistent"))
        assert isinstance(topic, NonPersistentTopic)
        producer = await add_producer(topic)
        # Shared: the next consumer that has permits and is writable, else dropped.
        sinks = [FakeConsumerSink(), FakeConsumerSink()]
        for i, sink in enumerate(sinks):
            c = await subscribe(
                topic, sink, subscription="s", consumer_id=i, sub_type=SubType.SHARED
            )
            c.flow(100)
        sinks[0].writable = False
        for _ in range(3):
            await publish(topic, producer)
        assert [s.entry_ids for s in sinks] == [[], [0, 1, 2]]
        sinks[1].writable = False
        await publish(topic, producer)
        assert dropped(topic) == {"s": 1}
        # Key_Shared: the key's consumer or nothing; a key no STICKY range covers is not counted.
        topic.delete_subscription("s", force=True)
        key, other = "k", "other"
        slot = key_hash(make_entry(key=key)[2]) % HASH_RANGE_SIZE  # its STICKY range slot
        assert key_hash(make_entry(key=other)[2]) % HASH_RANGE_SIZE != slot
        meta = KeySharedMeta(
            key_shared_mode=KeySharedMode.STICKY, hash_ranges=(IntRange(start=slot, end=slot),)
        )
        sink = FakeConsumerSink()
        c = await subscribe(
            topic, sink, subscription="ks", sub_type=SubType.KEY_SHARED, key_shared_meta=meta
        )
        c.flow(100)
        await publish(topic, producer, key=key)
        sink.writable = False
        await publish(topic, producer, key=key)  # its consumer cannot take it: dropped
        await publish(topic, producer, key=other)  # nobody's range: released, not counted
        assert sink.entry_ids == [4]
        assert dropped(topic) == {"ks": 1}
