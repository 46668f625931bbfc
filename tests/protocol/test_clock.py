from __future__ import annotations

import math
from functools import partial

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.clock import AnyioClock, Clock, FakeClock, LoopAlarm

pytestmark = pytest.mark.anyio


async def _sleep_and_record(clock: Clock, deadline: float, log: list[tuple[float, float]]) -> None:
    await clock.sleep_until(deadline)
    log.append((deadline, clock.now()))


class TestFakeClock:
    async def test_advance_moves_now_without_sleepers(self, fake_clock: FakeClock) -> None:
        await fake_clock.advance(1.5)
        await fake_clock.advance(0.25)
        assert fake_clock.now() == 1.75

    async def test_start_sets_initial_now(self) -> None:
        clock = FakeClock(start=100.0)
        assert clock.now() == 100.0
        woke_at: list[float] = []

        async def sleeper() -> None:
            await clock.sleep(0.5)  # relative to now(), so the deadline is 100.5
            woke_at.append(clock.now())

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper)
            await clock.advance(0.5)
        assert woke_at == [100.5]

    async def test_sleepers_wake_in_deadline_order_at_their_deadline(
        self, fake_clock: FakeClock
    ) -> None:
        log: list[tuple[float, float]] = []
        async with anyio.create_task_group() as tg:
            for deadline in (3.0, 1.0, 2.0):
                tg.start_soon(_sleep_and_record, fake_clock, deadline, log)
            await fake_clock.advance(5.0)
        assert log == [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]
        assert fake_clock.now() == 5.0

    async def test_equal_deadlines_wake_in_sleep_order(self, fake_clock: FakeClock) -> None:
        order: list[str] = []

        async def sleeper(name: str) -> None:
            await fake_clock.sleep_until(1.0)
            order.append(name)

        async with anyio.create_task_group() as tg:
            for name in "abc":
                tg.start_soon(sleeper, name)
                await anyio.wait_all_tasks_blocked()
            await fake_clock.advance(1.0)
        assert order == ["a", "b", "c"]

    async def test_advance_wakes_only_due_sleepers(self, fake_clock: FakeClock) -> None:
        log: list[tuple[float, float]] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_sleep_and_record, fake_clock, 2.0, log)
            await fake_clock.advance(1.0)
            assert log == []
            assert fake_clock.statistics().sleepers == 1
            await fake_clock.advance(1.0)
            assert log == [(2.0, 2.0)]

    async def test_woken_task_sleeping_again_wakes_within_same_advance(
        self, fake_clock: FakeClock
    ) -> None:
        ticks: list[float] = []

        async def ticker() -> None:
            for _ in range(3):
                await fake_clock.sleep(1.0)
                ticks.append(fake_clock.now())

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await fake_clock.advance(3.5)
        assert ticks == [1.0, 2.0, 3.0]
        assert fake_clock.now() == 3.5

    async def test_run_until_idle_jumps_to_each_deadline(self, fake_clock: FakeClock) -> None:
        log: list[tuple[float, float]] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_sleep_and_record, fake_clock, 100.0, log)
            tg.start_soon(_sleep_and_record, fake_clock, 10.0, log)
            await fake_clock.run_until_idle()
        assert log == [(10.0, 10.0), (100.0, 100.0)]
        assert fake_clock.now() == 100.0
        assert fake_clock.statistics().sleepers == 0

    async def test_run_until_idle_ignores_infinite_deadline(self, fake_clock: FakeClock) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(fake_clock.sleep_until, math.inf)
            await fake_clock.run_until_idle()
            assert fake_clock.now() == 0.0
            tg.cancel_scope.cancel()

    async def test_run_until_idle_gives_up_on_periodic_task(self, fake_clock: FakeClock) -> None:
        async def heartbeat() -> None:
            while True:
                await fake_clock.sleep(1.0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            with pytest.raises(RuntimeError, match="1 sleepers remain after 5 jumps"):
                await fake_clock.run_until_idle(max_steps=5)
            assert fake_clock.now() == 5.0
            tg.cancel_scope.cancel()

    async def test_cancelled_sleeper_is_skipped(self, fake_clock: FakeClock) -> None:
        log: list[tuple[float, float]] = []
        cancelled = anyio.Event()

        async def doomed() -> None:
            with anyio.CancelScope() as scope:
                scope_box.append(scope)
                await fake_clock.sleep_until(1.0)
                log.append((1.0, fake_clock.now()))  # pragma: no cover - must not run
            cancelled.set()

        scope_box: list[anyio.CancelScope] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(doomed)
            tg.start_soon(_sleep_and_record, fake_clock, 2.0, log)
            await anyio.wait_all_tasks_blocked()
            assert fake_clock.statistics().sleepers == 2
            scope_box[0].cancel()
            await cancelled.wait()
            stats = fake_clock.statistics()
            assert (stats.sleepers, stats.next_deadline) == (1, 2.0)
            await fake_clock.advance(3.0)
        assert log == [(2.0, 2.0)]

    async def test_many_cancelled_sleepers_do_not_accumulate(self, fake_clock: FakeClock) -> None:
        for i in range(500):
            with anyio.CancelScope() as scope:
                scope.cancel()  # the sleep registers, then is cancelled at its first checkpoint
                await fake_clock.sleep_until(1_000.0 + i)
        assert fake_clock.statistics().sleepers == 0
        assert len(fake_clock._heap) <= 100  # compacted, not 500 stale entries
        await fake_clock.run_until_idle()
        assert fake_clock.now() == 0.0

    async def test_sleep_until_past_deadline_returns_without_moving_time(
        self, fake_clock: FakeClock
    ) -> None:
        await fake_clock.advance(5.0)
        await fake_clock.sleep_until(1.0)
        await fake_clock.sleep_until(5.0)
        await fake_clock.sleep(-1.0)
        assert fake_clock.now() == 5.0
        assert fake_clock.statistics().sleepers == 0

    async def test_advance_lets_a_just_started_task_sleep_first(
        self, fake_clock: FakeClock
    ) -> None:
        woke_at: list[float] = []

        async def sleeper() -> None:
            await fake_clock.sleep(1.0)
            woke_at.append(fake_clock.now())

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper)  # not yet running when advance() is called
            await fake_clock.advance(1.0)
        assert woke_at == [1.0]

    @pytest.mark.parametrize("dt", [-0.001, math.nan])
    async def test_advance_rejects_backwards_or_nan(self, fake_clock: FakeClock, dt: float) -> None:
        with pytest.raises(ValueError, match="cannot move a clock"):
            await fake_clock.advance(dt)

    async def test_sleep_until_nan_raises(self, fake_clock: FakeClock) -> None:
        with pytest.raises(ValueError, match="NaN"):
            await fake_clock.sleep_until(math.nan)

    async def test_wall_ns_tracks_now(self) -> None:
        clock = FakeClock(epoch=1_700_000_000)
        assert clock.wall_ns() == 1_700_000_000 * 10**9
        await clock.advance(1.5)
        assert clock.wall_ns() == 1_700_000_001_500_000_000

    async def test_wall_ns_default_epoch_and_start(self) -> None:
        assert FakeClock(start=2.0).wall_ns() == 1_700_000_002 * 10**9

    async def test_wall_ms_is_wall_ns_in_whole_milliseconds(self) -> None:
        clock = FakeClock(epoch=1_700_000_000)
        await clock.advance(1.2349)
        assert clock.wall_ms() == 1_700_000_001_234
        assert clock.wall_ms() == clock.wall_ns() // 1_000_000

    @given(deadlines=st.lists(st.floats(min_value=0.001, max_value=1e6), max_size=20))
    async def test_any_deadlines_wake_sorted_and_on_time(self, deadlines: list[float]) -> None:
        clock = FakeClock()
        log: list[tuple[float, float]] = []
        async with anyio.create_task_group() as tg:
            for deadline in deadlines:
                tg.start_soon(_sleep_and_record, clock, deadline, log)
            await clock.run_until_idle()
        assert [d for d, _ in log] == sorted(deadlines)
        assert all(d == woke for d, woke in log)


