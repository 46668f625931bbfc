from __future__ import annotations

import pytest

from emubroker.topics.keyshared import HASH_RANGE_SIZE, sticky_key_hash
from emubroker.topics.pickers import FAILOVER_RING_POINTS, failover_ring_pick
from protocol.clock import FakeClock
from protocol.commands import AckType, IntRange, KeySharedMeta, KeySharedMode, SubType
from protocol.errors import ConsumerAssignError, ConsumerBusyError, NotAllowedError
from tests.emubroker.topics.helpers import (
    FakeConsumerSink,
    add_producer,
    mid,
    open_service,
    publish,
    settle,
    split_section,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


async def test_nothing_is_delivered_before_flow_and_message_ids_are_the_receipts() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        receipts = [await publish(topic, producer, b"m%d" % i) for i in range(3)]
        await settle()
        assert sink.messages == []
        consumer.flow(10)
        await settle()
        assert [(m.ledger_id, m.entry_id) for m in sink.messages] == receipts
        assert all(m.partition == -1 and m.redelivery_count == 0 for m in sink.messages)
        assert all(m.section.endswith(b"m%d" % i) for i, m in enumerate(sink.messages))


async def test_permits_count_messages_and_a_batch_may_overshoot() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        await publish(topic, producer, batch=5)
        await publish(topic, producer)
        consumer.flow(3)
        await settle()
        assert sink.entry_ids == [0]  # 3 permits > 0: the batch of 5 goes, permits now -2
        consumer.flow(2)
        await settle()
        assert sink.entry_ids == [0]  # back to 0: still nothing
        consumer.flow(1)
        await settle()
        assert sink.entry_ids == [0, 1]


async def test_a_run_to_one_consumer_stops_where_its_permits_run_out() -> None:
    # The run of new entries to a single active consumer (``Dispatcher._send_run``): each
    # entry goes while permits are left before it, as one by one.
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        for batch in (3, 3, 3, 1):
            await publish(topic, producer, batch=batch)
        consumer.flow(7)
        await settle()
        assert sink.entry_ids == [0, 1, 2]  # 7 -> 4 -> 1 -> -2
        assert (consumer.permits, consumer.unacked, consumer.msg_out) == (-2, 9, 9)
        assert consumer.pending == {0: 3, 1: 3, 2: 3}
        consumer.flow(3)
        await settle()
        assert sink.entry_ids == [0, 1, 2, 3]
        assert (consumer.permits, consumer.unacked, consumer.pending[3]) == (0, 10, 1)


async def test_partition_index_is_set_on_partition_topics() -> None:
    async with open_service() as service:
        await service.create_partitioned_topic(topic_name("p"), 3)
        topic = await service.get_topic(topic_name("p-partition-2"))
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1)
        await publish(topic, producer)
        await settle()
        assert sink.messages[0].partition == 2


async def test_second_exclusive_consumer_and_type_mismatch_are_busy() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        await subscribe(topic, FakeConsumerSink(), consumer_id=1)
        with pytest.raises(ConsumerBusyError, match="Exclusive"):
            await subscribe(topic, FakeConsumerSink(), consumer_id=2)
        with pytest.raises(ConsumerBusyError, match="type"):
            await subscribe(topic, FakeConsumerSink(), consumer_id=3, sub_type=SubType.SHARED)
        with pytest.raises(NotAllowedError, match="durable"):
            await subscribe(topic, FakeConsumerSink(), consumer_id=4, durable=False)


async def test_type_may_change_once_the_consumers_are_gone() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        first = await subscribe(topic, FakeConsumerSink(), consumer_id=1)
        await first.close()
        shared = await subscribe(topic, FakeConsumerSink(), consumer_id=2, sub_type=SubType.SHARED)
        assert not shared.closed


async def test_shared_round_robins_over_consumers_with_permits() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sinks = [FakeConsumerSink() for _ in range(3)]
        consumers = [
            await subscribe(topic, s, consumer_id=i, sub_type=SubType.SHARED)
            for i, s in enumerate(sinks)
        ]
        for c in consumers[:2]:
            c.flow(100)
        for i in range(6):
            await publish(topic, producer, b"%d" % i)
        await settle()
        assert sinks[0].entry_ids == [0, 2, 4]
        assert sinks[1].entry_ids == [1, 3, 5]
        assert sinks[2].entry_ids == []  # no permits, nothing


async def test_shared_respects_max_unacked_per_consumer() -> None:
    async with open_service(max_unacked_messages_per_consumer=2) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
        consumer.flow(100)
        for _ in range(4):
            await publish(topic, producer)
        await settle()
        assert sink.entry_ids == [0, 1]
        consumer.ack(AckType.INDIVIDUAL, [mid(sink.messages[0].ledger_id, 0)])
        await settle()
        assert sink.entry_ids == [0, 1, 2]


