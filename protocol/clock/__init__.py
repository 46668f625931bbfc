"""Time as an injected dependency (STYLE.md §3).

Async services that sleep or wait for deadlines take a `Clock`. Production passes `AnyioClock`;
tests pass `FakeClock`, which only moves when the test says so and behaves the same on asyncio and
trio. This is the only package allowed to read the real clock (`time`, `anyio.current_time`) or
to call `anyio.sleep_until` (ruff TID251 bans them elsewhere).

The interfaces are in `base`, the production clock in `real`, the tests' in `fake`; import them
from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.clock.base import Alarm, AlarmTimer, Clock, Timer
from protocol.clock.fake import FakeClock, FakeClockStatistics
from protocol.clock.real import AnyioClock, LoopAlarm

__all__ = [
    "Alarm",
    "AlarmTimer",
    "AnyioClock",
    "Clock",
    "FakeClock",
    "FakeClockStatistics",
    "LoopAlarm",
    "Timer",
]


if TYPE_CHECKING:
    # Static proof that both implementations satisfy Clock (checked by mypy, free at runtime).
    _anyio_clock: Clock = AnyioClock()
    _fake_clock: Clock = FakeClock()
