"""The broker-wide bounds: connection counts, publish buffer, read turns, partial frames."""

from __future__ import annotations

import anyio
import pytest

from emubroker.config import load_config
from emubroker.net.guards import (
    PARTIAL_FRAMES_BUDGET,
    ConnectionCounter,
    NetGuards,
    PartialFrames,
    PublishBuffer,
    ReadGate,
)

MIB = 1024 * 1024


class TestConnectionCounter:
    def test_no_limit_by_default(self) -> None:
        counter = ConnectionCounter()
        assert all(counter.admit("10.0.0.1") is None for _ in range(1000))
        assert counter.total == 1000

    def test_broker_limit_refuses_with_pulsars_message_and_counts_nothing(self) -> None:
        counter = ConnectionCounter(max_total=2)
        assert counter.admit("a") is None
        assert counter.admit("b") is None
        assert counter.admit("c") == "Reached the maximum number of connections"
        assert counter.total == 2
        counter.release("a")
        assert counter.admit("c") is None

    def test_per_ip_limit_counts_each_address_apart(self) -> None:
        counter = ConnectionCounter(max_per_ip=1)
        assert counter.admit("127.0.0.1") is None
        assert counter.admit("127.0.0.1") == (
            "Reached the maximum number of connections on address 127.0.0.1"
        )
        assert counter.admit("::1") is None
        counter.release("127.0.0.1")
        assert counter.connections("127.0.0.1") == 0
        assert counter.admit("127.0.0.1") is None


class TestPublishBuffer:
    def test_limited_above_the_limit_and_until_back_to_half(self) -> None:
        buffer = PublishBuffer(max_bytes=100)
        buffer.add(100)
        assert not buffer.limited  # Pulsar: pendingBytes > max
        buffer.add(1)
        assert buffer.limited
        buffer.add(-50)  # 51: above half
        assert buffer.limited
        buffer.add(-1)  # 50: half
        assert not buffer.limited
        assert buffer.times_limited == 1

    def test_zero_means_no_limit(self) -> None:
        buffer = PublishBuffer(max_bytes=0)
        buffer.add(10**12)
        assert not buffer.limited

    def test_resize_applies_at_once(self) -> None:
        buffer = PublishBuffer(max_bytes=100)
        buffer.add(80)
        buffer.resize(50)
        assert buffer.limited
        buffer.resize(0)  # turned off
        assert not buffer.limited

    @pytest.mark.anyio
    async def test_waiters_resume_when_it_drains(self) -> None:
        buffer = PublishBuffer(max_bytes=10)
        buffer.add(11)
        resumed = []

        async def wait() -> None:
            await buffer.wait_resumed()
            resumed.append(True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            assert resumed == []
            buffer.add(-6)  # 5: half
        assert resumed == [True, True]


@pytest.mark.anyio
async def test_read_turns_go_in_the_order_they_were_asked_for() -> None:
    gate = ReadGate(slots=1, stuck_after=3600)
    order: list[int] = []
    assert await gate.take()  # held, as by a busy connection reading

    async def reader(i: int) -> None:
        assert await gate.take()
        order.append(i)
        gate.give_back()

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(reader, i)
            await anyio.wait_all_tasks_blocked()
        assert order == []
        assert gate.waits == 3
        gate.give_back()
    assert order == [0, 1, 2]


@pytest.mark.anyio
async def test_a_waiter_goes_ahead_without_a_turn_when_the_turns_are_stuck() -> None:
    # The holders wait for bytes from peers that went quiet: no turn changes hands.
    gate = ReadGate(slots=1, stuck_after=0)
    assert await gate.take()
    assert not await gate.take()
    assert gate.overdrawn == 1
    gate.give_back()
    assert await gate.take()  # free again: taken as usual


class Holder:
    def __init__(self, name: str, *, stalled: bool = True) -> None:
        self.name = name
        self.stalled = stalled
        self.aborted = ""

    def abort(self, reason: str) -> None:
        self.aborted = reason

    def __repr__(self) -> str:
        return self.name


class TestPartialFrames:
    def test_within_budget_nobody_is_closed(self) -> None:
        frames = PartialFrames(budget=10)
        a, b = Holder("a"), Holder("b")
        frames.update(a, 5)
        frames.update(b, 5)
        assert frames.total == 10
        assert not a.aborted
        assert not b.aborted

    def test_over_budget_the_stalest_stalled_holder_is_closed(self) -> None:
        frames = PartialFrames(budget=10)
        a, b, c = Holder("a"), Holder("b"), Holder("c")
        frames.update(a, 4)
        frames.update(b, 4)
        frames.update(a, 5)  # a grew: b is now the one that moved least recently
        frames.update(c, 4)
        assert b.aborted.startswith("partial frames over the broker's budget")
        assert not a.aborted
        assert not c.aborted
        assert frames.total == 9
        assert frames.evicted == 1

    def test_stalled_holders_go_before_ones_waiting_for_their_turn(self) -> None:
        frames = PartialFrames(budget=10)
        busy, stalled, growing = Holder("busy", stalled=False), Holder("stalled"), Holder("g")
        frames.update(busy, 4)  # stalest, but it has bytes waiting for its read turn
        frames.update(stalled, 4)
        frames.update(growing, 4)
        assert stalled.aborted
        assert not busy.aborted
        assert not growing.aborted

    def test_if_no_holder_is_stalled_the_stalest_goes_but_never_the_one_growing(self) -> None:
        frames = PartialFrames(budget=10)
        old, growing = Holder("old", stalled=False), Holder("growing", stalled=False)
        frames.update(old, 6)
        frames.update(growing, 6)
        assert old.aborted
        assert not growing.aborted
        frames.update(growing, 11)  # alone over the budget: nobody else to close
        assert not growing.aborted

    def test_a_completed_frame_and_a_closed_connection_free_their_bytes(self) -> None:
        frames = PartialFrames(budget=10)
        a, b = Holder("a"), Holder("b")
        frames.update(a, 6)
        frames.update(a, 0)
        frames.update(b, 3)
        frames.forget(b)
        assert frames.total == 0


@pytest.mark.anyio
async def test_guards_follow_the_configuration() -> None:
    config = load_config(
        overrides={
            "brokerMaxConnections": 5,
            "brokerMaxConnectionsPerIp": 2,
            "maxPendingPublishRequestsPerConnection": 7,
            "maxMessagePublishBufferSizeInMB": 3,
        },
        environ={},
    )
    guards = NetGuards.from_config(config)
    assert (guards.connections.max_total, guards.connections.max_per_ip) == (5, 2)
    assert guards.max_pending_publishes == 7
    assert guards.publish_buffer.max_bytes == 3 * MIB
    assert guards.partial_frames.budget == PARTIAL_FRAMES_BUDGET
    huge = load_config(overrides={"maxMessageSize": 100 * MIB}, environ={})
    # The budget always holds a few frames of the largest size allowed.
    assert NetGuards.from_config(huge).partial_frames.budget == 4 * (100 * MIB + 10 * 1024)


def test_publish_buffer_defaults_to_pulsars_floor_and_minus_one_turns_it_off() -> None:
    assert load_config(environ={}).publish_buffer_bytes() == 64 * MIB
    off = load_config(overrides={"maxMessagePublishBufferSizeInMB": -1}, environ={})
    assert off.publish_buffer_bytes() == 0
