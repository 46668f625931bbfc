"""Leader election between brokers whose sessions share one in-memory metadata tree."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest

from emubroker.loadbalance.leader.election import (
    LeaderBroker,
    LeaderElectionService,
    LeaderElectionState,
)
from emubroker.metadata import (
    MemoryMetadataStore,
    MemoryMetadataTree,
    MetadataStoreError,
    WatchOverflowError,
)
from emubroker.metadata.paths import LEADER_PATH
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

LEADING = LeaderElectionState.LEADING
FOLLOWING = LeaderElectionState.FOLLOWING
NO_LEADER = LeaderElectionState.NO_LEADER


def election(store: Any, clock: FakeClock, port: int) -> LeaderElectionService:
    return LeaderElectionService(
        store, clock, broker_id=f"127.0.0.1:{port}", service_url=f"http://127.0.0.1:{port}"
    )


class Cluster:
    """Brokers as (session, election) pairs on one tree, each election running in ``tg``."""

    def __init__(self, tree: MemoryMetadataTree, clock: FakeClock, tg: anyio.abc.TaskGroup):
        self.tree = tree
        self.clock = clock
        self.tg = tg
        self.stores: dict[int, MemoryMetadataStore] = {}
        self.elections: dict[int, LeaderElectionService] = {}
        self.scopes: dict[int, anyio.CancelScope] = {}

    async def start(self, port: int, *, store: Any = None) -> LeaderElectionService:
        store = store if store is not None else self.tree.open_session()
        self.stores[port] = store
        service = self.elections[port] = election(store, self.clock, port)
        scope = self.scopes[port] = anyio.CancelScope()

        async def run(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with scope:
                await service.run(task_status=task_status)

        await self.tg.start(run)
        return service

    def start_soon(self, port: int) -> None:
        store = self.stores[port] = self.tree.open_session()
        service = self.elections[port] = election(store, self.clock, port)
        self.tg.start_soon(service.run)

    async def settle(self) -> None:
        await anyio.wait_all_tasks_blocked()

    def leaders(self) -> list[int]:
        return [port for port, e in self.elections.items() if e.state is LEADING]

    def known(self) -> set[str | None]:
        return {
            None if (leader := e.current_leader()) is None else leader.id
            for e in self.elections.values()
        }


@asynccontextmanager
async def cluster(
    clock: FakeClock, tree: MemoryMetadataTree | None = None
) -> AsyncIterator[Cluster]:
    async with anyio.create_task_group() as tg:
        running = Cluster(tree or MemoryMetadataTree(), clock, tg)
        yield running
        tg.cancel_scope.cancel()


async def test_the_first_broker_leads_and_the_others_follow(fake_clock: FakeClock) -> None:
    async with cluster(fake_clock) as c:
        first = await c.start(8080)
        assert first.state is LEADING
        assert first.is_leader()
        for port in (8081, 8082):
            assert (await c.start(port)).state is FOLLOWING
        assert c.leaders() == [8080]
        assert c.known() == {"127.0.0.1:8080"}
        node = await c.stores[8081].get(LEADER_PATH)
        assert node is not None
        assert node.ephemeral
        assert not node.created_by_self
        # Pulsar's LeaderBroker JSON, field for field.
        assert json.loads(node.value) == {
            "brokerId": "127.0.0.1:8080",
            "serviceUrl": "http://127.0.0.1:8080",
        }


async def test_brokers_starting_together_elect_exactly_one(fake_clock: FakeClock) -> None:
    async with cluster(fake_clock) as c:
        for port in range(8080, 8085):
            c.start_soon(port)
        await c.settle()
        assert len(c.leaders()) == 1
        [leader] = c.leaders()
        assert c.known() == {f"127.0.0.1:{leader}"}
        assert all(e.state is FOLLOWING for p, e in c.elections.items() if p != leader)


async def test_a_follower_takes_over_when_the_leaders_session_ends(fake_clock: FakeClock) -> None:
    async with cluster(fake_clock) as c:
        for port in (8080, 8081, 8082):
            await c.start(port)
        # The leader's process dies: its session ends under it.
        await c.stores[8080].aclose()
        await c.settle()
        survivors = [c.elections[8081], c.elections[8082]]
        assert sorted(e.state.value for e in survivors) == ["Following", "Leading"]
        [new_leader] = [p for p in (8081, 8082) if c.elections[p].state is LEADING]
        assert {e.current_leader() for e in survivors} == {
            LeaderBroker(f"127.0.0.1:{new_leader}", f"http://127.0.0.1:{new_leader}")
        }
        assert all(e.statistics().leader_changes == 2 for e in survivors)


async def test_an_expired_session_starts_a_new_election(fake_clock: FakeClock) -> None:
    async with cluster(fake_clock) as c:
        for port in (8080, 8081):
            await c.start(port)
        await c.stores[8080].expire_session()  # stopped heartbeating, then came back
        await c.settle()
        assert len(c.leaders()) == 1
        [leader] = c.leaders()
        node = await c.stores[leader].get(LEADER_PATH)
        assert node is not None
        assert node.created_by_self  # held in the winner's current session
        assert len(c.known()) == 1


async def test_a_stopping_leader_hands_over_at_once(fake_clock: FakeClock) -> None:
    async with cluster(fake_clock) as c:
        await c.start(8080)
        follower = await c.start(8081)
        transitions: list[LeaderElectionState] = []
        follower.subscribe(transitions.append)
        c.scopes[8080].cancel()
        await c.settle()
        # Its session is still open: the node went because the service deleted it.
        assert not c.stores[8080]._closed
        assert c.elections[8080].state is NO_LEADER
        assert follower.state is LEADING
        assert transitions == [LEADING]


async def test_our_node_from_an_earlier_session_is_replaced(fake_clock: FakeClock) -> None:
    tree = MemoryMetadataTree()
    old = tree.open_session()
    await old.put(
        LEADER_PATH,
        b'{"brokerId":"127.0.0.1:8080","serviceUrl":"http://127.0.0.1:8080"}',
        ephemeral=True,
    )
    async with cluster(fake_clock, tree) as c:
        # Restarted on the same ports before the old session expired: Pulsar deletes and leads.
        restarted = await c.start(8080)
        assert restarted.state is LEADING
        node = await c.stores[8080].get(LEADER_PATH)
        assert node is not None
        assert node.created_by_self
        other = await c.start(8081)
        assert other.state is FOLLOWING
    await old.aclose()


async def test_another_value_in_our_own_session_is_replaced(fake_clock: FakeClock) -> None:
    async with cluster(fake_clock) as c:
        store = c.tree.open_session()
        await store.put(
            LEADER_PATH, b'{"brokerId":"x:1","serviceUrl":"http://x:1"}', ephemeral=True
        )
        assert (await c.start(8080, store=store)).state is LEADING


async def test_a_leader_value_without_broker_id_names_the_url_authority(
    fake_clock: FakeClock,
) -> None:
    async with cluster(fake_clock) as c:
        old = c.tree.open_session()
        await old.put(LEADER_PATH, b'{"serviceUrl":"http://10.0.0.1:8080"}', ephemeral=True)
        follower = await c.start(8081)
        assert follower.state is FOLLOWING
        leader = follower.current_leader()
        assert leader is not None
        assert leader.id == "10.0.0.1:8080"
        await old.aclose()
        await c.settle()
        assert follower.state is LEADING


class FaultyStore:
    """A session that fails the next ``fail_gets`` reads, or breaks its next watch."""

    def __init__(self, store: MemoryMetadataStore) -> None:
        self.store = store
        self.fail_gets = 0
        self.break_watch = False

    async def get(self, path: str) -> Any:
        if self.fail_gets:
            self.fail_gets -= 1
            raise MetadataStoreError("the metadata service is unreachable")
        return await self.store.get(path)

    async def put(self, *args: Any, **kwargs: Any) -> Any:
        return await self.store.put(*args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        return await self.store.delete(*args, **kwargs)

    @asynccontextmanager
    async def watch(self, prefix: str) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            stream = await stack.enter_async_context(self.store.watch(prefix))
            if self.break_watch:
                self.break_watch = False
                stream = Broken()
            yield stream


class Broken:
    def __aiter__(self) -> Broken:
        return self

    async def __anext__(self) -> Any:
        await anyio.lowlevel.checkpoint()
        raise WatchOverflowError("notifications were lost")


async def test_a_failed_election_is_retried_after_five_seconds(fake_clock: FakeClock) -> None:
    async with cluster(fake_clock) as c:
        await c.start(8080)
        flaky = FaultyStore(c.tree.open_session())
        follower = await c.start(8081, store=flaky)
        transitions: list[LeaderElectionState] = []
        follower.subscribe(transitions.append)
        flaky.fail_gets = 1
        c.scopes[8080].cancel()  # the leader steps down; the follower's election fails
        await c.settle()
        assert follower.state is NO_LEADER
        assert transitions == [NO_LEADER]
        await fake_clock.advance(4.9)
        assert follower.state is NO_LEADER
        await fake_clock.advance(0.1)
        assert follower.state is LEADING
        assert transitions == [NO_LEADER, LEADING]


async def test_the_first_election_failing_stops_the_start(fake_clock: FakeClock) -> None:
    flaky = FaultyStore(MemoryMetadataStore())
    flaky.fail_gets = 1
    service = election(flaky, fake_clock, 8080)
    with pytest.raises(ExceptionGroup) as raised:
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
    assert raised.group_contains(MetadataStoreError, match="unreachable")


async def test_a_broken_watch_is_reopened_and_the_node_read_again(fake_clock: FakeClock) -> None:
    async with cluster(fake_clock) as c:
        flaky = FaultyStore(c.tree.open_session())
        flaky.break_watch = True
        service = await c.start(8080, store=flaky)
        await c.settle()
        assert service.state is LEADING
        follower = await c.start(8081)
        c.scopes[8080].cancel()
        await c.settle()
        assert follower.state is LEADING  # the reopened watch still hands over on release


async def test_a_closed_store_ends_the_service(fake_clock: FakeClock) -> None:
    store = MemoryMetadataStore()
    service = election(store, fake_clock, 8080)
    async with anyio.create_task_group() as tg:
        await tg.start(service.run)
        await store.aclose()
    assert service.state is NO_LEADER


@pytest.mark.parametrize(
    ("announce", "level"), [(None, logging.INFO), (logging.DEBUG, logging.DEBUG)]
)
async def test_who_leads_is_logged_at_the_announce_level(
    caplog: pytest.LogCaptureFixture, announce: int | None, level: int
) -> None:
    """INFO where several brokers elect; a broker alone (standalone) says it at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="emubroker.loadbalance.leader.election")
    store = MemoryMetadataTree().open_session()
    options = {} if announce is None else {"announce": announce}
    service = LeaderElectionService(
        store, FakeClock(), broker_id="127.0.0.1:1", service_url="http://127.0.0.1:1", **options
    )
    async with anyio.create_task_group() as tg:
        await tg.start(service.run)
        tg.cancel_scope.cancel()
    messages = {r.getMessage(): r.levelno for r in caplog.records}
    assert messages == {
        "leader broker is now 127.0.0.1:1 (http://127.0.0.1:1)": level,
        "this broker 127.0.0.1:1 was elected leader": level,
        "released the leadership on /loadbalance/leader": level,
    }
