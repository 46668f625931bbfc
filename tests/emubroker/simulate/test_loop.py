"""The simulator's loop: trio's scheduling drawn from the run's own seeded generator."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import trio._core._run

from emubroker.simulate.loop import run_loop
from tests.emubroker.simulate.trio_thread import another_trio_loop_running


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
    first = run_loop(_schedule, virtual=True, seed=7)
    assert run_loop(_schedule, virtual=True, seed=7) == first
    assert run_loop(_schedule, virtual=True, seed=8) != first
    assert first != sorted(first)  # shuffled, not in creation order


def test_another_trio_loop_in_a_thread_does_not_change_the_schedule() -> None:
    alone = run_loop(_schedule, virtual=True, seed=7)
    with another_trio_loop_running():
        beside = [run_loop(_schedule, virtual=True, seed=7) for _ in range(20)]
    assert all(schedule == alone for schedule in beside)


def test_two_runs_at_once_in_two_threads_keep_their_own_schedules() -> None:
    alone = {seed: run_loop(_schedule, virtual=True, seed=seed) for seed in (7, 8)}
    results: dict[int, list[list[int]]] = {7: [], 8: []}

    def runs(seed: int) -> None:
        for _ in range(20):
            results[seed].append(run_loop(_schedule, virtual=True, seed=seed))

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
            run_loop(_schedule, virtual=True, seed=7)
            assert trio._core._run._ALLOW_DETERMINISTIC_SCHEDULING is flag
    finally:
        trio._core._run._ALLOW_DETERMINISTIC_SCHEDULING = before  # type: ignore[misc]
