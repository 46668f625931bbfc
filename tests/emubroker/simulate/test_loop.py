"""The simulator's loop: trio's scheduling drawn from the run's own seeded generator."""

from __future__ import annotations

import collections
import gc
import threading

import anyio
import anyio.lowlevel
import trio._core._run
import trio.abc
import trio.lowlevel

from emubroker.simulate.loop import SIMULATION_GC_THRESHOLD, VirtualClock, run_loop
from protocol import commands as c
from protocol.client import open_client
from tests.emubroker.simulate.trio_thread import another_trio_loop_running
from tests.support.fake_broker import fake_broker


async def _schedule() -> list[int]:
    """The order in which six tasks, yielding at every step, were run."""
    order: list[int] = []

    async def task(index: int) -> None:
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
            order.append(index)

    async with anyio.create_task_group() as tg:
        for index in range(6):
            tg.start_soon(task, index)
    return order


def test_a_seed_gives_one_schedule_and_another_seed_another() -> None:
    first = run_loop(_schedule, clock=VirtualClock(), seed=7)
    assert run_loop(_schedule, clock=VirtualClock(), seed=7) == first
    assert run_loop(_schedule, clock=VirtualClock(), seed=8) != first
    assert first != sorted(first)  # shuffled, not in creation order


def test_another_trio_loop_in_a_thread_does_not_change_the_schedule() -> None:
    alone = run_loop(_schedule, clock=VirtualClock(), seed=7)
    with another_trio_loop_running():
        beside = [run_loop(_schedule, clock=VirtualClock(), seed=7) for _ in range(20)]
    assert all(schedule == alone for schedule in beside)


