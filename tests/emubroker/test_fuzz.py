"""The fast part of the fuzz harness (bench/fuzz.py): generated frames against an in-memory broker.

Hostile sessions (``tests.support.fuzz``) come and go while a well-behaved client produces and
consumes; every hostile session must end with the broker hanging up (never hanging), nothing may
be logged as an error (a crash in a handler or a session is logged at ERROR), and the
well-behaved client must get every message it was acknowledged, in order.
"""

from __future__ import annotations

import logging

import anyio
import pytest

from emubroker.app import Broker
from protocol import commands as c
from tests.support.broker import WireClient, memory_stream_pair
from tests.support.fuzz import KINDS, FuzzTraffic

pytestmark = pytest.mark.anyio

GOOD_TOPIC = "persistent://public/default/well-behaved"


@pytest.fixture
def broker(memory_broker: Broker) -> Broker:
    return memory_broker


async def hostile_session(broker: Broker, data: bytes) -> None:
    """Send ``data``, hang up our side, and read until the broker hangs up too."""
    client_end, server_end = memory_stream_pair()
    broker.start_session(server_end)
    await client_end.send(data)
    await client_end.send_eof()
    with anyio.fail_after(5):  # a guard: the broker must close every one of them
        while True:
            try:
                await client_end.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
    await client_end.aclose()


async def open_good_client(broker: Broker) -> WireClient:
    client_end, server_end = memory_stream_pair()
    broker.start_session(server_end)
    client = WireClient(client_end)
    await client.handshake()
    await client.send(c.Producer(topic=GOOD_TOPIC, producer_id=1, request_id=1))
    assert isinstance(await client.receive_command(), c.ProducerSuccess)
    await client.send(
        c.Subscribe(
            topic=GOOD_TOPIC,
            subscription="good",
            sub_type=c.SubType.EXCLUSIVE,
            consumer_id=1,
            request_id=2,
        )
    )
    assert await client.receive_command() == c.Success(request_id=2)
    await client.send(c.Flow(consumer_id=1, message_permits=100_000))
    return client


async def test_generated_frames_leave_the_broker_serving_a_well_behaved_client(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    traffic = FuzzTraffic(seed=2024, pool_size=300)
    good = await open_good_client(broker)
    acknowledged: list[int] = []
    received: list[bytes] = []
    sent_frames = 0
    sequence = 0
    for round_ in range(100):
        data, count = traffic.session(frames_wanted=20)
        sent_frames += count
        await hostile_session(broker, data)
        if round_ % 10 == 0:
            for _ in range(5):
                await good.send_message(1, sequence, b"good-%d" % sequence)
                sequence += 1
            while len(acknowledged) < sequence or len(received) < sequence:
                frame = await good.receive()
                if isinstance(frame.command, c.SendReceipt):
                    acknowledged.append(frame.command.sequence_id)
                elif isinstance(frame.command, c.Message):
                    assert frame.payload is not None
                    received.append(bytes(frame.payload.body))
                    await good.send(
                        c.Ack(
                            consumer_id=1,
                            ack_type=c.AckType.INDIVIDUAL,
                            message_id=(frame.command.message_id,),
                        )
                    )
    assert sent_frames >= 2000
    assert all(traffic.kinds[kind] > 0 for kind in KINDS)
    assert acknowledged == list(range(sequence))
    assert received == [b"good-%d" % i for i in range(sequence)]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    await good.stream.aclose()
