"""Pending publishes (Pulsar's ``maxPendingPublishRequestsPerConnection`` and publish buffer).

A SEND is pending from the read that brings it until its receipt or error is queued; storage
that must be awaited keeps it pending, and the session stops reading the connection at the limit
until half of the pending SENDs are done.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from emubroker.app import Broker
from emubroker.naming import TopicName
from emubroker.net.guards import NetGuards
from protocol import commands as c
from protocol.codec import encode_record
from protocol.framing import build_entry, checksum
from tests.emubroker.sessions import session_over
from tests.emubroker.test_handlers import create_producer
from tests.support.broker import WireClient

pytestmark = pytest.mark.anyio


class GatedTopic:
    """A real topic whose storage answers only when the test opens the gate."""

    def __init__(self, inner: Any, gate: anyio.Event) -> None:
        self._inner = inner
        self._gate = gate

    def publish_many_nowait(self, producer: Any, entries: Any) -> list[tuple[int, int]]:
        raise anyio.WouldBlock

    async def publish_many(self, producer: Any, entries: Any) -> list[tuple[int, int]]:
        await self._gate.wait()
        return self._inner.publish_many_nowait(producer, entries)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class GatedTopics:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.gate = anyio.Event()

    async def get_topic(self, name: TopicName, *, create: bool = True) -> Any:
        return GatedTopic(await self._inner.get_topic(name, create=create), self.gate)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.fixture
def broker(memory_broker: Broker) -> Broker:
    return memory_broker


def send(client: WireClient, sequence_id: int) -> tuple[bytes, int]:
    """A SEND of producer 1 and the size of its entry."""
    meta = c.MessageMetadata(producer_name="p", sequence_id=sequence_id, publish_time=1)
    entry = build_entry(encode_record(meta), b"payload-%d" % sequence_id)
    frame = client.conn.send_payload(
        c.Send(producer_id=1, sequence_id=sequence_id), entry, checksum(entry)
    )
    return frame, len(entry)


def receipts(replies: list[c.Command]) -> list[int]:
    return [r.sequence_id for r in replies if isinstance(r, c.SendReceipt)]


async def test_sends_waiting_for_storage_pause_reading_at_the_limit(broker: Broker) -> None:
    topics = GatedTopics(broker.topics)
    guards = NetGuards(max_pending_publishes=3)
    session, client, client_end = session_over(broker, topics, guards=guards)
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run)
        await client.handshake()
        await create_producer(client)
        sends = [send(client, s) for s in range(5)]
        await client.send_raw(b"".join(frame for frame, _ in sends[:3]))
        await anyio.wait_all_tasks_blocked()
        assert session.reading_paused == {"pending publishes"}
        assert guards.publish_buffer.pending == sum(size for _, size in sends[:3])
        await client.send_raw(sends[3][0] + sends[4][0])  # not read while paused
        await anyio.wait_all_tasks_blocked()
        assert guards.publish_buffer.pending == sum(size for _, size in sends[:3])
        topics.gate.set()  # storage answers
        replies = [await client.receive_command() for _ in range(5)]
        assert receipts(replies) == [0, 1, 2, 3, 4]
        await anyio.wait_all_tasks_blocked()
        assert session.reading_paused == frozenset()
        assert guards.publish_buffer.pending == 0
        await client_end.aclose()


async def test_a_dropped_connection_gives_back_its_pending_bytes(broker: Broker) -> None:
    topics = GatedTopics(broker.topics)
    guards = NetGuards()
    session, client, client_end = session_over(broker, topics, guards=guards)
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run)
        await client.handshake()
        await create_producer(client)
        await client.send_raw(b"".join(send(client, s)[0] for s in range(10)))
        await anyio.wait_all_tasks_blocked()
        assert guards.publish_buffer.pending > 0
        await client_end.aclose()  # the client goes; its SENDs were never stored
    assert guards.publish_buffer.pending == 0
