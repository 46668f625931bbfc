"""What the client gates on the broker's announced protocol version (spec §12)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from protocol import commands as c
from protocol.client import Client, Consumer, InitialPosition, Producer, open_client
from protocol.clock import FakeClock
from protocol.errors import UnsupportedVersionError
from tests.support.fake_broker import FakeBroker, fake_broker

pytestmark = pytest.mark.anyio


@pytest.fixture
async def old_broker() -> AsyncIterator[FakeBroker]:
    async with fake_broker(protocol_version=5) as broker:
        yield broker


@pytest.fixture
async def old_client(old_broker: FakeBroker, fake_clock: FakeClock) -> AsyncIterator[Client]:
    async with open_client(old_broker.url, connector=old_broker.connect, clock=fake_clock) as c:
        yield c


async def test_no_checksum_section_below_v6(old_client: Client, old_broker: FakeBroker) -> None:
    producer = await old_client.create_producer("t")
    assert isinstance(producer, Producer)
    await producer.send(b"x")
    (entry,) = old_broker.topics[producer.topic].entries
    assert entry.section[:2] != b"\x0e\x01"  # stored as received: no CRC-32C section


async def test_checksum_section_from_v6(client: Client, broker: FakeBroker) -> None:
    producer = await client.create_producer("t")
    assert isinstance(producer, Producer)
    await producer.send(b"x")
    assert broker.topics[producer.topic].entries[0].section[:2] == b"\x0e\x01"


async def test_get_last_message_id_needs_v12(old_client: Client) -> None:
    consumer = await old_client.subscribe("t", "s")
    assert isinstance(consumer, Consumer)
    with pytest.raises(UnsupportedVersionError, match="v12"):
        await consumer.get_last_message_id()


async def test_redeliver_needs_v2(fake_clock: FakeClock) -> None:
    async with (
        fake_broker(protocol_version=1) as broker,
        open_client(broker.url, connector=broker.connect, clock=fake_clock) as client,
    ):
        consumer = await client.subscribe("t", "s", initial_position=InitialPosition.EARLIEST)
        assert isinstance(consumer, Consumer)
        consumer.redeliver_unacknowledged()
        await anyio.wait_all_tasks_blocked()
        assert broker.of_type(c.RedeliverUnacknowledgedMessages) == []