async def test_a_blocked_consumer_unblocks_at_half_the_limit_or_on_redelivery() -> None:
    # Pulsar's Consumer: blocked once a send reaches maxUnackedMessagesPerConsumer, unblocked
    # when an ack takes it down to half of it, or when it asks for redelivery.
    async with open_service(max_unacked_messages_per_consumer=4) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink, sub_type=SubType.SHARED)
        consumer.flow(100)
        ids = [await publish(topic, producer, b"%d" % i) for i in range(12)]
        await settle()
        assert sink.entry_ids == [0, 1, 2, 3]
        consumer.ack(AckType.INDIVIDUAL, [mid(*ids[0])])
        await settle()
        assert sink.entry_ids == [0, 1, 2, 3]  # 3 unacked: above half, still blocked
        consumer.ack(AckType.INDIVIDUAL, [mid(*ids[1])])
        await settle()
        assert sink.entry_ids == [0, 1, 2, 3, 4, 5]  # down to 2: refilled up to the limit
        consumer.redeliver([mid(*ids[2])])
        await settle()
        assert sink.entry_ids[6:] == [2]  # asking for redelivery unblocks at once


async def test_failover_picks_by_the_topic_ring_then_priority_and_notifies() -> None:
    # Notices at once (activeConsumerFailoverDelayTimeMillis=0): the picks, not the timing.
    async with open_service(active_consumer_failover_delay=0) as service:
        name = topic_name()
        topic = await service.get_topic(name)
        producer = await add_producer(topic)
        # On a non-partitioned topic the ring, not the names' order, picks among "a" and "b".
        winner = "ab"[failover_ring_pick(str(name), ["a", "b"])]
        loser = "b" if winner == "a" else "a"
        sinks = {"a": FakeConsumerSink(), "b": FakeConsumerSink(), "z": FakeConsumerSink()}
        ids = {"a": 2, "b": 1, "z": 3}
        consumers = {}
        for joiner in (loser, winner):  # the winner joins second and still takes over
            consumers[joiner] = await subscribe(
                topic,
                sinks[joiner],
                consumer_id=ids[joiner],
                consumer_name=joiner,
                sub_type=SubType.FAILOVER,
            )
        assert sinks[loser].active_changes == [(ids[loser], True), (ids[loser], False)]
        assert sinks[winner].active_changes == [(ids[winner], True)]
        consumers["z"] = await subscribe(
            topic,
            sinks["z"],
            consumer_id=3,
            consumer_name="z",
            sub_type=SubType.FAILOVER,
            priority_level=-1,
        )
        assert sinks["z"].active_changes == [(3, True)]  # a better priority level wins
        assert sinks[winner].active_changes[-1] == (ids[winner], False)
        for c in consumers.values():
            c.flow(10)
        await publish(topic, producer)
        await settle()
        assert [sinks[n].entry_ids for n in "abz"] == [[], [], [0]]
        await consumers["z"].close()
        await settle()
        # z's unacked entry goes to the new active consumer (uncounted: single active).
        assert sinks[winner].entry_ids == [0]
        assert sinks[winner].messages[0].redelivery_count == 0
        assert sinks[winner].active_changes[-1] == (ids[winner], True)


async def test_failover_change_is_told_after_the_delay_and_a_no_change_join_at_once() -> None:
    # Pulsar's scheduleReadOnActiveConsumer: a change of the active consumer is told
    # activeConsumerFailoverDelayTimeMillis (1 s) later, so after the SUBSCRIBE's SUCCESS; a
    # consumer whose join changes nothing hears its state at once (addConsumer).
    clock = FakeClock()
    async with open_service(clock) as service:
        await service.create_partitioned_topic(topic_name("fd"), 2)
        topic = await service.get_topic(topic_name("fd-partition-0"))
        first, second = FakeConsumerSink(), FakeConsumerSink()
        await subscribe(topic, first, consumer_id=1, consumer_name="a", sub_type=SubType.FAILOVER)
        await settle()
        assert first.active_changes == []
        await clock.advance(0.9)
        assert first.active_changes == []
        await clock.advance(0.1)
        assert first.active_changes == [(1, True)]
        # Partition 0 of two consumers "a" and "b" stays with "a": b hears at once.
        await subscribe(topic, second, consumer_id=2, consumer_name="b", sub_type=SubType.FAILOVER)
        assert second.active_changes == [(2, False)]
        # A better priority level takes over: both hear it a second later, once.
        third = FakeConsumerSink()
        await subscribe(
            topic,
            third,
            consumer_id=3,
            consumer_name="c",
            sub_type=SubType.FAILOVER,
            priority_level=-1,
        )
        await settle()
        assert third.active_changes == []
        await clock.advance(1.0)
        assert first.active_changes == [(1, True), (1, False)]
        assert second.active_changes == [(2, False), (2, False)]
        assert third.active_changes == [(3, True)]


