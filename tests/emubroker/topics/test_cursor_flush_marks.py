"""The periodic cursor flush visits the marked topics only (``cursor_flush``), in bookie mode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.metadata.paths import cursor_path
from emubroker.metadata.store import MetadataStoreError
from emubroker.naming import TopicName
from emubroker.storage import BookieBackend
from emubroker.topics import Topic, TopicService
from emubroker.topics.cursor_flush import CursorFlusher
from emubroker.topics.ml_meta import decode_cursor_info
from emubroker.topics.settings import TopicSettings
from protocol.clock import FakeClock
from protocol.commands import AckType
from storage_stub.client import StubClient
from storage_stub.server import open_stub_server
from tests.emubroker.topics.helpers import (
    KNOWN_NAMESPACES,
    FakeConsumerSink,
    add_producer,
    mid,
    publish,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


class _FlakyStore(MemoryMetadataStore):
    """A metadata store whose writes fail while ``failing`` is set."""

    failing = False

    async def put(self, path: str, value: bytes, *args: Any, **kwargs: Any) -> Any:
        if self.failing:
            raise MetadataStoreError("the store is away")
        return await super().put(path, value, *args, **kwargs)


@asynccontextmanager
async def _service(
    clock: FakeClock, **settings: Any
) -> AsyncIterator[tuple[TopicService, _FlakyStore, StubClient]]:
    async with (
        open_stub_server(clock=clock) as stub,
        stub.open_local_client() as bookie,
        _FlakyStore() as metadata,
    ):
        service = TopicService(
            config=TopicSettings(**settings),
            clock=clock,
            ledgers=BookieBackend(bookie),
            namespaces=KNOWN_NAMESPACES.__contains__,
            metadata=metadata,
        )
        async with service.running():
            yield service, metadata, bookie


async def _mark_delete(metadata: MemoryMetadataStore, topic: TopicName, sub: str) -> int | None:
    node = await metadata.get(cursor_path(topic, sub))
    return None if node is None else decode_cursor_info(node.value).mark_delete


async def test_the_periodic_flush_visits_only_the_topics_whose_cursors_changed(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    visited: list[TopicName] = []
    flush = CursorFlusher.flush

    async def spy(self: CursorFlusher, topic: TopicName, state: Any) -> None:
        visited.append(topic)
        await flush(self, topic, state)

    async with _service(fake_clock) as (service, metadata, _):
        names = [topic_name(f"t{i}") for i in range(4)]
        consumers = []
        for name in names:
            topic = await service.get_topic(name)
            await publish(topic, await add_producer(topic))
            consumer = await subscribe(topic, FakeConsumerSink())
            consumer.flow(1)
            consumers.append(consumer)
        await settle()
        await fake_clock.advance(1.0)  # the new subscriptions' round
        monkeypatch.setattr(CursorFlusher, "flush", spy)

        await fake_clock.advance(1.0)
        assert visited == []  # nothing changed: no topic visited

        ledger_id = (await service.get_topic(names[2])).last_message_id()[0]
        consumers[2].ack(AckType.INDIVIDUAL, [mid(ledger_id, 0)])
        await fake_clock.advance(1.0)
        assert visited == [names[2]]
        assert await _mark_delete(metadata, names[2], "sub") == 0
        assert await _mark_delete(metadata, names[1], "sub") == -1

        visited.clear()
        await fake_clock.advance(1.0)
        assert visited == []


async def test_subscriptions_created_and_deleted_reach_the_store_at_the_next_round(
    fake_clock: FakeClock,
) -> None:
    async with _service(fake_clock) as (service, metadata, _):
        name = topic_name()
        topic = await service.get_topic(name)
        assert isinstance(topic, Topic)
        await subscribe(topic, FakeConsumerSink())
        await fake_clock.advance(1.0)
        assert await _mark_delete(metadata, name, "sub") == -1

        topic.create_subscription("made-by-admin", None)  # no consumer, no write of its own
        await fake_clock.advance(1.0)
        assert await _mark_delete(metadata, name, "made-by-admin") == -1

        topic.delete_subscription("sub", force=True)
        await fake_clock.advance(1.0)
        assert await metadata.get(cursor_path(name, "sub")) is None


async def test_a_ledger_that_closes_after_it_was_consumed_is_trimmed_without_another_ack(
    fake_clock: FakeClock,
) -> None:
    # Pulsar trims when a ledger closes: the rollover marks the topic, though no cursor moved.
    async with _service(fake_clock, managed_ledger_max_entries_per_ledger=2) as (
        service,
        _,
        bookie,
    ):
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        first = [await publish(topic, producer) for _ in range(2)]
        consumer = await subscribe(topic, FakeConsumerSink())
        consumer.flow(10)
        await settle()
        consumer.ack(AckType.INDIVIDUAL, [mid(*position) for position in first])
        await fake_clock.advance(1.0)  # the cursor is written; the first ledger is still current
        assert await bookie.ledger_ids() == [first[0][0]]

        later, _ = await publish(topic, producer)  # rolls over: the first ledger closes
        await fake_clock.advance(1.0)
        assert await bookie.ledger_ids() == [later]


async def test_a_topic_whose_flush_failed_is_flushed_again_next_round(
    fake_clock: FakeClock,
) -> None:
    async with _service(fake_clock) as (service, metadata, _):
        name = topic_name()
        topic = await service.get_topic(name)
        ledger_id, _ = await publish(topic, await add_producer(topic))
        consumer = await subscribe(topic, FakeConsumerSink())
        consumer.flow(1)
        await settle()
        await fake_clock.advance(1.0)
        consumer.ack(AckType.INDIVIDUAL, [mid(ledger_id, 0)])
        metadata.failing = True
        await fake_clock.advance(1.0)
        metadata.failing = False
        assert await _mark_delete(metadata, name, "sub") == -1
        await fake_clock.advance(1.0)  # no acknowledgement since: the failure kept the mark
        assert await _mark_delete(metadata, name, "sub") == 0


async def test_a_flusher_with_nothing_marked_does_not_wake(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It sleeps on an alarm that a mark arms, rather than waking every interval to find no mark.
    rounds = 0
    flush_all = CursorFlusher.flush_all

    async def spy(self: CursorFlusher, states: Any) -> None:
        nonlocal rounds
        rounds += 1
        await flush_all(self, states)

    async with _service(fake_clock) as (service, metadata, _):
        name = topic_name()
        topic = await service.get_topic(name)
        ledger_id, _ = await publish(topic, await add_producer(topic))
        consumer = await subscribe(topic, FakeConsumerSink())
        consumer.flow(1)
        await settle()
        await fake_clock.advance(1.0)  # the new subscription's round
        monkeypatch.setattr(CursorFlusher, "flush_all", spy)

        await fake_clock.advance(10.0)
        assert rounds == 0

        consumer.ack(AckType.INDIVIDUAL, [mid(ledger_id, 0)])
        await fake_clock.advance(10.0)
        assert rounds == 1
        assert await _mark_delete(metadata, name, "sub") == 0


async def test_a_change_after_a_quiet_interval_is_written_at_once_the_next_after_the_interval(
    fake_clock: FakeClock,
) -> None:
    # managedLedgerDefaultMarkDeleteRateLimit: at most a round per interval, the first at once.
    async with _service(fake_clock) as (service, metadata, _):
        name = topic_name()
        topic = await service.get_topic(name)
        producer = await add_producer(topic)
        positions = [await publish(topic, producer) for _ in range(2)]
        consumer = await subscribe(topic, FakeConsumerSink())
        consumer.flow(2)
        await settle()
        await fake_clock.advance(5.0)  # the new subscription's round, then quiet

        consumer.ack(AckType.INDIVIDUAL, [mid(*positions[0])])
        await fake_clock.advance(0.0)
        assert await _mark_delete(metadata, name, "sub") == 0  # at once

        consumer.ack(AckType.INDIVIDUAL, [mid(*positions[1])])
        await fake_clock.advance(0.5)
        assert await _mark_delete(metadata, name, "sub") == 0  # within the interval: not yet
        await fake_clock.advance(0.5)
        assert await _mark_delete(metadata, name, "sub") == 1
