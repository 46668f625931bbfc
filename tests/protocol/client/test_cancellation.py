"""Cancellation leaves the client consistent: nothing lost, nothing left registered."""

from __future__ import annotations

import anyio
import pytest

from protocol import commands as c
from protocol.client import Client, InitialPosition, Producer, Transport, open_client
from protocol.client.transport import memory_transport_pair
from protocol.clock import FakeClock
from tests.support.fake_broker import FakeBroker

pytestmark = pytest.mark.anyio


async def test_cancelled_receive_loses_no_message(client: Client) -> None:
    consumer = await client.subscribe("t", "s", initial_position=InitialPosition.EARLIEST)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await consumer.receive()
    producer = await client.create_producer("t")
    assert isinstance(producer, Producer)
    await producer.send(b"after")
    assert (await consumer.receive()).payload == b"after"


async def test_cancelled_creation_unregisters_and_can_be_retried(
    client: Client, broker: FakeBroker
) -> None:
    stall = [True]
    broker.on(c.Producer, lambda session, cmd, payload: stall[0])
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.create_producer, "t")
        await anyio.wait_all_tasks_blocked()
        assert len(broker.of_type(c.Producer)) == 1
        tg.cancel_scope.cancel()
    cnx = await client.get_connection(broker.url)
    assert cnx.producers == {}
    stall[0] = False
    producer = await client.create_producer("t")
    assert isinstance(producer, Producer)
    assert await producer.send(b"x") is not None


async def test_cancelled_connect_lets_the_next_attempt_start_fresh(fake_clock: FakeClock) -> None:
    peers: list[Transport] = []

    async def silent(host: str, port: int) -> Transport:
        client_side, broker_side = memory_transport_pair()
        peers.append(broker_side)  # never answers CONNECT
        return client_side

    async with open_client("pulsar://x:1", connector=silent, clock=fake_clock) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.get_connection, "pulsar://x:1")
            tg.start_soon(client.get_connection, "pulsar://x:1")  # shares the first attempt
            await anyio.wait_all_tasks_blocked()
            assert len(peers) == 1
            tg.cancel_scope.cancel()
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.get_connection, "pulsar://x:1")
            await anyio.wait_all_tasks_blocked()
            assert len(peers) == 2  # a new attempt, not the cancelled one
            tg.cancel_scope.cancel()
    for peer in peers:
        await peer.aclose()
