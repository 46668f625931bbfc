"""``POST .../terminate`` and ``.../terminate/partitions`` over REST, seen on the wire."""

from __future__ import annotations

import pytest

from protocol import commands as c
from protocol.errors import ServerError
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/persistent/public/default"
T = f"{NS}/t"
TOPIC = "persistent://public/default/t"
NOT_PARTITIONED = (
    "Termination of a non-partitioned topic is not allowed using partitioned-terminate"
    ", please use terminate commands"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


def message_id(ledger_id: int, entry_id: int) -> dict[str, int]:
    return {
        "ledgerId": ledger_id,
        "entryId": entry_id,
        "partitionIndex": -1,
        "batchIndex": -1,
        "batchSize": 0,
    }


async def test_terminate_answers_the_last_id_and_the_wire_sees_it(admin: Admin, wire: Wire) -> None:
    await wire.produce(TOPIC, 2)
    consumer = await wire.consumer(TOPIC, "s")
    ledger = (await admin.ok("GET", f"{T}/lastMessageId"))["ledgerId"]
    assert await admin.ok("POST", f"{T}/terminate") == message_id(ledger, 1)
    assert await admin.ok("POST", f"{T}/terminate") == message_id(ledger, 1)  # again: same
    # The producer was closed; a new one is refused.
    producer = await wire.client()
    await producer.send(c.Producer(topic=TOPIC, producer_id=5, request_id=9))
    assert await producer.receive_command() == c.Error(
        request_id=9,
        error=ServerError.TopicTerminatedError,
        message="Topic was already terminated",
    )
    # The consumer gets both messages; acking them ends the topic for it.
    await consumer.send(c.Flow(consumer_id=1, message_permits=10))
    received = [await consumer.receive_command() for _ in range(2)]
    assert all(isinstance(m, c.Message) for m in received)
    ids = tuple(m.message_id for m in received if isinstance(m, c.Message))
    await consumer.send(c.Ack(consumer_id=1, ack_type=c.AckType.INDIVIDUAL, message_id=ids))
    assert await consumer.receive_command() == c.ReachedEndOfTopic(consumer_id=1)
    stats = await admin.ok("GET", f"{T}/internalStats")
    assert stats["state"] == "Terminated"


async def test_terminate_refusals(admin: Admin) -> None:
    await admin.fails("POST", f"{T}/terminate", 404, f"Topic {TOPIC} not found")
    await admin.ok("PUT", f"{NS}/p/partitions", json=2)
    await admin.fails(
        "POST", f"{NS}/p/terminate", 405, "Termination of a partitioned topic is not allowed"
    )
    await admin.ok("PUT", T)
    await admin.fails("POST", f"{T}/terminate/partitions", 405, NOT_PARTITIONED)
    await admin.fails("POST", f"{NS}/p-partition-0/terminate/partitions", 405, NOT_PARTITIONED)


async def test_terminate_partitions_answers_each_partition(admin: Admin, wire: Wire) -> None:
    await admin.ok("PUT", f"{NS}/p/partitions", json=2)
    await wire.produce("persistent://public/default/p-partition-1", 1)
    answer = await admin.ok("POST", f"{NS}/p/terminate/partitions")
    assert sorted(answer) == ["0", "1"]
    assert answer["0"]["entryId"] == -1
    assert answer["1"]["entryId"] == 0
    assert answer["1"]["partitionIndex"] == -1  # PersistentTopic.terminate's MessageIdImpl
    for partition in ("p-partition-0", "p-partition-1"):
        stats = await admin.ok("GET", f"{NS}/{partition}/internalStats")
        assert stats["state"] == "Terminated"
