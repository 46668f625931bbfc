"""``brokerMaxConnections`` and ``brokerMaxConnectionsPerIp`` at the accept loop, in memory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import pytest
from anyio.abc import ByteStream, Listener, SocketAttribute, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from emubroker.net.guards import ConnectionCounter, NetGuards
from emubroker.net.listener import NO_REQUEST, serve_pulsar
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.errors import ServerError
from protocol.framing import FrameDecoder
from tests.emubroker.net.test_session import RecordingHandler
from tests.support.broker import MemoryByteStream, WireClient, memory_stream_pair

pytestmark = pytest.mark.anyio


class AddressedStream(MemoryByteStream):
    """A memory stream that says which address it comes from, as a socket does."""

    def __init__(self, inner: MemoryByteStream, address: tuple[str, int]) -> None:
        super().__init__(inner._send, inner._receive)
        self.address = address

    @property
    def extra_attributes(self) -> Mapping[Any, Callable[[], Any]]:
        return {SocketAttribute.remote_address: lambda: self.address}


class MemoryListener(Listener[ByteStream]):
    """Hands the server ends of the connections tests open to the accept loop."""

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[ByteStream]
        self._receive: MemoryObjectReceiveStream[ByteStream]
        self._send, self._receive = anyio.create_memory_object_stream[ByteStream](100)

    async def connect(self, ip: str, port: int = 40_000) -> WireClient:
        client_end, server_end = memory_stream_pair()
        await self._send.send(AddressedStream(server_end, (ip, port)))
        return WireClient(client_end)

    async def serve(
        self, handler: Callable[[ByteStream], Any], task_group: TaskGroup | None = None
    ) -> None:
        assert task_group is not None
        async for stream in self._receive:
            task_group.start_soon(handler, stream)

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


async def serve(tg: TaskGroup, counter: ConnectionCounter, clock: FakeClock) -> MemoryListener:
    listener = MemoryListener()
    await tg.start(
        lambda task_status: serve_pulsar(
            listener,
            RecordingHandler,
            clock=clock,
            max_frame_size=1 << 20,
            keepalive_interval=30.0,
            guards=NetGuards(connections=counter),
            task_status=task_status,
        )
    )
    return listener


async def expect_refused(client: WireClient, message: str) -> None:
    # Pulsar's ServerCnx.channelActive: an ERROR for no request, before any CONNECT, then close
    # (read raw: a client's state machine takes no ERROR before its CONNECT).
    decoder = FrameDecoder()
    received = b""
    while True:
        try:
            received += await client.stream.receive()
        except anyio.EndOfStream:
            break
    decoder.feed(received)
    frame = decoder.next_frame()
    assert frame is not None
    assert frame.command == c.Error(
        request_id=NO_REQUEST, error=ServerError.NotAllowedError, message=message
    )
    assert decoder.next_frame() is None
    await client.stream.aclose()


async def test_a_connection_over_the_broker_limit_is_refused(fake_clock: FakeClock) -> None:
    counter = ConnectionCounter(max_total=2)
    async with anyio.create_task_group() as tg:
        listener = await serve(tg, counter, fake_clock)
        first = await listener.connect("10.0.0.1")
        second = await listener.connect("10.0.0.2")
        await first.handshake()
        await second.handshake()
        third = await listener.connect("10.0.0.3")
        await expect_refused(third, "Reached the maximum number of connections")
        assert counter.total == 2
        await first.stream.aclose()  # one leaves: room for another
        await anyio.wait_all_tasks_blocked()
        assert counter.total == 1
        fourth = await listener.connect("10.0.0.3")
        await fourth.handshake()
        tg.cancel_scope.cancel()
    for client in (second, fourth):
        await client.stream.aclose()


async def test_a_connection_over_the_per_address_limit_is_refused(fake_clock: FakeClock) -> None:
    counter = ConnectionCounter(max_per_ip=1)
    async with anyio.create_task_group() as tg:
        listener = await serve(tg, counter, fake_clock)
        first = await listener.connect("127.0.0.1", 1)
        await first.handshake()
        again = await listener.connect("127.0.0.1", 2)
        await expect_refused(
            again, "Reached the maximum number of connections on address 127.0.0.1"
        )
        other = await listener.connect("127.0.0.2")
        await other.handshake()
        assert counter.connections("127.0.0.1") == 1
        tg.cancel_scope.cancel()
    for client in (first, other):
        await client.stream.aclose()
