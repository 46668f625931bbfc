"""The session pump: handshake routing, PING/PONG, keep-alive, batching, teardown, bad input."""

from __future__ import annotations

import struct
from collections.abc import Callable

import anyio
import pytest
from anyio.abc import TaskStatus

from emubroker.net.guards import NetGuards
from emubroker.net.session import (
    WRITE_BUFFER_HIGH_WATER_MARK,
    WRITE_BUFFER_LOW_WATER_MARK,
    Session,
)
from emubroker.net.traffic import TrafficCounter, TrafficSnapshot
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.framing import Frame, Payload, encode_frame, payload_section
from protocol.runs import SendRun
from tests.support.broker import MemoryByteStream, WireClient, memory_stream_pair

pytestmark = pytest.mark.anyio

KEEPALIVE = 30.0


class RecordingHandler:
    """A FrameHandler that answers CONNECT and records everything else."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.frames: list[Frame] = []
        self.released = False
        self.closed_consumers: list[int] = []
        self.closed_producers: list[int] = []
        self.fail_on: type[c.Record] | None = None
        self.flushed_after: list[int] = []  # len(frames) at each flush: one per read
        self.writable_again_calls = 0
        self.on_frame: Callable[[Frame], None] | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            task_status.started()
            await anyio.Event().wait()
        finally:
            self.released = True

    def handle_frame(self, frame: Frame) -> None:
        if self.fail_on is not None and isinstance(frame.command, self.fail_on):
            raise RuntimeError("boom")
        if isinstance(frame.command, c.Connect):
            self.session.send_command(c.Connected(server_version="t", protocol_version=20))
        self.frames.append(frame)
        if self.on_frame is not None:
            self.on_frame(frame)

    def handle_send_run(self, run: SendRun) -> None:
        # Recorded as the frames the run stands for.
        for sequence_id, entry, crc in zip(
            run.sequence_ids, run.entries, run.checksums, strict=True
        ):
            send = c.Send(producer_id=run.producer_id, sequence_id=sequence_id)
            self.handle_frame(Frame(send, Payload(entry, crc)))

    def flush(self) -> None:
        self.flushed_after.append(len(self.frames))

    def writable_again(self) -> None:
        self.writable_again_calls += 1

    def consumer_closed_by_broker(self, consumer_id: int) -> None:
        self.closed_consumers.append(consumer_id)

    def producer_closed_by_broker(self, producer_id: int) -> None:
        self.closed_producers.append(producer_id)


class CountingStream(MemoryByteStream):
    """Counts the writes the session makes."""

    def __init__(self, inner: MemoryByteStream) -> None:
        super().__init__(inner._send, inner._receive)
        self.writes = 0

    async def send(self, item: bytes) -> None:
        self.writes += 1
        await super().send(item)


class StallingStream(CountingStream):
    """A stream whose writes can be held, as a socket whose peer stopped reading holds them."""

    def __init__(self, inner: MemoryByteStream) -> None:
        super().__init__(inner)
        self.stalled = False
        self._passes = 0
        self._released = anyio.Event()

    async def send(self, item: bytes) -> None:
        while self.stalled and not self._passes:
            self._released = anyio.Event()
            await self._released.wait()
        if self.stalled:
            self._passes -= 1
        await super().send(item)

    def let_one_through(self) -> None:
        self._passes += 1
        self._released.set()


class Harness:
    def __init__(
        self,
        clock: FakeClock,
        *,
        max_frame_size: int = 1 << 20,
        stream: type[CountingStream] = CountingStream,
        guards: NetGuards | None = None,
        traffic: TrafficCounter | None = None,
    ) -> None:
        client_end, server_end = memory_stream_pair()
        self.server_stream = stream(server_end)
        self.client = WireClient(client_end)
        self.handlers: list[RecordingHandler] = []

        def factory(session: Session) -> RecordingHandler:
            handler = RecordingHandler(session)
            self.handlers.append(handler)
            return handler

        self.session = Session(
            self.server_stream,
            factory,
            clock=clock,
            max_frame_size=max_frame_size,
            keepalive_interval=KEEPALIVE,
            guards=guards,
            traffic=traffic,
        )
        self.done = anyio.Event()

    @property
    def handler(self) -> RecordingHandler:
        return self.handlers[0]

    async def run(self) -> None:
        try:
            await self.session.run()
        finally:
            self.done.set()
            with anyio.CancelScope(shield=True):
                await self.client.stream.aclose()


async def test_connect_reaches_handler_and_reply_opens_connection(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        connected = await h.client.handshake()
        assert connected.server_version == "t"
        assert [type(f.command) for f in h.handler.frames] == [c.Connect]
        await h.client.stream.aclose()
    assert h.handler.released
    assert h.session.close_reason == "client closed the connection"


async def test_ping_is_answered_with_pong_without_reaching_handler(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        await h.client.send(c.Ping())
        assert await h.client.receive_command() == c.Pong()
        assert [type(f.command) for f in h.handler.frames] == [c.Connect]
        tg.cancel_scope.cancel()


async def test_handler_is_flushed_once_after_all_frames_of_a_read(fake_clock: FakeClock) -> None:
    # The handler publishes a read's SENDs together when the read is done (one write of
    # receipts for all of them), so flush must come after the last frame of each read only.
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        flow = [c.Flow(consumer_id=i, message_permits=1) for i in range(3)]
        await h.client.send_raw(b"".join(h.client.conn.send(f) for f in flow))
        await anyio.wait_all_tasks_blocked()
        await h.client.send(c.Flow(consumer_id=9, message_permits=1))
        await anyio.wait_all_tasks_blocked()
        assert h.handler.flushed_after == [1, 4, 5]  # CONNECT, then 3 frames, then 1
        tg.cancel_scope.cancel()


async def test_idle_client_is_pinged_then_dropped(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        await fake_clock.advance(KEEPALIVE)  # traffic in the first interval: no ping yet
        await fake_clock.advance(KEEPALIVE)
        assert await h.client.receive_command() == c.Ping()
        await fake_clock.advance(KEEPALIVE)  # silent for another interval: dropped
        await h.client.expect_closed()
    assert "keep-alive" in h.session.close_reason
    assert h.handler.released


async def test_answered_ping_keeps_the_connection(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        for _ in range(4):
            await fake_clock.advance(KEEPALIVE)
            await fake_clock.advance(KEEPALIVE)
            assert await h.client.receive_command() == c.Ping()
            await h.client.send(c.Pong())
            await anyio.wait_all_tasks_blocked()
        assert not h.session.close_reason
        tg.cancel_scope.cancel()


async def test_no_connect_within_interval_closes(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await fake_clock.advance(KEEPALIVE)
        await h.client.expect_closed()
    assert "CONNECT" in h.session.close_reason


async def test_replies_queued_together_are_written_at_once(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        writes = h.server_stream.writes
        for i in range(50):
            h.session.send_command(c.Success(request_id=i))
        await anyio.wait_all_tasks_blocked()
        assert h.server_stream.writes == writes + 1
        for i in range(50):
            assert await h.client.receive_command() == c.Success(request_id=i)
        tg.cancel_scope.cancel()


async def test_send_message_frames_stored_section_unchanged(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    entry = struct.pack(">I", 0) + b"payload"
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        h.session.send_message(7, 3, 0, -1, 2, (5,), payload_section(entry, 1234))
        frame = await h.client.receive()
        assert frame.command == c.Message(
            consumer_id=7,
            message_id=c.MessageIdData(ledger_id=3, entry_id=0),
            redelivery_count=2,
            ack_set=(5,),
        )
        assert frame.payload is not None
        assert frame.payload.entry == entry
        assert frame.payload.checksum == 1234
        tg.cancel_scope.cancel()


async def test_broker_closes_tell_handler_then_client(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        h.session.close_consumer(4)
        h.session.close_producer(9)
        h.session.active_consumer_change(4, True)
        first = await h.client.receive_command()
        second = await h.client.receive_command()
        third = await h.client.receive_command()
        assert isinstance(first, c.CloseConsumer)
        assert first.consumer_id == 4
        assert isinstance(second, c.CloseProducer)
        assert second.producer_id == 9
        assert third == c.ActiveConsumerChange(consumer_id=4, is_active=True)
        assert h.handler.closed_consumers == [4]
        assert h.handler.closed_producers == [9]
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(struct.pack(">II", 12, 8) + b"\xff" * 8, id="undecodable-command"),
        pytest.param(struct.pack(">I", 2) + b"\x00\x00", id="too-small"),
        pytest.param(struct.pack(">I", 1 << 30), id="oversized"),
    ],
)
async def test_malformed_frame_closes_connection_and_releases(
    fake_clock: FakeClock, garbage: bytes
) -> None:
    h = Harness(fake_clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.run)
            await h.client.handshake()
            await h.client.send_raw(garbage)
            await h.client.expect_closed()
            await h.done.wait()
    assert h.session.close_reason.startswith("protocol error")
    assert h.handler.released


async def test_command_before_connect_closes(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.run)
            # Spec §3.1: the first frame must be CONNECT.
            await h.client.send_raw(encode_frame(c.Flow(consumer_id=1, message_permits=1)))
            await h.client.expect_closed()
    assert "protocol error" in h.session.close_reason
    assert h.handler.frames == []


async def test_handler_crash_closes_only_this_connection(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.run)
            await h.client.handshake()
            h.handler.fail_on = c.Flow
            await h.client.send(c.Flow(consumer_id=1, message_permits=10))
            await h.client.expect_closed()
    assert "internal error" in h.session.close_reason
    assert h.handler.released


async def test_pending_replies_are_flushed_before_closing(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.run)
            await h.client.handshake()
            h.session.send_command(c.Success(request_id=1))
            h.session.close("test")
            assert await h.client.receive_command() == c.Success(request_id=1)
            await h.client.expect_closed()


async def test_writability_follows_the_bytes_waiting_to_be_written(fake_clock: FakeClock) -> None:
    # Netty's rule: unwritable above the high water mark, writable again below the low one.
    h = Harness(fake_clock, stream=StallingStream)
    stream = h.server_stream
    assert isinstance(stream, StallingStream)
    mib = 1024 * 1024
    assert (4 * mib, 2 * mib) == (WRITE_BUFFER_HIGH_WATER_MARK, WRITE_BUFFER_LOW_WATER_MARK)

    def message(size: int) -> None:
        h.session.send_message(1, 1, 0, -1, 0, (), payload_section(b"x" * size, None))

    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        stream.stalled = True  # the client stops reading: the socket takes nothing more
        message(3 * mib)
        await anyio.wait_all_tasks_blocked()  # the writer is stuck writing it
        assert h.session.writable
        message(mib + mib // 2)  # 4.5 MiB waiting: above the high water mark
        assert not h.session.writable
        stream.let_one_through()  # the 3 MiB write completes; 1.5 MiB still waits...
        await anyio.wait_all_tasks_blocked()
        assert h.session.writable  # ...which is below the low water mark
        message(3 * mib)  # 4.5 MiB again
        assert not h.session.writable
        stream.let_one_through()  # the 1.5 MiB write completes: 3 MiB still wait
        await anyio.wait_all_tasks_blocked()
        assert not h.session.writable  # between the marks it stays unwritable
        stream.let_one_through()
        await anyio.wait_all_tasks_blocked()
        assert h.session.writable
        tg.cancel_scope.cancel()


async def test_traffic_counts_every_byte_each_way_and_the_queued_ones(
    fake_clock: FakeClock,
) -> None:
    # The broker's own bandwidth (its load report): what its sessions read and wrote.
    traffic = TrafficCounter()
    h = Harness(fake_clock, stream=StallingStream, traffic=traffic)
    stream = h.server_stream
    assert isinstance(stream, StallingStream)
    sent = [h.client.conn.send(c.Connect(client_version="t", protocol_version=20))]
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.send_raw(sent[0])
        connected = await h.client.receive_command()
        assert isinstance(connected, c.Connected)
        ping = h.client.conn.send(c.Ping())
        await h.client.send_raw(ping)
        assert await h.client.receive_command() == c.Pong()
        received = len(encode_frame(c.Connected(server_version="t", protocol_version=20)))
        pong = len(encode_frame(c.Pong()))
        assert traffic.snapshot() == TrafficSnapshot(len(sent[0]) + len(ping), received + pong, 0)
        stream.stalled = True  # bytes the socket does not take count as buffered
        h.session.send_message(1, 1, 0, -1, 0, (), payload_section(b"x" * 1000, None))
        await anyio.wait_all_tasks_blocked()
        buffered = traffic.snapshot().buffered
        assert buffered > 1000
        assert traffic.snapshot().bytes_out == received + pong
        stream.let_one_through()
        await anyio.wait_all_tasks_blocked()
        assert traffic.snapshot() == TrafficSnapshot(
            len(sent[0]) + len(ping), received + pong + buffered, 0
        )
        tg.cancel_scope.cancel()
    # A finished session leaves nothing buffered behind.
    assert traffic.snapshot().buffered == 0
