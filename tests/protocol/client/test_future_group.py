"""`FutureGroup` / `GroupMember`: a batch's futures behave like futures completed one by one."""

from __future__ import annotations

import anyio
import pytest

from protocol.client._util import Future, FutureGroup, GroupMember

pytestmark = pytest.mark.anyio


def members(count: int) -> tuple[FutureGroup[str], list[GroupMember[str]]]:
    group: FutureGroup[str] = FutureGroup()
    return group, [GroupMember(group, i) for i in range(count)]


async def test_members_are_futures_of_the_groups_outcome() -> None:
    group, futures = members(3)
    assert all(isinstance(f, Future) for f in futures)
    assert not any(f.done() for f in futures)
    assert futures[0].exception() is None
    with pytest.raises(RuntimeError):
        futures[0].result()
    made: list[int] = []

    def make(i: int) -> str:
        made.append(i)
        return f"id{i}"

    group.set_result(make)
    assert made == []  # values are made when asked for
    assert [f.done() for f in futures] == [True] * 3
    assert futures[2].result() == "id2"
    assert futures[2].result() == "id2"
    assert made == [2]  # once per member
    assert await futures[1] == "id1"
    assert futures[0].exception() is None
    group.set_exception(ValueError())  # ignored: already done
    assert futures[0].result() == "id0"


async def test_a_failed_group_fails_every_member() -> None:
    group, futures = members(2)
    error = ValueError("boom")
    group.set_exception(error)
    group.set_result(lambda i: "late")  # ignored
    for future in futures:
        assert future.done()
        assert future.exception() is error
        with pytest.raises(ValueError, match="boom"):
            await future


async def test_callbacks_run_in_member_order_when_the_group_completes() -> None:
    group, futures = members(4)
    seen: list[str] = []
    for i in (2, 0, 3):
        futures[i].add_done_callback(lambda f: seen.append(f.result()))
    futures[0].add_done_callback(lambda f: seen.append("again " + f.result()))
    group.set_result(lambda i: f"id{i}")
    assert seen == ["id0", "again id0", "id2", "id3"]
    futures[1].add_done_callback(lambda f: seen.append(f.result()))  # done: runs at once
    assert seen[-1] == "id1"


async def test_waiters_wake_when_the_group_completes() -> None:
    group, futures = members(3)
    results: list[str] = []

    async def wait(future: GroupMember[str]) -> None:
        results.append(await future)

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, futures[2])
        tg.start_soon(wait, futures[0])
        tg.start_soon(group.wait_done)
        await anyio.wait_all_tasks_blocked()
        assert results == []
        group.set_result(lambda i: f"id{i}")
    assert sorted(results) == ["id0", "id2"]
    await futures[1].wait_done()  # done: returns at once


async def test_a_member_completed_on_its_own_leaves_the_group() -> None:
    group, futures = members(3)
    seen: list[object] = []
    futures[0].add_done_callback(lambda f: seen.append(f.result()))
    futures[0].set_result("own")
    futures[1].set_exception(KeyError())
    assert seen == ["own"]
    assert not futures[2].done()
    group.set_result(lambda i: f"id{i}")
    assert seen == ["own"]  # not called a second time
    assert futures[0].result() == "own"
    assert isinstance(futures[1].exception(), KeyError)
    assert futures[2].result() == "id2"
    futures[2].set_result("too late")  # ignored, like any done future
    assert futures[2].result() == "id2"
