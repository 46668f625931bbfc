"""Frames written at once into an in-memory pipe (``SessionWriter``, "Written at once").

A stream with ``send_nowait`` (``protocol.client.transport.MemoryByteStream``, the simulator's
pipe) takes a frame in the calling task when nothing is queued ahead of it, so the writer task
is not woken per frame; a socket has no ``send_nowait`` and keeps the batched writer
(``test_session.test_replies_queued_together_are_written_at_once``).
"""

from __future__ import annotations

import struct

import anyio
import pytest

from emubroker.net.session import Session
from emubroker.net.traffic import TrafficCounter
from emubroker.net.writer import SessionWriter
from protocol import commands as c
from protocol.client.transport import MemoryByteStream, memory_byte_stream_pair
from protocol.clock import FakeClock
from protocol.connection import Connection, Role
from protocol.framing import Frame, payload_section
from tests.emubroker.net.test_session import RecordingHandler

pytestmark = pytest.mark.anyio

# Stored entries: a (here empty) metadata block, then the payload.
ONE = struct.pack(">I", 0) + b"one"
TWO = struct.pack(">I", 0) + b"two"


def _connected_pair() -> tuple[Connection, Connection]:
    """A broker's and a client's sans-IO connections past the handshake."""
    broker, client = Connection(Role.BROKER), Connection(Role.CLIENT)
    broker.receive_data(client.send(c.Connect(client_version="t", protocol_version=20)))
    assert broker.next_frame() is not None
    client.receive_data(broker.send(c.Connected(server_version="t", protocol_version=20)))
    assert client.next_frame() is not None
    return broker, client


async def _frames(
    stream: MemoryByteStream, client: Connection, count: int, received: list[int] | None = None
) -> list[Frame]:
    """The next ``count`` frames from ``stream``; their bytes are added to ``received``."""
    frames: list[Frame] = []
    while len(frames) < count:
        data = await stream.receive()
        if received is not None:
            received.append(len(data))
        client.receive_data(data)
        while (frame := client.next_frame()) is not None:
            assert isinstance(frame, Frame)
            frames.append(frame)
    return frames


async def test_a_frame_with_nothing_queued_goes_into_the_pipe_without_the_writer() -> None:
    client_end, server_end = memory_byte_stream_pair()
    broker, client = _connected_pair()
    traffic = TrafficCounter()
    # No writer task runs: what is not written at once stays in the outbox.
    out = SessionWriter(server_end, "test", broker, traffic)

    out.send_command(c.Success(request_id=1))
    assert out.queued_bytes == 0
    out.send_receipts(4, [7, 8], [(3, 0), (3, 1)])
    assert out.queued_bytes == 0
    out.send_message(2, 3, 5, -1, 1, (), payload_section(ONE, None))
    assert out.queued_bytes == 0
    assert out.send_messages(2, 3, 6, -1, [payload_section(TWO, None)] * 2) == 2
    assert out.queued_bytes == 0

    received: list[int] = []
    frames = await _frames(client_end, client, 6, received)
    assert [type(frame.command) for frame in frames] == [
        c.Success,
        c.SendReceipt,
        c.SendReceipt,
        c.Message,
        c.Message,
        c.Message,
    ]
    entries = [frame.payload.entry for frame in frames[3:] if frame.payload is not None]
    assert entries == [ONE, TWO, TWO]
    assert traffic.bytes_out == sum(received)  # the broker's own bandwidth counts them


async def test_frames_behind_a_queued_frame_wait_their_turn() -> None:
    # A pipe of one chunk: the second frame finds it full and is queued; the third finds room
    # again, but must not overtake the second.
    client_end, server_end = memory_byte_stream_pair(max_buffer=1)
    broker, client = _connected_pair()
    out = SessionWriter(server_end, "test", broker)
    out.send_command(c.Success(request_id=1))
    assert out.queued_bytes == 0
    out.send_command(c.Success(request_id=2))
    assert out.queued_bytes > 0
    first = await _frames(client_end, client, 1)
    out.send_command(c.Success(request_id=3))  # room in the pipe, a frame queued ahead
    assert len(out._outbox) == 2  # both wait for the writer
    async with anyio.create_task_group() as tg:
        tg.start_soon(out._write_loop)
        rest = await _frames(client_end, client, 2)
        assert out.queued_bytes == 0
        out.send_command(c.Success(request_id=4))  # the writer is idle: at once again
        assert out.queued_bytes == 0
        last = await _frames(client_end, client, 1)
        tg.cancel_scope.cancel()
    ids = [frame.command.request_id for frame in first + rest + last]  # type: ignore[union-attr]
    assert ids == [1, 2, 3, 4]


async def test_a_pipe_whose_peer_left_ends_the_session_as_a_failed_write_does(
    fake_clock: FakeClock,
) -> None:
    client_end, server_end = memory_byte_stream_pair()
    handlers: list[RecordingHandler] = []

    def factory(session: Session) -> RecordingHandler:
        handlers.append(RecordingHandler(session))
        return handlers[-1]

    session = Session(
        server_end, factory, clock=fake_clock, max_frame_size=1 << 20, keepalive_interval=30.0
    )
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.run)
            await anyio.wait_all_tasks_blocked()
            await client_end.aclose()  # no checkpoint: the session has not seen it yet
            session.send_message(1, 1, 0, -1, 0, (), payload_section(ONE, None))  # no raise
            assert session.close_reason.startswith("write failed")
            assert session.queued_bytes == 0
    assert handlers[0].released
