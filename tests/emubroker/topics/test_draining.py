"""Key_Shared draining hashes: the pure tracker, then the dispatcher keeping per-key order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from emubroker.topics.draining import DrainingHashes
from emubroker.topics.keyshared import AutoSplitSelector, sticky_key_hash
from emubroker.topics.settings import TopicSettings
from protocol.commands import AckType, KeySharedMeta, KeySharedMode, SubType
from protocol.errors import ConsumerBusyError
from tests.emubroker.topics.helpers import (
    Delivery,
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

# ---- the tracker (pure) -----------------------------------------------------------------------


@dataclass(eq=False)
class Holder:
    name: str
    pending: dict[int, int] = field(default_factory=dict)


def test_a_draining_hash_blocks_others_until_its_entries_are_gone() -> None:
    a, b = Holder("a", {1: 1, 5: 1, 9: 1}), Holder("b")
    tracker: DrainingHashes[Holder] = DrainingHashes()
    assert tracker.add(a, 42, 1)
    assert tracker.add(a, 42, 5)
    assert tracker.blocks(b, 42)
    assert not tracker.blocks(b, 43)  # another hash: not draining
    assert tracker.statistics() == {42: (a, 2)}
    del a.pending[5]  # acked
    assert tracker.blocks(b, 42)
    assert tracker.statistics() == {42: (a, 1)}
    assert tracker.summary() == {a: (1, 1, 0)}  # one hash, one message, none cleared
    del a.pending[1]  # redelivered, released or acked: gone from pending either way
    assert not tracker.blocks(b, 42)
    assert len(tracker) == 0
    assert tracker.statistics() == {}
    assert (tracker.summary(), tracker.cleared_total) == ({a: (0, 0, 1)}, 1)


def test_a_hash_drains_for_one_consumer_and_its_own_ask_ends_it() -> None:
    a, b, c = Holder("a", {1: 1}), Holder("b", {2: 1}), Holder("c")
    tracker: DrainingHashes[Holder] = DrainingHashes()
    assert tracker.add(a, 7, 1)
    assert not tracker.add(b, 7, 2)  # rule 1: the first holder keeps it
    assert tracker.blocks(c, 7)
    assert not tracker.blocks(a, 7)  # moved back to its draining consumer
    assert not tracker.blocks(c, 7)
    tracker.add(a, 7, 1)
    tracker.clear()
    assert not tracker.blocks(c, 7)


def test_reassign_drains_exactly_the_pending_entries_whose_hash_moved() -> None:
    a, b = Holder("a", {0: 1, 1: 1, 2: 1}), Holder("b", {3: 1})
    hashes = {0: 10, 1: 20, 2: 20, 3: 30}
    owners = {10: a, 20: b, 30: a}
    tracker: DrainingHashes[Holder] = DrainingHashes()
    tracker.reassign([a, b], owners.get, hashes.__getitem__)
    assert tracker.statistics() == {20: (a, 2), 30: (b, 1)}
    tracker.reassign([a, b], owners.get, hashes.__getitem__)  # again: nothing counted twice
    assert tracker.statistics() == {20: (a, 2), 30: (b, 1)}
    owners[20] = a  # given back
    tracker.reassign([a, b], owners.get, hashes.__getitem__)
    assert tracker.statistics() == {30: (b, 1)}
    del b.pending[3]
    assert tracker.statistics() == {}
    assert tracker.summary() == {b: (0, 0, 1)}
    tracker.reassign([a], owners.get, hashes.__getitem__)  # b left: its count goes
    assert (tracker.summary(), tracker.cleared_total) == ({}, 1)


# ---- the dispatcher ---------------------------------------------------------------------------

KEYS = [f"k{i}" for i in range(20)]
KS = SubType.KEY_SHARED


def moved_keys() -> list[str]:
    """The keys a consumer named "b" takes from "a" when it joins (AUTO_SPLIT ring)."""
    ring: AutoSplitSelector[str] = AutoSplitSelector(TopicSettings().key_shared_hash_points)
    ring.add("a", "a", ())
    ring.add("b", "b", ())
    moved = [k for k in KEYS if ring.select(sticky_key_hash(k.encode())) == "b"]
    assert moved
    assert len(moved) < len(KEYS)
    return moved


def keyed(messages: list[Delivery]) -> list[tuple[str, bytes]]:
    out = []
    for m in messages:
        meta, payload = split_section(m.section)
        out.append((meta.partition_key or "", payload))
    return out


async def joined_while_a_holds(service: Any, meta: KeySharedMeta | None = None) -> Any:
    """Consumer "a" holds one unacked entry of every key; "b" joins; a second round is published."""
    topic = await service.get_topic(topic_name())
    producer = await add_producer(topic)
    sa, sb = FakeConsumerSink(), FakeConsumerSink()
    a = await subscribe(
        topic, sa, consumer_id=1, consumer_name="a", sub_type=KS, key_shared_meta=meta
    )
    a.flow(1000)
    for k in KEYS:
        await publish(topic, producer, b"1-" + k.encode(), key=k)
    await settle()
    held = sa.take()
    assert len(held) == len(KEYS)
    b = await subscribe(
        topic, sb, consumer_id=2, consumer_name="b", sub_type=KS, key_shared_meta=meta
    )
    b.flow(1000)
    for k in KEYS:
        await publish(topic, producer, b"2-" + k.encode(), key=k)
    await settle()
    return topic, producer, a, held, sa, sb


@pytest.mark.anyio
async def test_joining_consumer_gets_moved_keys_only_after_the_old_one_acks() -> None:
    moved = moved_keys()
    async with open_service() as service:
        topic, producer, a, held, sa, sb = await joined_while_a_holds(service)
        assert sb.messages == []  # every key of the second round is still held by "a"
        assert sorted(keyed(sa.take())) == sorted(
            (k, b"2-" + k.encode()) for k in KEYS if k not in moved
        )
        for i in range(5):  # keys nobody holds flow to "b" at once
            await publish(topic, producer, b"f", key=f"free{i}")
        await settle()
        free = [k for k, _ in keyed(sb.take())] + [k for k, _ in keyed(sa.take())]
        assert sorted(free) == [f"free{i}" for i in range(5)]
        by_key = {k: m for (k, _), m in zip(keyed(held), held, strict=True)}
        first = by_key[moved[0]]
        a.ack(AckType.INDIVIDUAL, [mid(first.ledger_id, first.entry_id)])
        await settle()
        assert keyed(sb.take()) == [(moved[0], b"2-" + moved[0].encode())]
        a.ack(AckType.INDIVIDUAL, [mid(m.ledger_id, m.entry_id) for m in held])
        await settle()
        rest = sb.take()
        assert keyed(rest) == [(k, b"2-" + k.encode()) for k in moved[1:]]
        assert [m.entry_id for m in rest] == sorted(m.entry_id for m in rest)


@pytest.mark.anyio
async def test_negative_ack_by_the_old_consumer_hands_the_key_over_in_order() -> None:
    moved = moved_keys()
    async with open_service() as service:
        _, _, a, held, _, sb = await joined_while_a_holds(service)
        first = {k: m for (k, _), m in zip(keyed(held), held, strict=True)}[moved[0]]
        a.redeliver([mid(first.ledger_id, first.entry_id)])
        await settle()
        key = moved[0].encode()
        assert keyed(sb.take()) == [(moved[0], b"1-" + key), (moved[0], b"2-" + key)]


@pytest.mark.anyio
async def test_old_consumer_leaving_hands_its_keys_over_in_order() -> None:
    async with open_service() as service:
        _, _, a, _, _, sb = await joined_while_a_holds(service)
        await a.close()  # everything "a" held (all of round 1, its keys of round 2) goes to "b"
        await settle()
        got = keyed(sb.take())
        for k in KEYS:
            assert [p for key, p in got if key == k] == [b"1-" + k.encode(), b"2-" + k.encode()]


@pytest.mark.anyio
async def test_allow_out_of_order_delivery_does_not_block_moved_keys() -> None:
    moved = moved_keys()
    meta = KeySharedMeta(key_shared_mode=KeySharedMode.AUTO_SPLIT, allow_out_of_order_delivery=True)
    async with open_service() as service:
        topic, *_, sb = await joined_while_a_holds(service, meta)
        assert sorted(keyed(sb.messages)) == sorted((k, b"2-" + k.encode()) for k in moved)
        with pytest.raises(ConsumerBusyError, match="out of order"):
            await subscribe(topic, FakeConsumerSink(), consumer_id=3, sub_type=KS)


@pytest.mark.anyio
async def test_stats_count_draining_hashes_per_consumer_and_subscription() -> None:
    moved = moved_keys()
    async with open_service() as service:
        topic, _, a, held, _, _ = await joined_while_a_holds(service)
        (sub,) = topic.stats().subscriptions
        by_name = {c.name: c.draining for c in sub.consumer_stats}
        # "a" drains every moved key's hash with one pending message each; nothing cleared.
        assert by_name == {"a": (len(moved), len(moved), 0), "b": (0, 0, 0)}
        assert sub.draining == (len(moved), len(moved), 0)
        a.ack(AckType.INDIVIDUAL, [mid(m.ledger_id, m.entry_id) for m in held])
        await settle()
        (sub,) = topic.stats().subscriptions
        assert {c.name: c.draining for c in sub.consumer_stats}["a"] == (0, 0, len(moved))
        assert sub.draining == (0, 0, len(moved))