class TestAnyioClock:
    async def test_now_is_monotonic(self) -> None:
        clock = AnyioClock()
        readings = [clock.now() for _ in range(100)]
        assert readings == sorted(readings)

    async def test_sleep_until_past_deadline_returns(self) -> None:
        clock = AnyioClock()
        with anyio.fail_after(5):  # guard only: a past deadline must not block
            await clock.sleep_until(clock.now() - 10.0)
            await clock.sleep(-1.0)
            await clock.sleep(0)

    async def test_wall_ns_is_recent_epoch_nanoseconds(self) -> None:
        assert AnyioClock().wall_ns() > 1_600_000_000 * 10**9

    async def test_wall_ms_is_recent_epoch_milliseconds(self) -> None:
        clock = AnyioClock()
        before = clock.wall_ns() // 1_000_000
        ms = clock.wall_ms()
        assert before <= ms <= clock.wall_ns() // 1_000_000
        assert ms > 1_600_000_000 * 10**3


class TestFakeAlarm:
    async def test_an_alarm_is_off_until_set_and_rings_at_its_deadline(
        self, fake_clock: FakeClock
    ) -> None:
        alarm = fake_clock.alarm()
        rang: list[float] = []

        async def wait() -> None:
            await alarm.wait()
            rang.append(fake_clock.now())

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await fake_clock.advance(100.0)
            assert rang == []  # off: an infinite deadline
            alarm.set(103.0)
            await fake_clock.advance(2.0)
            assert rang == []
            await fake_clock.advance(5.0)
        assert rang == [103.0]

    async def test_an_alarm_moved_while_waited_for_rings_at_the_new_deadline(
        self, fake_clock: FakeClock
    ) -> None:
        alarm = fake_clock.alarm()
        alarm.set(10.0)
        rang: list[float] = []

        async def wait() -> None:
            await alarm.wait()
            rang.append(fake_clock.now())

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            alarm.set(5.0)  # earlier
            alarm.set(7.0)  # later again, still before the first
            await fake_clock.run_until_idle()
        assert rang == [7.0]
        alarm.set(20.0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.wait_all_tasks_blocked()
            alarm.set(30.0)  # later: the sleep at 20 ends and sleeps on
            await fake_clock.run_until_idle()
        assert rang == [7.0, 30.0]

    async def test_a_passed_deadline_only_checkpoints(self, fake_clock: FakeClock) -> None:
        alarm = fake_clock.alarm()
        alarm.set(fake_clock.now())
        with anyio.fail_after(5):  # guard only
            await alarm.wait()
        with pytest.raises(ValueError, match="NaN"):
            alarm.set(math.nan)


class TestLoopAlarm:
    async def test_a_passed_deadline_only_checkpoints(self) -> None:
        alarm = AnyioClock().alarm()
        alarm.set(AnyioClock().now() - 1.0)
        with anyio.fail_after(5):  # guard only
            await alarm.wait()


def test_moving_a_waited_for_loop_alarm_does_not_wake_its_task() -> None:
    import trio
    import trio.testing

    steps: list[str] = []

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            steps.append(task.name)

    async def main() -> None:
        alarm = LoopAlarm(trio.current_time, lambda deadline: deadline)
        rang: list[float] = []

        async def waiter() -> None:
            await alarm.wait()
            rang.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter, name="waiter")
            await trio.testing.wait_all_tasks_blocked()
            for deadline in (50.0, 10.0, 30.0):
                alarm.set(deadline)
                await trio.testing.wait_all_tasks_blocked()
        assert rang == [30.0]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0), instruments=[Steps()])
    assert steps.count("waiter") == 2  # its start and its end, none per move


