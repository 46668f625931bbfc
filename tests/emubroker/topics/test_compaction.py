"""Compaction: the compacted view (pure) and read_compacted subscriptions of real topics."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from emubroker.storage import MemoryBackend
from emubroker.topics import SubscribeRequest, TopicService, TopicSettings
from emubroker.topics.compacted import Compactor
from emubroker.topics.compaction import (
    CompactionInProgressError,
    CompactionService,
    CompactionStatus,
)
from emubroker.topics.cursor import words_from_mask
from emubroker.topics.entry import entry_info_from_metadata
from protocol.batch import build_batch
from protocol.clock import FakeClock
from protocol.codec import encode_record
from protocol.commands import (
    CompressionType,
    InitialPosition,
    MessageIdData,
    MessageMetadata,
    SingleMessageMetadata,
    SubType,
)
from protocol.errors import NotAllowedError, TopicNotFoundError
from protocol.framing import build_entry, checksum, payload_section
from storage_stub.ledger import LedgerStore
from tests.emubroker.topics.helpers import (
    KNOWN_NAMESPACES,
    FakeConsumerSink,
    add_producer,
    make_entry,
    settle,
    split_section,
    topic_name,
)

pytestmark = pytest.mark.anyio

Message = tuple[str | None, bytes]  # (key, payload); b"" is a tombstone


def single(key: str | None, payload: bytes) -> tuple[bytes, int, Any]:
    return make_entry(payload, key=key)


def batch(
    messages: list[Message], compression: CompressionType | None = None
) -> tuple[bytes, int, Any]:
    body = build_batch(
        [(SingleMessageMetadata(payload_size=len(p), partition_key=k), p) for k, p in messages]
    )
    if compression is CompressionType.ZLIB:
        body = zlib.compress(body)
    elif compression is not None:
        body = b"\x00" * 8  # a codec nobody here can decode
    meta = encode_record(
        MessageMetadata(
            producer_name="p",
            sequence_id=0,
            publish_time=1,
            num_messages_in_batch=len(messages),
            compression=compression,
        )
    )
    entry = build_entry(meta, body)
    return entry, checksum(entry), entry_info_from_metadata(meta, size=len(entry))


def compact(entries: list[tuple[bytes, int, Any]], **kw: Any) -> Any:
    compactor = Compactor(**kw)
    compactor.feed((i, payload_section(e, crc)) for i, (e, crc, _) in enumerate(entries))
    return compactor.result(len(entries))


# ---- the view --------------------------------------------------------------------------------


def test_latest_value_per_key_survives_and_tombstones_delete() -> None:
    view = compact(
        [
            single("a", b"1"),  # 0: overwritten
            single("b", b"1"),  # 1: deleted by 4
            single("a", b"2"),  # 2: latest a
            single(None, b"n"),  # 3: no key
            single("b", b""),  # 4: tombstone
            single("c", b"1"),  # 5: latest c
        ]
    )
    assert view.horizon == 5
    assert view.dropped == frozenset({0, 1, 3, 4})
    assert view.partial == {}
    assert view.last == (5, -1)


def test_retain_null_key_keeps_messages_without_a_key() -> None:
    view = compact([single(None, b"n"), single("a", b"1")], retain_null_key=True)
    assert view.dropped == frozenset()


def test_batches_keep_their_surviving_messages() -> None:
    view = compact(
        [
            batch([("a", b"1"), ("b", b"1"), ("a", b"2")]),  # 0: b and the second a survive
            batch([("c", b"1"), ("c", b"")]),  # 1: c set and deleted in one batch
            batch([("d", b"1"), ("e", b"1")]),  # 2: whole
            single("b", b"2"),  # 3: overwrites b of entry 0
        ]
    )
    assert view.partial == {0: 0b100}
    assert view.dropped == frozenset({1})
    assert view.last == (3, -1)
    tail = compact([single("a", b"1"), batch([("x", b"1"), ("a", b"2"), ("y", b"")])])
    assert tail.last == (1, 1)  # the last survivor inside the last batch
    assert tail.partial == {1: 0b011}  # x and a survive, the tombstone y does not


def test_zlib_batches_are_read_and_unknown_codecs_kept_whole() -> None:
    view = compact(
        [
            batch([("a", b"1"), ("a", b"2")], CompressionType.ZLIB),
            batch([("a", b"3")], CompressionType.LZ4),  # unreadable: kept, sets no key
        ]
    )
    assert view.partial == {0: 0b10}  # a=2 is still the latest a
    assert view.dropped == frozenset()
    assert view.last == (1, 0)


def test_trailing_deletions_stay_after_the_horizon() -> None:
    # Pulsar 4.0.7 ends the compaction at the last message phase one did not delete: the
    # tombstones (and dropped null-key messages) after it reach compacted readers from the topic.
    view = compact(
        [
            single("k1", b"a"),  # 0: overwritten
            single("k2", b"a"),  # 1: latest k2
            single("k1", b"b"),  # 2: latest k1
            single("k3", b"a"),  # 3: deleted by 4, the last message not itself a deletion
            single("k3", b""),  # 4: tombstone, after the horizon
            single(None, b"n"),  # 5: no key, after the horizon
        ]
    )
    assert view.horizon == 3
    assert view.dropped == frozenset({0, 3})
    assert view.last == (2, -1)
    fully_deleted_batch = compact([single("a", b"1"), batch([("a", b""), (None, b"n")])])
    assert (fully_deleted_batch.horizon, fully_deleted_batch.dropped) == (0, frozenset({0}))
    only_deletions = compact([single("a", b""), single(None, b"n")])
    assert (only_deletions.horizon, only_deletions.dropped) == (1, frozenset({0, 1}))


def test_nothing_surviving_and_parse_errors() -> None:
    view = compact([single("a", b"1"), single("a", b"")])
    assert view.last is None
    assert view.dropped == frozenset({0})
    meta, payload = split_section(payload_section(*single("k", b"v")[:2]))
    assert meta.partition_key == "k"
    assert payload == b"v"


# ---- topics ----------------------------------------------------------------------------------


@asynccontextmanager
async def services(
    clock: FakeClock | None = None, **kw: Any
) -> AsyncIterator[tuple[TopicService, CompactionService]]:
    clock = clock or FakeClock()
    service = TopicService(
        config=TopicSettings(**kw),
        clock=clock,
        ledgers=MemoryBackend(LedgerStore()),
        namespaces=KNOWN_NAMESPACES.__contains__,
    )
    compacting = CompactionService(service, clock=clock)
    async with service.running(), compacting.running() as compaction:
        yield service, compaction


async def fill(topic: Any, entries: list[tuple[bytes, int, Any]]) -> None:
    producer = await add_producer(topic)
    await topic.publish_many(producer, entries)


async def compacted_reader(topic: Any, sink: FakeConsumerSink, **kw: Any) -> Any:
    """A consumer from the earliest entry; a read_compacted reader unless told otherwise."""
    args: dict[str, Any] = {
        "subscription": "r",
        "sub_type": SubType.EXCLUSIVE,
        "consumer_id": 1,
        "consumer_name": "c",
        "durable": False,
        "initial_position": InitialPosition.EARLIEST,
        "start_message_id": MessageIdData(ledger_id=-1, entry_id=-1),
        "priority_level": 0,
        "key_shared_meta": None,
        "read_compacted": True,
    }
    args.update(kw)
    if args["durable"]:
        args["start_message_id"] = None
    return await topic.subscribe(SubscribeRequest(**args), sink)


async def test_read_compacted_consumers_see_the_compacted_view() -> None:
    async with services() as (service, compaction):
        name = topic_name("c1")
        topic: Any = await service.get_topic(name)
        assert compaction.status(name).status is CompactionStatus.NOT_RUN
        await fill(
            topic,
            [
                single("a", b"1"),
                batch([("a", b"2"), ("b", b"1"), ("b", b"2")]),
                single("b", b""),
                single("c", b"1"),
            ],
        )
        await compaction.trigger(name)
        assert compaction.status(name).status is CompactionStatus.RUNNING
        with pytest.raises(CompactionInProgressError):
            await compaction.trigger(name)
        await settle()
        assert compaction.status(name).status is CompactionStatus.SUCCESS
        assert compaction.status(name).lastError == ""

        sink = FakeConsumerSink()
        reader = await compacted_reader(topic, sink)
        (_last_ledger, last_entry, batch_index), _ = reader.last_message_id()
        assert (last_entry, batch_index) == (3, -1)
        reader.flow(100)
        await settle()
        got = sink.take()
        assert [d.entry_id for d in got] == [1, 3]
        # Only a=2 survives in the batch: the client keeps batch index 0 of 3.
        assert got[0].ack_set == words_from_mask(0b001, 3)
        assert got[1].ack_set == ()
        assert split_section(got[1].section)[0].partition_key == "c"
        # Entries after the horizon reach compacted readers as they are.
        producer = await add_producer(topic, producer_id=9)
        await topic.publish(producer, *single("a", b"3"))
        await settle()
        assert [d.entry_id for d in sink.take()] == [4]
        assert reader.last_message_id()[0][1] == 4
        # A plain reader still sees everything.
        plain = FakeConsumerSink()
        raw = await compacted_reader(topic, plain, subscription="raw", read_compacted=False)
        raw.flow(100)
        await settle()
        assert [d.entry_id for d in plain.messages] == [0, 1, 2, 3, 4]


async def test_a_running_reader_switches_to_a_new_view_and_reads_nothing_removed() -> None:
    async with services() as (service, compaction):
        name = topic_name("c2")
        topic: Any = await service.get_topic(name)
        sink = FakeConsumerSink()
        reader = await compacted_reader(topic, sink)  # before any compaction: sees all
        await fill(topic, [single("a", b"1"), single("a", b"2"), single("a", b"")])
        assert reader.last_message_id()[0][1] == 2
        view = await compaction.compact(topic)
        assert view.last is None
        # Every value is compacted away; the closing tombstone is after the horizon (rule 4).
        assert reader.last_message_id()[0][1] == 2
        reader.flow(10)
        await settle()
        assert sink.entry_ids == [2]
        only_deletions = await service.get_topic(topic_name("c2-deletions"))
        again = FakeConsumerSink()
        reader = await compacted_reader(only_deletions, again)
        await fill(only_deletions, [single("a", b""), single(None, b"n")])
        assert (await compaction.compact(only_deletions)).last is None
        # Nothing but deletions: all covered, the reader is told there is no message at all.
        assert reader.last_message_id()[0][1] == -1
        reader.flow(10)
        await settle()
        assert again.messages == []


async def test_compaction_survives_unload_and_applies_to_durable_subscriptions() -> None:
    async with services() as (service, compaction):
        name = topic_name("c3")
        topic: Any = await service.get_topic(name)
        await fill(topic, [single("k", b"1"), single("k", b"2")])
        await compaction.compact(topic)
        await service.unload(name)
        reloaded: Any = await service.get_topic(name)
        assert reloaded.compacted is not None
        sink = FakeConsumerSink()
        consumer = await compacted_reader(
            reloaded, sink, subscription="durable", durable=True, sub_type=SubType.FAILOVER
        )
        consumer.flow(10)
        await settle()
        assert [d.entry_id for d in sink.messages] == [1]


async def test_rules_and_errors() -> None:
    async with services() as (service, compaction):
        name = topic_name("c4")
        topic: Any = await service.get_topic(name)
        with pytest.raises(NotAllowedError, match="failover or exclusive"):
            await compacted_reader(topic, FakeConsumerSink(), sub_type=SubType.SHARED)
        with pytest.raises(TopicNotFoundError):
            await compaction.trigger(topic_name("missing"))
        np_name = topic_name("np", domain="non-persistent")
        await service.get_topic(np_name)
        with pytest.raises(NotAllowedError, match="not persistent"):
            await compaction.trigger(np_name)
        # A stored entry that is not a payload section: the run ends in ERROR.
        producer = await add_producer(topic)
        _, _, info = single("a", b"1")
        await topic.publish(producer, b"\x00\x00\x00\x09garbage!!", None, info)
        await compaction.trigger(name)
        await settle()
        status = compaction.status(name)
        assert status.status is CompactionStatus.ERROR
        assert status.lastError


async def test_the_last_compaction_is_recorded_for_topic_stats() -> None:
    # Pulsar's CompactionRecord: removed events (a value replaced, a tombstone, a keyless
    # message dropped), the last success's and failure's times, the last success's duration.
    clock = FakeClock()
    async with services(clock=clock) as (service, compaction):
        name = topic_name("rec")
        topic: Any = await service.get_topic(name)
        assert compaction.record(name) is None
        values = [("a", b"1"), ("a", b"2"), ("b", b"1"), ("b", b""), (None, b"n"), ("c", b"1")]
        await fill(topic, [single(key, value) for key, value in values])
        await clock.advance(2.0)
        await compaction.compact(topic)
        record = compaction.record(name)
        assert record is not None
        assert (record.removed_events, record.succeed_ms, record.failed_ms) == (
            3,
            clock.wall_ms(),
            0,
        )
        assert record.duration_ms == 0  # no virtual time passed during the run
        producer = await add_producer(topic, producer_id=9)
        _, _, info = single("a", b"1")
        await topic.publish(producer, b"\x00\x00\x00\x09garbage!!", None, info)
        await clock.advance(1.0)
        await compaction.trigger(name)
        await settle()
        failed = compaction.record(name)
        assert failed is not None
        assert (failed.failed_ms, failed.succeed_ms) == (clock.wall_ms(), record.succeed_ms)
        assert failed.removed_events == 3  # the last success's


async def test_partitioned_topics_compact_every_partition() -> None:
    async with services() as (service, compaction):
        name = topic_name("parts")
        await service.create_partitioned_topic(name, 2)
        for i in range(2):
            part: Any = await service.get_topic(name.partition(i))
            await fill(part, [single("k", b"1"), single("k", b"2")])
        await compaction.trigger(name)
        assert compaction.status(name).status is CompactionStatus.RUNNING
        await settle()
        assert compaction.status(name).status is CompactionStatus.SUCCESS
        for i in range(2):
            part = await service.get_topic(name.partition(i))
            assert part.compacted.dropped == frozenset({0})


async def test_a_long_topic_is_compacted_in_ranges_without_blocking() -> None:
    async with services() as (service, compaction):
        name = topic_name("long")
        topic: Any = await service.get_topic(name)
        await fill(topic, [single(f"k{i % 7}", b"v") for i in range(1200)])
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            view = await compaction.compact(topic)
            tg.cancel_scope.cancel()
        assert ticks >= 2  # the event loop ran during compaction
        assert len(view.dropped) == 1200 - 7
