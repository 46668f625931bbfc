"""The clock's interfaces (`Clock`, `Timer`, `Alarm`) and `AlarmTimer`, the usual `Timer`.

Async services that sleep or wait for deadlines take a `Clock` (STYLE.md §3); `protocol.clock`
names the two implementations, `AnyioClock` (`real`) and `FakeClock` (`fake`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Alarm", "AlarmTimer", "Clock", "Timer"]


class Clock(Protocol):
    """The time source every async service takes in its constructor."""

    def now(self) -> float:
        """Return monotonic seconds; only differences are meaningful."""
        ...

    def wall_ns(self) -> int:
        """Return wall-clock nanoseconds since the Unix epoch, for trace timestamps only."""
        ...

    def wall_ms(self) -> int:
        """Return wall-clock milliseconds since the Unix epoch (`wall_ns() // 1_000_000`).

        Pulsar's message timestamps (`publish_time`, `deliver_at_time`, schema timestamps) are
        epoch milliseconds.
        """
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until `now() >= deadline`; a deadline in the past only checkpoints."""
        ...

    async def sleep(self, delay: float) -> None:
        """Sleep for `delay` seconds (`sleep_until(now() + delay)`)."""
        ...

    def alarm(self) -> Alarm:
        """Return a new `Alarm` on this clock, off (its deadline infinite)."""
        ...

    def timer(self, callback: Callable[[], None]) -> Timer:
        """Return a new `Timer` that calls `callback`, off (its deadline infinite)."""
        ...


class Timer(Protocol):
    """A deadline at which `callback` is called, that any code may move (`Clock.timer`).

    Its owner runs `run` in a task for the timer's life. What a timer does when it falls due is
    the callback's: on most clocks that task wakes to call it (`AlarmTimer`); a clock that is
    the event loop's own may call it from the loop without waking any task (the simulator's,
    where a batch's publish delay and an ack group's time fall due once per message).
    """

    @property
    def deadline(self) -> float:
        """When `callback` is next called; `inf` (the start, and after each call) means never."""
        ...

    def set(self, deadline: float) -> None:
        """Move the deadline, earlier or later."""
        ...

    async def run(self) -> None:
        """Serve the timer until cancelled, calling back at each deadline reached.

        The deadline is reset to `inf` before each call (the callback may set another).

        Raises:
            Exception: what `callback` raised (the timer stops).
        """
        ...


class AlarmTimer:
    """A `Timer` served by a task that sleeps on an `Alarm` and wakes to call back.

    Args:
        alarm: The alarm the task sleeps on (its deadline is the timer's).
        callback: What is called at each deadline reached.
    """

    def __init__(self, alarm: Alarm, callback: Callable[[], None]) -> None:
        self._alarm = alarm
        self._callback = callback

    @property
    def deadline(self) -> float:
        """When `callback` is next called (`inf`: never)."""
        return self._alarm.deadline

    def set(self, deadline: float) -> None:
        """Move the deadline (the sleeping task is not woken)."""
        self._alarm.set(deadline)

    async def run(self) -> None:
        """Sleep until each deadline, reset it to `inf`, call back; until cancelled."""
        alarm = self._alarm
        callback = self._callback
        while True:
            await alarm.wait()
            alarm.set(math.inf)
            callback()


class Alarm(Protocol):
    """A deadline one task waits for and any code may move, without waking that task.

    A timer armed per message (a batch's publish delay, an ack group's time) would otherwise
    wake its task once to learn the deadline and once more when it falls due; moving a sleeping
    task's deadline costs no wake-up (trio's and asyncio's cancel-scope deadlines).
    """

    deadline: float
    """When `wait` returns: `now() >= deadline`; `inf` (the start) means not until moved."""

    def set(self, deadline: float) -> None:
        """Move the deadline, earlier or later, whether or not a task waits."""
        ...

    async def wait(self) -> None:
        """Return once the clock reaches the deadline as last set (a passed one checkpoints).

        One task at a time may wait.
        """
        ...