class TestAutojump:
    async def test_jumps_to_each_deadline_once_every_task_waits(self) -> None:
        clock = FakeClock(start=10.0)
        log: list[tuple[str, float]] = []

        async def ticker(name: str, period: float, times: int) -> None:
            for _ in range(times):
                await clock.sleep(period)
                log.append((name, clock.now()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(clock.autojump)
            async with anyio.create_task_group() as tickers:
                tickers.start_soon(ticker, "fast", 1.0, 4)
                tickers.start_soon(ticker, "slow", 2.5, 2)
            tg.cancel_scope.cancel()
        assert log == [
            ("fast", 11.0),
            ("fast", 12.0),
            ("slow", 12.5),
            ("fast", 13.0),
            ("fast", 14.0),
            ("slow", 15.0),
        ]
        assert clock.now() == 15.0

    async def test_tasks_running_between_deadlines_see_time_stand_still(self) -> None:
        clock = FakeClock()
        seen: list[float] = []

        async def busy() -> None:
            for _ in range(100):
                seen.append(clock.now())
                await anyio.lowlevel.checkpoint()  # runnable all along: no jump meanwhile

        async def sleeper() -> None:
            await clock.sleep(1.0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(clock.autojump)
            async with anyio.create_task_group() as work:
                work.start_soon(sleeper)
                work.start_soon(busy)
            tg.cancel_scope.cancel()
        assert set(seen) == {0.0}
        assert clock.now() == 1.0

    async def test_the_loop_clock_is_jumped_along(self) -> None:
        clock = FakeClock()
        jumps: list[float] = []

        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(clock.autojump, jump_loop=jumps.append))
            await clock.sleep(30.0)
            tg.cancel_scope.cancel()
        # The loop's own clock runs in real time here: it is behind by almost the whole jump.
        assert len(jumps) == 1
        assert 29.0 < jumps[0] <= 30.0

    def test_with_nothing_asleep_here_the_loop_clock_moves_until_its_timers_fire(self) -> None:
        # A loop on trio's MockClock at rate 0 moves only when jumped: a wait on the loop's own
        # clock (a guard) ends only because autojump moves it, here by whole milliseconds.
        from trio.testing import MockClock

        loop_clock = MockClock()
        clock = FakeClock()

        async def main() -> float:
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(clock.autojump, jump_loop=loop_clock.jump))
                with anyio.move_on_after(0.25):
                    await anyio.Event().wait()
                tg.cancel_scope.cancel()
            return loop_clock.current_time()

        ended = anyio.run(main, backend="trio", backend_options={"clock": loop_clock})
        assert 0.25 <= ended < 0.26
        assert clock.now() == 0.0
