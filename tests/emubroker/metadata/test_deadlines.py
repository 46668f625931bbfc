"""Timeouts on the injected clock, one timer task for all of them."""

from __future__ import annotations

import anyio
import pytest

from emubroker.metadata.deadlines import DeadlineWatchdog
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio


async def test_limits_fire_in_deadline_order_and_finished_ones_never_fire(
    fake_clock: FakeClock,
) -> None:
    watchdog = DeadlineWatchdog(fake_clock)
    fired: list[tuple[str, float]] = []

    async def wait(name: str, seconds: float) -> None:
        with watchdog.limit(seconds) as scope:
            await anyio.sleep_forever()
        assert scope.cancelled_caught
        fired.append((name, fake_clock.now()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(watchdog.run)
        tg.start_soon(wait, "late", 10.0)
        await anyio.wait_all_tasks_blocked()
        with watchdog.limit(1.0) as done_in_time:
            pass  # leaves at once: must not be cancelled later
        tg.start_soon(wait, "early", 5.0)  # earlier than what the timer sleeps for
        await anyio.wait_all_tasks_blocked()
        await fake_clock.advance(5.0)
        assert fired == [("early", 5.0)]
        await fake_clock.advance(5.0)
        assert fired == [("early", 5.0), ("late", 10.0)]
        assert not done_in_time.cancel_called
        tg.cancel_scope.cancel()
