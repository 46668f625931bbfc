"""Readers: non-durable subscriptions from earliest, latest or an id inside a batch."""

from __future__ import annotations

import anyio
import pytest

from protocol import commands as c
from protocol.client import EARLIEST, LATEST, Client, MessageId, Producer
from protocol.clock import FakeClock
from protocol.ids import MAX_I64
from tests.support.fake_broker import LEDGER, FakeBroker

pytestmark = pytest.mark.anyio


async def produce(client: Client, count: int, *, batch: bool = False) -> list[MessageId]:
    producer = await client.create_producer("t", batching_enabled=batch)
    assert isinstance(producer, Producer)
    futures = [await producer.send_async(b"m%d" % i) for i in range(count)]
    await producer.flush()
    return [await f for f in futures]


async def test_reader_from_earliest(client: Client, broker: FakeBroker) -> None:
    ids = await produce(client, 3)
    reader = await client.create_reader("t", EARLIEST)
    assert [(await reader.read_next()).message_id for _ in range(3)] == ids
    (subscribe,) = broker.of_type(c.Subscribe)
    assert subscribe.durable is False
    assert subscribe.sub_type is c.SubType.EXCLUSIVE
    assert subscribe.subscription.startswith("reader-")
    assert len(subscribe.subscription) == len("reader-") + 10
    assert subscribe.start_message_id == c.MessageIdData(ledger_id=-1, entry_id=-1)
    assert not await reader.has_message_available()


async def test_reader_from_latest_sees_only_new_messages(
    client: Client, broker: FakeBroker
) -> None:
    await produce(client, 2)
    reader = await client.create_reader("t", LATEST)
    start = broker.of_type(c.Subscribe)[0].start_message_id
    assert start == c.MessageIdData(ledger_id=MAX_I64, entry_id=MAX_I64)
    assert not await reader.has_message_available()
    producer = await client.create_producer("t")
    new_id = await producer.send(b"new")
    assert await reader.has_message_available()
    assert (await reader.read_next()).message_id == new_id


async def test_reader_from_an_id_inside_a_batch(client: Client, broker: FakeBroker) -> None:
    ids = await produce(client, 5, batch=True)
    reader = await client.create_reader("t", ids[2])
    start = broker.of_type(c.Subscribe)[0].start_message_id
    assert start is not None
    assert (start.entry_id, start.batch_index) == (0, 2)
    assert (await reader.read_next()).message_id == ids[3]  # exclusive start
    inclusive = await client.create_reader("t", ids[2], inclusive=True)
    assert (await inclusive.read_next()).message_id == ids[2]


async def test_inclusive_reader_at_latest_reads_the_last_message(
    client: Client, fake_clock: FakeClock
) -> None:
    ids = await produce(client, 3)
    async with anyio.create_task_group() as tg:

        async def create() -> None:
            reader = await client.create_reader("t", LATEST, inclusive=True)
            assert (await reader.read_next()).message_id == ids[-1]

        tg.start_soon(create)
        await fake_clock.advance(0.1)  # the seek made the broker close the reader


async def test_reader_resumes_after_the_last_message_on_reconnect(
    client: Client, broker: FakeBroker, fake_clock: FakeClock
) -> None:
    ids = await produce(client, 4)
    reader = await client.create_reader("t", EARLIEST, receiver_queue_size=10)
    assert (await reader.read_next()).message_id == ids[0]
    assert (await reader.read_next()).message_id == ids[1]
    await broker.sessions[0].disconnect()
    await fake_clock.advance(0.1)
    subscribes = broker.of_type(c.Subscribe)
    assert len(subscribes) == 2
    resume = subscribes[1].start_message_id
    # The last id handed out (prefetched but unread messages come again).
    assert resume is not None
    assert (resume.ledger_id, resume.entry_id) == (LEDGER, 1)
    assert [(await reader.read_next()).message_id for _ in range(2)] == ids[2:]


async def test_reader_seek_to_earliest(client: Client, fake_clock: FakeClock) -> None:
    ids = await produce(client, 2)
    reader = await client.create_reader("t", EARLIEST)
    for _ in range(2):
        await reader.read_next()
    async with anyio.create_task_group() as tg:
        tg.start_soon(reader.seek, EARLIEST)
        await fake_clock.advance(0.1)
    assert [(await reader.read_next()).message_id for _ in range(2)] == ids
