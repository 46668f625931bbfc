"""What a client may cost: reading pauses, the outbound cap, keep-alive, partial frames, turns.

Reading pauses take effect at the next read: a read the session is already waiting for when a
pause starts (Netty's read in progress when auto-read turns off) still delivers its frames, which
is why several tests send one frame that passes before the one that must wait.
"""

from __future__ import annotations

import struct

import anyio
import pytest

from emubroker.net.guards import NetGuards, PartialFrames, PublishBuffer, ReadGate
from emubroker.net.writer import FLUSH_GUARD_SECONDS, OUTBOUND_CAP, WRITE_SLICE
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.framing import Frame, payload_section
from tests.emubroker.net.test_session import (
    KEEPALIVE,
    CountingStream,
    Harness,
    StallingStream,
)
from tests.support.broker import MemoryByteStream

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


def flow(consumer_id: int) -> c.Flow:
    return c.Flow(consumer_id=consumer_id, message_permits=1)


def flows(h: Harness) -> list[int]:
    return [f.command.consumer_id for f in h.handler.frames if isinstance(f.command, c.Flow)]


def queue_message(h: Harness, size: int) -> None:
    entry = struct.pack(">I", 0) + b"x" * size  # no metadata, then the payload
    h.session.send_message(1, 1, 0, -1, 0, (), payload_section(entry, None))


async def settle() -> None:
    await anyio.wait_all_tasks_blocked()


class SizedStream(CountingStream):
    """Records the size of every write."""

    def __init__(self, inner: MemoryByteStream) -> None:
        super().__init__(inner)
        self.sizes: list[int] = []

    async def send(self, item: bytes) -> None:
        self.sizes.append(len(item))
        await super().send(item)


# ---- the write side ---------------------------------------------------------------------------


