"""Settling tasks (``anyio.wait_all_tasks_blocked``) in the suite, on both backends.

On asyncio the suite replaces anyio's real-time poll (tests/support/settle.py): settling must
still run every runnable task and what their ends wake, and must not wait on the real clock.
"""

from __future__ import annotations

import time

import anyio
import anyio.lowlevel
import pytest

pytestmark = pytest.mark.anyio


async def test_settling_runs_tasks_to_their_next_wait_and_their_groups_to_the_end() -> None:
    steps: list[str] = []
    go_on = anyio.Event()

    async def child() -> None:
        for _ in range(3):
            await anyio.lowlevel.checkpoint()
        steps.append("child ended")

    async def host() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
        steps.append("group ended")  # woken by the child's end, a callback later
        await go_on.wait()
        steps.append("went on")

    async with anyio.create_task_group() as tg:
        tg.start_soon(host)
        await anyio.wait_all_tasks_blocked()
        assert steps == ["child ended", "group ended"]
        go_on.set()
        await anyio.wait_all_tasks_blocked()
        assert steps == ["child ended", "group ended", "went on"]


async def test_settling_a_runnable_task_takes_no_real_time() -> None:
    # anyio's asyncio backend slept 0.1 s whenever a task was runnable: 50 settles took 5 s at
    # least, by construction. Here they take milliseconds; the bound is for a loaded machine.
    async def ping_pong(wake: anyio.Event, woken: anyio.Event) -> None:
        await wake.wait()
        for _ in range(3):  # runnable at each look
            await anyio.lowlevel.checkpoint()
        woken.set()

    started = time.monotonic()
    for _ in range(50):
        wake, woken = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(ping_pong, wake, woken)
            await anyio.wait_all_tasks_blocked()
            wake.set()
            await anyio.wait_all_tasks_blocked()
            assert woken.is_set()
    assert time.monotonic() - started < 2.5