def test_failover_ring_spreads_topics_over_consumers_by_name() -> None:
    names = ["a", "b", "c"]
    picks = [failover_ring_pick(f"persistent://public/default/t{i}", names) for i in range(300)]
    shares = [picks.count(i) / len(picks) for i in range(len(names))]
    assert all(0.15 < share < 0.55 for share in shares), shares
    assert failover_ring_pick("persistent://public/default/t0", ["only"]) == 0


def test_failover_ring_follows_pulsars_ring_lookup() -> None:
    # The same rule computed another way: the consumer owning the lowest point at or after the
    # topic's hash, else the lowest point of all; a point two consumers share is the later's.
    def reference(topic: str, names: list[str]) -> int:
        owners = {}
        for i, name in enumerate(names):
            for j in range(FAILOVER_RING_POINTS):
                owners[sticky_key_hash((name + str(j)).encode())] = i
        target = sticky_key_hash(topic.encode())
        after = [point for point in owners if point >= target]
        return owners[min(after) if after else min(owners)]

    for i in range(50):
        topic = f"persistent://public/default/ring-{i}"
        names = [f"consumer-{k}" for k in range(1 + i % 4)]
        assert failover_ring_pick(topic, names) == reference(topic, names)


async def test_failover_on_a_partition_uses_partition_modulo_consumers() -> None:
    async with open_service(active_consumer_failover_delay=0) as service:
        await service.create_partitioned_topic(topic_name("fp"), 4)
        topic = await service.get_topic(topic_name("fp-partition-3"))
        sinks = {}
        for i, name in enumerate(["c0", "c1"]):
            sinks[name] = FakeConsumerSink()
            await subscribe(
                topic, sinks[name], consumer_id=i, consumer_name=name, sub_type=SubType.FAILOVER
            )
        # 3 % 2 == 1: the second consumer in name order is active.
        assert sinks["c1"].active_changes[-1] == (1, True)
        assert sinks["c0"].active_changes[-1] == (0, False)
        # Only the best priority level takes part: one consumer there is active on every partition.
        sinks["low"] = FakeConsumerSink()
        await subscribe(
            topic,
            sinks["low"],
            consumer_id=2,
            consumer_name="low",
            sub_type=SubType.FAILOVER,
            priority_level=-1,
        )
        assert sinks["low"].active_changes[-1] == (2, True)
        assert sinks["c1"].active_changes[-1] == (1, False)


async def test_key_shared_sends_one_key_to_one_consumer() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sinks = [FakeConsumerSink() for _ in range(3)]
        for i, s in enumerate(sinks):
            c = await subscribe(topic, s, consumer_id=i, sub_type=SubType.KEY_SHARED)
            c.flow(1000)
        keys = [f"k{i}" for i in range(20)]
        for round_ in range(3):
            for key in keys:
                await publish(topic, producer, f"{key}-{round_}".encode(), key=key)
        await publish(topic, producer, b"no key")
        await settle()
        owner: dict[str, int] = {}
        delivered = 0
        for i, s in enumerate(sinks):
            for m in s.messages:
                meta, payload = split_section(m.section)
                key = meta.partition_key or ""
                assert payload.startswith(key.encode())
                delivered += 1
                assert owner.setdefault(key, i) == i, "one key went to two consumers"
        assert delivered == 61
        assert sum(1 for s in sinks if s.messages) > 1


async def test_key_shared_without_consistent_hashing_splits_the_hash_range() -> None:
    # subscriptionKeySharedUseConsistentHashing=false: the first consumer owns every slot, the
    # second the lower half, the third the lowest quarter (Pulsar's auto-split hash ranges).
    async with open_service(key_shared_use_consistent_hashing=False) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sinks = [FakeConsumerSink() for _ in range(3)]
        for i, s in enumerate(sinks):
            c = await subscribe(topic, s, consumer_id=i, sub_type=SubType.KEY_SHARED)
            c.flow(1000)
        keys = [f"key-{i}" for i in range(40)]
        for key in keys:
            await publish(topic, producer, key.encode(), key=key)
        await settle()
        got = {
            split_section(m.section)[1].decode(): i for i, s in enumerate(sinks) for m in s.messages
        }
        for key in keys:
            slot = sticky_key_hash(key.encode()) % HASH_RANGE_SIZE or 1
            expected = 2 if slot <= 16384 else 1 if slot <= 32768 else 0
            assert got[key] == expected, key