def test_two_runs_at_once_in_two_threads_keep_their_own_schedules() -> None:
    alone = {seed: run_loop(_schedule, clock=VirtualClock(), seed=seed) for seed in (7, 8)}
    results: dict[int, list[list[int]]] = {7: [], 8: []}

    def runs(seed: int) -> None:
        for _ in range(20):
            results[seed].append(run_loop(_schedule, clock=VirtualClock(), seed=seed))

    threads = [threading.Thread(target=runs, args=(seed,)) for seed in (7, 8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for seed, schedules in results.items():
        assert schedules == [alone[seed]] * 20, seed


def test_trios_reproducible_mode_is_restored_after_the_run() -> None:
    before = trio._core._run._ALLOW_DETERMINISTIC_SCHEDULING
    try:
        for flag in (False, True):
            trio._core._run._ALLOW_DETERMINISTIC_SCHEDULING = flag  # type: ignore[misc]
            run_loop(_schedule, clock=VirtualClock(), seed=7)
            assert trio._core._run._ALLOW_DETERMINISTIC_SCHEDULING is flag
    finally:
        trio._core._run._ALLOW_DETERMINISTIC_SCHEDULING = before  # type: ignore[misc]


async def _timers(clock: VirtualClock) -> tuple[list[tuple[float, int]], float]:
    """Twelve sleepers, due in pairs at the same instants, and a guard on the loop's clock."""
    woke: list[tuple[float, int]] = []

    async def sleeper(index: int) -> None:
        await clock.sleep_until(1.5 * (index // 2 + 1))
        woke.append((clock.now(), index))

    guarded = 0.0
    async with anyio.create_task_group() as tg:
        for index in range(12):
            tg.start_soon(sleeper, index)
        with anyio.move_on_after(4.0):  # the loop's own clock: the same virtual time line
            await clock.sleep(3600)
        guarded = clock.now()
    return woke, guarded


def test_the_virtual_clock_jumps_to_each_deadline_and_orders_ties_by_the_seed() -> None:
    clock = VirtualClock(epoch=1_000)
    woke, guarded = run_loop(_timers, clock, clock=clock, seed=7)
    assert guarded == 4.0
    assert [at for at, _ in woke] == [1.5 * (i // 2 + 1) for i in range(12)]
    assert clock.wall_ns() == 1_000 * 10**9 + 9 * 10**9
    again = VirtualClock(epoch=1_000)
    assert run_loop(_timers, again, clock=again, seed=7)[0] == woke
    orders = set()
    for seed in range(8):
        other = VirtualClock(epoch=1_000)
        orders.add(tuple(index for _, index in run_loop(_timers, other, clock=other, seed=seed)[0]))
    assert len(orders) > 1  # sleepers due together: the order is the seeded scheduler's


async def _alarm(clock: VirtualClock) -> list[float]:
    alarm = clock.alarm()
    rang: list[float] = []

    async def waiter() -> None:
        for _ in range(2):
            await alarm.wait()
            rang.append(clock.now())
            alarm.set(float("inf"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await clock.sleep(1.0)
        alarm.set(3.5)
        alarm.set(2.25)  # moved earlier while waited for
        await clock.sleep(5.0)
        alarm.set(clock.now() + 0.1)
    return rang


def test_the_virtual_clocks_alarm_rings_at_its_deadline_as_last_moved() -> None:
    clock = VirtualClock()
    assert run_loop(_alarm, clock, clock=clock, seed=1) == [2.25, 6.1]


async def _cancelled_waits(clock: VirtualClock) -> tuple[float, float, float]:
    with anyio.move_on_after(1.0):
        await clock.sleep_until(100.0)
    slept = clock.now()
    alarm = clock.alarm()
    alarm.set(50.0)
    with anyio.move_on_after(1.0):
        await alarm.wait()
    waited = clock.now()
    return slept, waited, trio.lowlevel.current_statistics().seconds_to_next_deadline


def test_a_cancelled_sleep_or_alarm_leaves_no_deadline_for_the_clock_to_jump_to() -> None:
    clock = VirtualClock()
    assert run_loop(_cancelled_waits, clock, clock=clock, seed=1) == (1.0, 2.0, float("inf"))


async def _sleep_in_a_cancelled_scope(clock: VirtualClock) -> tuple[bool, float]:
    with anyio.CancelScope() as scope:
        scope.cancel()
        await clock.sleep(5.0)  # a checkpoint: cancelled at once
    return scope.cancelled_caught, clock.now()


def test_a_virtual_sleep_is_a_checkpoint_that_a_cancelled_scope_ends_at_once() -> None:
    clock = VirtualClock()
    assert run_loop(_sleep_in_a_cancelled_scope, clock, clock=clock, seed=1) == (True, 0.0)


class _Rounds(trio.abc.Instrument):
    def __init__(self) -> None:
        self.rounds = 0

    def before_io_wait(self, timeout: float) -> None:
        self.rounds += 1


async def _rounds_of_ten_sleeps(clock: VirtualClock) -> int:
    counter = _Rounds()
    trio.lowlevel.add_instrument(counter)
    for _ in range(10):
        await clock.sleep(1.0)
    trio.lowlevel.remove_instrument(counter)
    return counter.rounds


def test_a_jump_of_the_clock_wakes_its_sleepers_in_the_same_round_of_the_loop() -> None:
    # Each round is paid in a simulation (an epoll poll, the heap's checks): a timer that falls
    # due costs one, the round in which the clock jumps to it and its sleeper runs.
    clock = VirtualClock()
    assert run_loop(_rounds_of_ten_sleeps, clock, clock=clock, seed=1) == 10
    assert clock.now() == 10.0


async def _collector() -> tuple[int, int]:
    return gc.get_threshold()[0], gc.get_freeze_count()


def test_a_run_collects_garbage_less_often_and_restores_the_collector_after() -> None:
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    young, frozen_in_run = run_loop(_collector, clock=VirtualClock(), seed=1)
    assert young == SIMULATION_GC_THRESHOLD
    assert frozen_in_run > 0 or frozen > 0  # what existed before the run is frozen
    assert (gc.get_threshold(), gc.get_freeze_count()) == (threshold, frozen)


class _StepsOf(trio.abc.Instrument):
    """Task steps by the task's function name."""

    def __init__(self) -> None:
        self.steps: collections.Counter[str] = collections.Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name.rsplit(".", 1)[-1]] += 1


async def _timers_called(clock: VirtualClock) -> tuple[list[tuple[float, str]], int]:
    steps = _StepsOf()
    trio.lowlevel.add_instrument(steps)
    called: list[tuple[float, str]] = []
    first = clock.timer(lambda: called.append((clock.now(), "first")))
    second = clock.timer(lambda: called.append((clock.now(), "second")))

    async def serve_first() -> None:
        await first.run()

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve_first)
        tg.start_soon(second.run)
        first.set(3.0)
        first.set(1.0)  # moved earlier
        second.set(2.0)
        await clock.sleep(2.5)
        assert (first.deadline, second.deadline) == (float("inf"), float("inf"))
        second.set(4.0)  # made second: called second when due together
        first.set(4.0)
        await clock.sleep(2.0)
        tg.cancel_scope.cancel()
    first.set(7.0)  # nobody serves it any more: never called
    await clock.sleep(5.0)
    trio.lowlevel.remove_instrument(steps)
    return called, steps.steps["serve_first"]


def test_the_virtual_clocks_timer_calls_back_from_the_loop_without_waking_its_task() -> None:
    clock = VirtualClock()
    called, steps = run_loop(_timers_called, clock, clock=clock, seed=3)
    assert called == [(1.0, "first"), (2.0, "second"), (4.0, "first"), (4.0, "second")]
    assert steps == 2  # its start and its cancellation, none per call


async def _timer_that_raises(clock: VirtualClock) -> str:
    def boom() -> None:
        raise RuntimeError("boom")

    timer = clock.timer(boom)
    timer.set(1.0)
    try:
        await timer.run()
    except RuntimeError as exc:
        return f"{exc} at {clock.now()}"
    return "no error"


def test_what_a_virtual_timers_callback_raises_ends_the_task_serving_it() -> None:
    clock = VirtualClock()
    assert run_loop(_timer_that_raises, clock, clock=clock, seed=1) == "boom at 1.0"


async def _batches(clock: VirtualClock) -> tuple[int, int]:
    steps = _StepsOf()
    trio.lowlevel.add_instrument(steps)
    async with (
        fake_broker() as broker,
        open_client(broker.url, connector=broker.connect, clock=clock) as client,
    ):
        producer = await client.create_producer(
            "t", batching_enabled=True, batching_max_publish_delay=0.01
        )
        for i in range(10):
            await producer.send_async(b"m%d" % i)
            await clock.sleep(1.0)  # each message its own batch, sent by the timer
        sends = len(broker.of_type(c.Send))
        await producer.aclose()
    trio.lowlevel.remove_instrument(steps)
    return sends, steps.steps["_batch_timer"]


def test_on_the_virtual_clock_a_producers_batch_costs_its_timer_task_no_step() -> None:
    clock = VirtualClock()
    assert run_loop(_batches, clock, clock=clock, seed=1) == (10, 2)  # start and end only
