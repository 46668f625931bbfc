"""Dispatch in bookie mode when entries are not in the broker's cache (``managed_ledger``).

A publish runs the subscription's dispatch round in the publishing task; an entry that is not
cached has to come from the stub first, which only the dispatcher task may wait for.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.ratelimit.quotas import DispatchThrottlingConfig
from emubroker.storage import BookieBackend
from emubroker.topics import TopicService, TopicSettings
from emubroker.topics.producer import ProducerHandle
from emubroker.topics.throttling import DispatchThrottling
from protocol.clock import FakeClock
from storage_stub.server import open_stub_server
from tests.emubroker.topics.helpers import (
    BACKOFF,
    KNOWN_NAMESPACES,
    FakeConsumerSink,
    add_producer,
    make_entry,
    settle,
    subscribe,
    topic_name,
)

pytestmark = pytest.mark.anyio


async def publish(topic: object, producer: ProducerHandle, i: int) -> None:
    # Bookie mode stores through publish_many (the handlers' path when storage must wait).
    entry, crc, info = make_entry(b"%d" % i, sequence_id=i)
    await topic.publish_many(producer, [(entry, crc, info)])  # type: ignore[attr-defined]


@asynccontextmanager
async def bookie_service(
    clock: FakeClock, throttling: DispatchThrottling | None = None
) -> AsyncIterator[TopicService]:
    # A cache of 0 MiB evicts every entry as soon as it is stored: every read is a miss.
    async with (
        open_stub_server(clock=clock) as server,
        server.open_local_client() as bookie,
        MemoryMetadataStore() as metadata,
        TopicService(
            config=TopicSettings(managed_ledger_cache_size_mb=0),
            clock=clock,
            ledgers=BookieBackend(bookie),
            namespaces=KNOWN_NAMESPACES.__contains__,
            metadata=metadata,
            throttling=throttling,
        ).running() as service,
    ):
        yield service


async def test_a_publish_that_misses_the_cache_hands_the_read_to_the_dispatcher_task(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with bookie_service(fake_clock) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        for i in range(5):
            await publish(topic, producer, i)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(100)
        await settle()
        assert sink.entry_ids == [0, 1, 2, 3, 4]  # the backlog, read back from the stub
        with caplog.at_level(logging.WARNING, logger="emubroker"):
            await publish(topic, producer, 5)  # evicted before it is read
            await settle()
        assert sink.entry_ids == [0, 1, 2, 3, 4, 5]
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_throttled_read_that_misses_the_cache_is_planned_once(
    fake_clock: FakeClock,
) -> None:
    # The limiters are asked once per read (one throttle event when they cut it), however many
    # times the entries must first come back from the stub.
    throttling = DispatchThrottling(
        DispatchThrottlingConfig(dispatchThrottlingRatePerSubscriptionInMsg=10),
        clock=fake_clock,
        backoff=BACKOFF,
    )
    async with bookie_service(fake_clock, throttling) as service:
        topic = await service.get_topic(topic_name())
        producer = await add_producer(topic)
        for i in range(30):
            await publish(topic, producer, i)
        sink = FakeConsumerSink()
        consumer = await subscribe(topic, sink)
        consumer.flow(1000)
        delivered = []
        for _ in range(3):
            await settle()
            delivered.append(len(sink.take()))
            await fake_clock.advance(BACKOFF)
        assert delivered == [10, 10, 10]
        stats = throttling.subscription_throttle(topic.name, "sub").stats()
        # Per period the read cut from 100 entries to 10 tokens, then, while entries remain,
        # the refused one: 2 + 2 + 1, as in memory mode.
        assert stats.dispatchThrottledMsgEventsBySubscriptionLimit == 5