async def test_key_shared_blocked_consumer_does_not_block_other_keys() -> None:
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        low, high = FakeConsumerSink(), FakeConsumerSink()
        half = HASH_RANGE_SIZE // 2
        sticky = KeySharedMode.STICKY
        c_low = await subscribe(
            topic,
            low,
            consumer_id=1,
            sub_type=SubType.KEY_SHARED,
            key_shared_meta=KeySharedMeta(
                key_shared_mode=sticky, hash_ranges=(IntRange(start=0, end=half - 1),)
            ),
        )
        c_high = await subscribe(
            topic,
            high,
            consumer_id=2,
            sub_type=SubType.KEY_SHARED,
            key_shared_meta=KeySharedMeta(
                key_shared_mode=sticky, hash_ranges=(IntRange(start=half, end=HASH_RANGE_SIZE - 1),)
            ),
        )
        keys = [f"key{i}" for i in range(40)]
        low_keys = [k for k in keys if sticky_key_hash(k.encode()) % HASH_RANGE_SIZE < half]
        high_keys = [k for k in keys if k not in low_keys]
        assert low_keys
        assert high_keys
        c_high.flow(100)  # the low consumer has no permits
        for key in keys:
            await publish(topic, producer, key=key)
        await settle()
        assert len(high.messages) == len(high_keys)
        assert low.messages == []
        c_low.flow(100)
        await settle()
        assert len(low.messages) == len(low_keys)
        assert low.entry_ids == sorted(low.entry_ids)  # parked entries keep their order
        with pytest.raises(ConsumerAssignError, match="overlaps"):
            await subscribe(
                topic,
                FakeConsumerSink(),
                consumer_id=3,
                sub_type=SubType.KEY_SHARED,
                key_shared_meta=KeySharedMeta(
                    key_shared_mode=sticky, hash_ranges=(IntRange(start=10, end=20),)
                ),
            )
        with pytest.raises(ConsumerBusyError, match="Key_Shared mode"):
            await subscribe(topic, FakeConsumerSink(), consumer_id=4, sub_type=SubType.KEY_SHARED)


async def test_deep_backlog_spans_rounds_reads_and_ledgers_in_order() -> None:
    async with open_service(
        dispatcher_max_read_batch_size=3, managed_ledger_max_entries_per_ledger=4
    ) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        # Subscribed first: closed ledgers no subscription holds are trimmed as they close.
        consumer = await subscribe(topic, sink)
        receipts = [await publish(topic, producer, b"%d" % i) for i in range(50)]
        assert len({ledger for ledger, _ in receipts}) == 13  # rolled over every 4 entries
        assert receipts == sorted(receipts)
        consumer.flow(100)
        await settle()
        assert [(m.ledger_id, m.entry_id) for m in sink.messages] == receipts
        assert [split_section(m.section)[1] for m in sink.messages] == [
            b"%d" % i for i in range(50)
        ]
        ledger_id, entry_id = receipts[-1]
        assert consumer.last_message_id()[0] == (ledger_id, entry_id, -1)
        consumer.ack(AckType.CUMULATIVE, [mid(*receipts[20])])
        assert consumer.last_message_id()[1] == receipts[20]


async def test_a_flow_or_ack_with_nothing_to_read_runs_no_round_and_loses_nothing() -> None:
    # A consumer that keeps up sends FLOWs and ACKs while every entry is already out: the round
    # they asked for found nothing to do and cost the dispatcher task a step each.
    async with open_service() as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        dispatcher = topic.subscription("sub").dispatcher
        rounds = 0
        dispatch = dispatcher.dispatch

        def counted() -> None:
            nonlocal rounds
            rounds += 1
            dispatch()

        dispatcher.dispatch = counted
        consumer.flow(10)
        await settle()
        receipt = await publish(topic, producer, b"m0")
        await settle()
        assert sink.entry_ids == [receipt[1]]
        before = rounds
        consumer.flow(10)
        consumer.ack(AckType.INDIVIDUAL, [mid(*receipt)])
        await settle()
        assert rounds == before  # nothing to read: no round
        # Entries published afterwards still go out: the publish dispatches them itself.
        receipts = [await publish(topic, producer, b"m%d" % i) for i in range(1, 4)]
        await settle()
        assert sink.entry_ids == [receipt[1]] + [entry for _, entry in receipts]