async def test_reading_goes_on_while_only_deliveries_are_queued(fake_clock: FakeClock) -> None:
    # Up to twice the high water mark: a subscriber's MESSAGEs (dispatch stops at the mark) must
    # not keep its connection's producer from being read.
    h = Harness(fake_clock, stream=StallingStream)
    stream = h.server_stream
    assert isinstance(stream, StallingStream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        stream.stalled = True
        queue_message(h, 6 * MIB)
        assert not h.session.writable
        assert h.session.reading_paused == frozenset()
        await h.client.send(flow(1))
        await settle()
        assert flows(h) == [1]
        tg.cancel_scope.cancel()


async def test_reading_stops_while_the_peer_leaves_its_replies_unread(
    fake_clock: FakeClock,
) -> None:
    h = Harness(fake_clock, stream=StallingStream)
    stream = h.server_stream
    assert isinstance(stream, StallingStream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        stream.stalled = True
        queue_message(h, 3 * MIB)
        await settle()  # the writer is stuck writing it
        queue_message(h, 6 * MIB)  # 9 MiB queued: past twice the high water mark
        assert h.session.reading_paused == {"replies unread"}
        await h.client.send(flow(1))  # the read already under way
        await h.client.send(flow(2))
        await settle()
        assert flows(h) == [1]
        stream.let_one_through()  # 6 MiB left: still above the low water mark
        await settle()
        assert flows(h) == [1]
        assert h.handler.writable_again_calls == 0
        stream.let_one_through()
        await settle()
        assert flows(h) == [1, 2]
        assert h.handler.writable_again_calls == 1
        tg.cancel_scope.cancel()


async def test_a_connection_past_the_outbound_cap_is_closed_and_its_queue_dropped(
    fake_clock: FakeClock,
) -> None:
    h = Harness(fake_clock, stream=StallingStream)
    stream = h.server_stream
    assert isinstance(stream, StallingStream)
    section = payload_section(b"x" * (8 * MIB), None)  # shared: costs the test 8 MiB once
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(h.run)
            await h.client.handshake()
            stream.stalled = True
            for _ in range(OUTBOUND_CAP // (8 * MIB) - 1):
                h.session.send_message(1, 1, 0, -1, 0, (), section)
            assert not h.session.close_reason  # 56 MiB: far above the high water mark
            h.session.send_message(1, 1, 0, -1, 0, (), section)
            h.session.send_message(1, 1, 0, -1, 0, (), section)  # 72 MiB: past the cap
            assert "does not read" in h.session.close_reason
            assert h.session._queued == 0
            h.session.send_command(c.Success(request_id=1))  # dropped, not queued
            assert h.session._queued == 0
            await h.done.wait()
    assert h.handler.released


async def test_a_large_queue_is_written_in_slices(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock, stream=SizedStream)
    stream = h.server_stream
    assert isinstance(stream, SizedStream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        stream.sizes.clear()
        for _ in range(40):
            queue_message(h, 100 * 1024)  # 4 MB queued before the writer runs
        await settle()
        assert sum(stream.sizes) > 40 * 100 * 1024
        assert len(stream.sizes) > 1
        assert max(stream.sizes) < WRITE_SLICE + 101 * 1024  # a slice plus at most one frame
        for _ in range(40):
            frame = await h.client.receive()
            assert isinstance(frame.command, c.Message)
        tg.cancel_scope.cancel()


# ---- pending publishes ------------------------------------------------------------------------


async def test_pending_publishes_pause_reading_until_half_of_them_are_done(
    fake_clock: FakeClock,
) -> None:
    guards = NetGuards(max_pending_publishes=4)
    h = Harness(fake_clock, guards=guards)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()

        def on_frame(frame: Frame) -> None:
            if frame.command == flow(1):
                h.session.pending_publishes(4, 400)  # as a read of four SENDs would

        h.handler.on_frame = on_frame
        await h.client.send(flow(1))
        await settle()
        assert h.session.reading_paused == {"pending publishes"}
        assert guards.publish_buffer.pending == 400
        await h.client.send(flow(2))
        await settle()
        assert flows(h) == [1]
        h.session.pending_publishes(3, 300)  # above half (Pulsar resumes at max / 2)
        await settle()
        assert flows(h) == [1]
        h.session.pending_publishes(2, 200)
        await settle()
        assert flows(h) == [1, 2]
        tg.cancel_scope.cancel()
    assert guards.publish_buffer.pending == 0  # the connection's bytes left with it


async def test_the_publish_buffer_pauses_every_connection(fake_clock: FakeClock) -> None:
    guards = NetGuards(publish_buffer=PublishBuffer(max_bytes=100))
    a = Harness(fake_clock, guards=guards)
    b = Harness(fake_clock, guards=guards)
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.run)
        tg.start_soon(b.run)
        await a.client.handshake()
        await b.client.handshake()
        a.session.pending_publishes(1, 150)
        assert guards.publish_buffer.limited
        await b.client.send(flow(1))  # b's read already under way
        await b.client.send(flow(2))
        await settle()
        assert flows(b) == [1]
        a.session.pending_publishes(1, 50)  # back to half of the limit
        await settle()
        assert flows(b) == [1, 2]
        tg.cancel_scope.cancel()


# ---- keep-alive -------------------------------------------------------------------------------


async def test_keepalive_counts_frames_not_bytes(fake_clock: FakeClock) -> None:
    # A peer that trickles a frame byte by byte is as silent as one that sends nothing.
    h = Harness(fake_clock)
    frame = struct.pack(">I", 1000) + b"\0" * 10
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        await fake_clock.advance(KEEPALIVE)  # the handshake was heard
        await h.client.send_raw(frame[:4])
        await fake_clock.advance(KEEPALIVE)
        assert await h.client.receive_command() == c.Ping()
        await h.client.send_raw(frame[4:])
        await fake_clock.advance(KEEPALIVE)
        await h.client.expect_closed()
    assert "keep-alive" in h.session.close_reason


async def test_keepalive_spares_a_connection_the_broker_stopped_reading(
    fake_clock: FakeClock,
) -> None:
    h = Harness(fake_clock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        h.session.pending_publishes(1000, 0)  # storage is slow: we stopped reading it
        for _ in range(4):
            await fake_clock.advance(KEEPALIVE)
        assert not h.session.close_reason  # Pulsar skips the check while auto-read is off
        h.session.pending_publishes(0, 0)
        await fake_clock.advance(KEEPALIVE)
        assert await h.client.receive_command() == c.Ping()
        await fake_clock.advance(KEEPALIVE)
        await h.client.expect_closed()
    assert "keep-alive" in h.session.close_reason


async def test_keepalive_drops_a_peer_that_takes_nothing(fake_clock: FakeClock) -> None:
    # A half-open connection, or a peer that never drains its socket: nothing is written, no
    # frame comes (we stopped reading it while it is unwritable).
    h = Harness(fake_clock, stream=StallingStream)
    stream = h.server_stream
    assert isinstance(stream, StallingStream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        stream.stalled = True
        queue_message(h, 5 * MIB)
        await fake_clock.advance(KEEPALIVE)  # the handshake was heard
        await fake_clock.advance(KEEPALIVE)  # a PING is queued behind the 5 MiB
        assert not h.session.close_reason
        await fake_clock.advance(KEEPALIVE)
        # Dropped at once, as Pulsar's ctx.close(): not after FLUSH_GUARD_SECONDS of real time
        # spent trying to flush the 5 MiB to a peer that takes nothing.
        with anyio.fail_after(FLUSH_GUARD_SECONDS / 2):
            await h.done.wait()
    assert "keep-alive" in h.session.close_reason


async def test_keepalive_keeps_a_peer_that_reads_slowly(fake_clock: FakeClock) -> None:
    h = Harness(fake_clock, stream=StallingStream)
    stream = h.server_stream
    assert isinstance(stream, StallingStream)
    async with anyio.create_task_group() as tg:
        tg.start_soon(h.run)
        await h.client.handshake()
        stream.stalled = True
        for _ in range(8):
            queue_message(h, MIB)  # written in 1 MiB slices
        await settle()
        assert not h.session.writable
        for _ in range(4):
            stream.let_one_through()  # it takes a slice per interval
            await fake_clock.advance(KEEPALIVE)
        assert not h.session.close_reason
        tg.cancel_scope.cancel()


# ---- partial frames and read turns ------------------------------------------------------------


async def test_partial_frames_over_the_budget_close_the_stalled_holder(
    fake_clock: FakeClock,
) -> None:
    guards = NetGuards(partial_frames=PartialFrames(budget=100 * 1024))
    a, b = Harness(fake_clock, guards=guards), Harness(fake_clock, guards=guards)
    part = struct.pack(">I", 1 << 20) + b"\0" * (60 * 1024)  # the start of a 1 MiB frame
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.run)
            tg.start_soon(b.run)
            await a.client.handshake()
            await b.client.handshake()
            await a.client.send_raw(part)  # ...and nothing more: a stalls
            await settle()
            assert guards.partial_frames.total == len(part)
            await b.client.send_raw(part)
            await a.done.wait()
            assert "partial frames" in a.session.close_reason
            assert not b.session.close_reason
            assert guards.partial_frames.total == len(part)
            tg.cancel_scope.cancel()


async def test_a_busy_connection_reads_in_its_turn_and_a_quiet_one_never_waits(
    fake_clock: FakeClock,
) -> None:
    gate = ReadGate(slots=1, stuck_after=3600)
    guards = NetGuards(read_gate=gate)
    busy, quiet = Harness(fake_clock, guards=guards), Harness(fake_clock, guards=guards)
    async with anyio.create_task_group() as tg:
        tg.start_soon(busy.run)
        tg.start_soon(quiet.run)
        await busy.client.handshake()
        await quiet.client.handshake()
        await gate.take()  # another busy connection holds the only turn
        big = b"".join(busy.client.conn.send(flow(i)) for i in range(10_000))  # ~110 KB
        await busy.client.send_raw(big)  # read without a turn: it was not busy before
        await settle()
        assert len(flows(busy)) == 10_000
        await busy.client.send(flow(99_999))
        await quiet.client.send(flow(7))
        await settle()
        assert flows(quiet) == [7]
        assert len(flows(busy)) == 10_000  # waiting for its turn
        gate.give_back()
        await settle()
        assert flows(busy)[-1] == 99_999
        tg.cancel_scope.cancel()
