"""The tests' clock: virtual time that moves only when the test says so (`FakeClock`).

It behaves the same on asyncio and trio; `run_until_idle` and `autojump` read the event loop's
own time only to keep the loop's timeouts in step with the virtual time.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel
import msgspec

from protocol.clock.base import AlarmTimer

if TYPE_CHECKING:
    from collections.abc import Callable

    from protocol.clock.base import Alarm, Timer

__all__ = ["DEFAULT_MAX_IDLE_STEPS", "FakeClock", "FakeClockStatistics"]

# A test helper that loops this often without the sleepers draining is almost surely driving a
# periodic task (a heartbeat, the balancer tick); those never go idle, so use advance() instead.
DEFAULT_MAX_IDLE_STEPS = 10_000

# Compact the heap once cancelled sleepers' leftover entries outnumber live ones this much, so a
# long test that keeps cancelling sleeps (timeouts that did not fire) cannot grow it without bound.
_STALE_SLACK = 64

# Seconds `FakeClock.autojump` moves the loop's own clock on when nothing sleeps on the clock.
_IDLE_POLL = 0.001


class FakeClockStatistics(msgspec.Struct, frozen=True):
    """A snapshot of a `FakeClock`.

    Attributes:
        now: The clock's current time.
        sleepers: Tasks currently blocked in `sleep_until`.
        next_deadline: The earliest deadline among them, or None if there are none.
    """

    now: float
    sleepers: int
    next_deadline: float | None


class FakeClock:
    """A clock that moves only when a test calls `advance` or `run_until_idle`.

    Each sleeper is a heap entry `(deadline, seq, event)`; `seq` breaks ties so sleepers with equal
    deadlines wake in the order they went to sleep, and so events are never compared. A cancelled
    sleeper leaves its entry behind (removing from the middle of a heap is O(n)); it is skipped when
    it reaches the top. Only one task may move the clock at a time.

    Args:
        start: The initial value of `now()`.
        epoch: Wall-clock seconds since the Unix epoch that correspond to `now() == 0`.
    """

    def __init__(self, start: float = 0.0, *, epoch: float = 1_700_000_000.0) -> None:
        self._now = start
        # Kept in integer nanoseconds: 1.7e18 ns is beyond a float's 2**53 exact range.
        self._epoch_ns = round(epoch * 1_000_000_000)
        self._heap: list[tuple[float, int, anyio.Event]] = []
        self._waiting: set[int] = (
            set()
        )  # seqs of sleepers that have been neither woken nor cancelled
        self._seq = itertools.count()

    def now(self) -> float:
        """The virtual time, moved only by `advance` and `run_until_idle`."""
        return self._now

    def wall_ns(self) -> int:
        """The epoch given at construction plus `now()`, in nanoseconds."""
        return self._epoch_ns + round(self._now * 1_000_000_000)

    def wall_ms(self) -> int:
        """`wall_ns()` in milliseconds."""
        return self.wall_ns() // 1_000_000

    async def sleep_until(self, deadline: float) -> None:
        """Block until the clock is moved to `deadline` or beyond.

        Raises:
            ValueError: `deadline` is NaN, which would corrupt the heap order.
        """
        if math.isnan(deadline):
            raise ValueError("deadline is NaN")
        if deadline <= self._now:
            await anyio.lowlevel.checkpoint()
            return
        seq = next(self._seq)
        event = anyio.Event()
        heapq.heappush(self._heap, (deadline, seq, event))
        self._waiting.add(seq)
        try:
            await event.wait()
        finally:
            self._forget(seq)

    async def sleep(self, delay: float) -> None:
        """Sleep until the virtual time has moved `delay` seconds on."""
        await self.sleep_until(self._now + delay)

    def alarm(self) -> Alarm:
        """An `Alarm` woken by `advance` and `run_until_idle` like the sleepers."""
        return _FakeAlarm(self)

    def timer(self, callback: Callable[[], None]) -> Timer:
        """An `AlarmTimer` on one of this clock's alarms."""
        return AlarmTimer(self.alarm(), callback)

    def _sleeper(self, deadline: float, event: anyio.Event) -> int:
        """Put `event` among the sleepers, set when the clock reaches `deadline`; its seq."""
        seq = next(self._seq)
        heapq.heappush(self._heap, (deadline, seq, event))
        self._waiting.add(seq)
        return seq

    def _forget(self, seq: int) -> None:
        """Mark sleeper `seq` gone: no-op if it was woken; if not, its heap entry is stale."""
        self._waiting.discard(seq)
        if len(self._heap) > 2 * len(self._waiting) + _STALE_SLACK:
            self._heap = [entry for entry in self._heap if entry[1] in self._waiting]
            heapq.heapify(self._heap)

    async def advance(self, dt: float) -> None:
        """Move time forward by `dt`, waking due sleepers one at a time in deadline order.

        Before each wake `now()` is set to that sleeper's deadline, and after it all tasks are let
        run until blocked, so a woken task that sleeps again within the window wakes in this same
        call. Ends with `now() == start + dt`.

        Args:
            dt: Seconds to move forward; zero only lets tasks settle.

        Raises:
            ValueError: `dt` is negative or NaN.
        """
        if not dt >= 0:
            raise ValueError(f"cannot move a clock by {dt!r} seconds")
        await self._advance_to(self._now + dt)

    async def advance_to(self, target: float) -> None:
        """Move time forward to `target` exactly, as `advance` does (no-op if not ahead).

        Raises:
            ValueError: `target` is NaN.
        """
        if math.isnan(target):
            raise ValueError("cannot move a clock to NaN")
        await self._advance_to(target)

    async def run_until_idle(self, *, max_steps: int = DEFAULT_MAX_IDLE_STEPS) -> None:
        """Jump straight to each next deadline until no sleeper with a finite deadline remains.

        Like trio's autojump clock, but explicit. Sleepers waiting for an infinite deadline never
        wake and do not count.

        Args:
            max_steps: Jumps allowed before giving up.

        Raises:
            RuntimeError: Sleepers remain after `max_steps` jumps (likely a periodic task).
        """
        # Let tasks that were just started reach their sleeps before looking at the heap.
        await anyio.wait_all_tasks_blocked()
        for _ in range(max_steps):
            deadline = self._next_deadline()
            if deadline is None or math.isinf(deadline):
                return
            # Jump to the absolute deadline: now + (deadline - now) can round below it.
            await self._advance_to(deadline)
        raise RuntimeError(
            f"{len(self._waiting)} sleepers remain after {max_steps} jumps (now={self._now}); "
            "a periodic task never goes idle, drive it with advance() instead"
        )

    async def autojump(self, *, jump_loop: Callable[[float], None] | None = None) -> None:
        """Move to each next deadline as soon as every other task waits; until cancelled.

        Virtual time for a whole program (the simulator): run this beside it. The sleepers due
        at a deadline are woken together, in the order they went to sleep, so equal deadlines
        resolve the same way every run on a deterministic scheduler (trio's ``MockClock``
        autojump wakes them in an order set by object addresses, which differ run to run).

        Args:
            jump_loop: Moves the event loop's clock forward by the given seconds (trio's
                ``MockClock.jump`` at rate 0), keeping it level with this clock so that the
                few waits made on the loop's clock (``anyio.fail_after``) are virtual too.
                When nothing sleeps on this clock, the loop's clock is moved on by a
                millisecond each time every task waits, until its own timers fire.
        """
        loop_offset = self._now - anyio.current_time()
        while True:
            await anyio.wait_all_tasks_blocked()
            deadline = self._next_deadline()
            if deadline is None or math.isinf(deadline):
                # Nothing sleeps here: the loop's own timers (guards) are all that can move.
                if jump_loop is None:
                    await anyio.sleep(_IDLE_POLL)
                else:
                    jump_loop(_IDLE_POLL)
                    await anyio.lowlevel.checkpoint()
                continue
            behind = deadline - (anyio.current_time() + loop_offset)
            if jump_loop is not None and behind > 0:
                jump_loop(behind)
            self._now = max(self._now, deadline)
            while (due := self._next_deadline()) is not None and due <= deadline:
                heapq.heappop(self._heap)[2].set()  # (a compaction replaces the list)

    def statistics(self) -> FakeClockStatistics:
        """What the clock is doing now: its time, how many tasks sleep, the next deadline."""
        return FakeClockStatistics(
            now=self._now, sleepers=len(self._waiting), next_deadline=self._next_deadline()
        )

    async def _advance_to(self, target: float) -> None:
        # Settle first, so a task started just before this call is asleep (at the current time)
        # rather than computing its deadline from a clock that has already jumped.
        await anyio.wait_all_tasks_blocked()
        while (deadline := self._next_deadline()) is not None and deadline <= target:
            _, _, event = heapq.heappop(self._heap)
            self._now = deadline
            event.set()
            await anyio.wait_all_tasks_blocked()
        self._now = max(self._now, target)

    def _next_deadline(self) -> float | None:
        """Drop cancelled sleepers off the top of the heap and return the earliest deadline."""
        while self._heap and self._heap[0][1] not in self._waiting:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None


class _FakeAlarm:
    """A `FakeClock`'s `Alarm`: a sleeper on the clock's heap.

    Moved before the deadline it sleeps until, it is woken to sleep again until the new one (a
    test clock: the extra wake-up is of no account).
    """

    def __init__(self, clock: FakeClock) -> None:
        self.deadline = math.inf
        self._clock = clock
        self._event: anyio.Event | None = None
        self._until = math.inf

    def set(self, deadline: float) -> None:
        """Move the deadline (an earlier one wakes the waiter, which sleeps again until it)."""
        if math.isnan(deadline):
            raise ValueError("deadline is NaN")
        self.deadline = deadline
        if deadline < self._until and self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        """Sleep until the clock reaches the deadline as last set."""
        clock = self._clock
        if clock.now() >= self.deadline:
            await anyio.lowlevel.checkpoint()
            return
        while clock.now() < self.deadline:
            self._event = event = anyio.Event()
            self._until = until = self.deadline
            seq = None if math.isinf(until) else clock._sleeper(until, event)
            try:
                await event.wait()
            finally:
                self._event, self._until = None, math.inf
                if seq is not None:
                    clock._forget(seq)
