"""anyio's ``wait_all_tasks_blocked`` on asyncio without its real-time poll.

The tests settle tasks with ``anyio.wait_all_tasks_blocked()`` (directly, and through
``FakeClock.advance``, which settles after every wake-up). On trio that returns as soon as every
other task waits. anyio's asyncio backend (4.x) looks at every task's ``_fut_waiter`` the same
way, but while one of them is still runnable it sleeps 0.1 s of real time before looking again:
a component test that wakes a few tasks per step of its ``FakeClock`` spent most of its time in
those sleeps (``tests/emubroker/topics/test_throttled_retry.py``: 1-1.6 s a test on asyncio,
0.03-0.09 s on trio; about 80 s of the suite's worker time in all). Here the wait yields one
turn of the loop instead, which lets a runnable task run just as the sleep did, without the
wall time. What counts as blocked is anyio's own test, unchanged: a task still runnable after
the turn is looked at again.
"""

from __future__ import annotations

import asyncio

from anyio._backends._asyncio import AsyncIOBackend

_MAX_TURNS = 100


async def _wait_all_tasks_blocked(cls: type[AsyncIOBackend]) -> None:
    await cls.checkpoint()
    this_task = asyncio.current_task()
    while True:
        for task in asyncio.all_tasks():
            if task is this_task:
                continue
            waiter = task._fut_waiter  # type: ignore[attr-defined]
            if waiter is None or waiter.done():
                await _run_what_is_ready()  # anyio: asyncio.sleep(0.1)
                break
        else:
            return


async def _run_what_is_ready() -> None:
    """Let the loop run its ready callbacks, and those they schedule, as 0.1 s of sleep did.

    A task that ends schedules its task group's callback, which wakes the group's host only on
    the turn after; a cancel scope delivers its cancellation from callbacks too. A scope that
    keeps retrying a cancellation (a task shielded inside it) never leaves the queue empty, hence
    the bound: then the tasks are looked at again, as after anyio's sleep.
    """
    loop = asyncio.get_running_loop()
    for _ in range(_MAX_TURNS):
        await asyncio.sleep(0)
        if not loop._ready:  # type: ignore[attr-defined]
            return


def install() -> None:
    """Replace the asyncio backend's ``wait_all_tasks_blocked`` for this process."""
    AsyncIOBackend.wait_all_tasks_blocked = classmethod(_wait_all_tasks_blocked)  # type: ignore[method-assign,assignment]
