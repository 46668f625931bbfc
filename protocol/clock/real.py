"""The production clock: the OS clocks and the event loop's own timers (`AnyioClock`)."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from protocol.clock.base import AlarmTimer

if TYPE_CHECKING:
    from collections.abc import Callable

    from protocol.clock.base import Alarm, Timer

__all__ = ["AnyioClock", "LoopAlarm"]


class LoopAlarm:
    """An `Alarm` on the event loop's own timers.

    The waiter sleeps in a cancel scope whose deadline `set` moves.

    Args:
        now: The clock's time.
        to_loop: Converts a deadline on the clock to one on the event loop's clock (what
            cancel scopes use).
    """

    def __init__(self, now: Callable[[], float], to_loop: Callable[[float], float]) -> None:
        self.deadline = math.inf
        self._now = now
        self._to_loop = to_loop
        self._scope: anyio.CancelScope | None = None

    def set(self, deadline: float) -> None:
        """Move the deadline; a waiting task's sleep ends at the new one."""
        self.deadline = deadline
        scope = self._scope
        if scope is not None:
            scope.deadline = self._to_loop(deadline)

    async def wait(self) -> None:
        """Sleep until the clock reaches the deadline as last set."""
        if self._now() >= self.deadline:
            await anyio.lowlevel.checkpoint()
            return
        # A scope ends at its loop deadline; the clock may read a hair behind that (another
        # time source), so the deadline is checked on the clock again.
        while self._now() < self.deadline:
            with anyio.CancelScope(deadline=self._to_loop(self.deadline)) as scope:
                self._scope = scope
                try:
                    await anyio.sleep_forever()
                finally:
                    self._scope = None


class AnyioClock:
    """The production clock: the OS monotonic clock, the OS wall clock, anyio's sleeps.

    `now()` is `time.monotonic()` rather than `anyio.current_time()`: the hot paths read the
    clock per message (send deadlines, batch start times), and anyio's lookup of the running
    backend costs microseconds per call, the clock read itself nanoseconds. Trio's clock has an
    offset from the OS clock, so sleeps convert deadlines into relative delays for anyio. (This
    departs from STYLE.md's sketch; it also means a trio `MockClock` does not move `now()`: tests
    that want virtual time use `FakeClock`.)
    """

    def now(self) -> float:
        """Monotonic seconds (`time.monotonic`)."""
        return time.monotonic()

    def wall_ns(self) -> int:
        """Nanoseconds since the Unix epoch (`time.time_ns`)."""
        return time.time_ns()

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        return time.time_ns() // 1_000_000

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until `now() >= deadline` (a deadline in the past still checkpoints)."""
        # A zero delay is still a checkpoint, as the Protocol asks; trio refuses negative ones.
        await anyio.sleep(max(deadline - time.monotonic(), 0.0))

    async def sleep(self, delay: float) -> None:
        """Sleep `delay` seconds (a negative delay counts as 0)."""
        await anyio.sleep(max(delay, 0.0))

    def alarm(self) -> Alarm:
        """A `LoopAlarm` (deadlines moved from the monotonic clock to the loop's at each set)."""
        return LoopAlarm(time.monotonic, _monotonic_to_loop)

    def timer(self, callback: Callable[[], None]) -> Timer:
        """An `AlarmTimer` on a `LoopAlarm`."""
        return AlarmTimer(self.alarm(), callback)


def _monotonic_to_loop(deadline: float) -> float:
    return deadline - time.monotonic() + anyio.current_time()
