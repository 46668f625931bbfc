"""``leaderBroker`` and the election's ``/metrics`` on two brokers sharing one metadata tree."""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio
import anyio.abc
import msgspec
import pytest
from aiohttp.test_utils import TestClient, TestServer

from emubroker.admin import build_admin_app
from emubroker.app import Broker, open_broker
from emubroker.config import load_config
from emubroker.metadata import MemoryMetadataTree
from protocol.clock import FakeClock
from tests.emubroker.admin.conftest import Admin

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def _admin(stack: AsyncExitStack, broker: Broker) -> Admin:
    assert broker.admin is not None
    client = await stack.enter_async_context(TestClient(TestServer(build_admin_app(broker.admin))))
    return Admin(client)


async def _broker(stack: AsyncExitStack, tree: MemoryMetadataTree, clock: FakeClock, port: int):
    config = load_config(overrides={"brokerServicePort": port - 1430, "webServicePort": port})
    broker = await stack.enter_async_context(
        open_broker(config, clock=clock, metadata=tree.open_session(), listen=False, admin=False)
    )
    return broker, await _admin(stack, broker)


async def _serve(
    tree: MemoryMetadataTree,
    clock: FakeClock,
    port: int,
    stop: anyio.Event,
    stopped: anyio.Event,
    *,
    task_status: anyio.abc.TaskStatus[tuple[Broker, Admin]],
) -> None:
    async with AsyncExitStack() as stack:
        task_status.started(await _broker(stack, tree, clock, port))
        await stop.wait()
    stopped.set()


async def test_every_broker_names_the_leader_and_the_follower_takes_over(
    fake_clock: FakeClock,
) -> None:
    tree = MemoryMetadataTree()
    stop_first, first_stopped, stop_second = anyio.Event(), anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as tg:
        _, first = await tg.start(_serve, tree, fake_clock, 8080, stop_first, first_stopped)
        second_broker, second = await tg.start(
            _serve, tree, fake_clock, 8081, stop_second, anyio.Event()
        )
        leader = {"serviceUrl": "http://127.0.0.1:8080", "brokerId": "127.0.0.1:8080"}
        assert await first.ok("GET", "/admin/v2/brokers/leaderBroker") == leader
        assert await second.ok("GET", "/admin/v2/brokers/leaderBroker") == leader
        metrics = (await second.ok("GET", "/metrics")).splitlines()
        assert 'emubroker_leader_election_is_leader{cluster="standalone"} 0' in metrics
        assert 'emubroker_leader_election_changes_total{cluster="standalone"} 1' in metrics
        assert (
            'emubroker_leader_election_is_leader{cluster="standalone"} 1'
            in (await first.ok("GET", "/metrics")).splitlines()
        )

        stop_first.set()  # the leader stops
        await first_stopped.wait()
        await anyio.wait_all_tasks_blocked()  # the follower's election runs
        assert second_broker.leader_election is not None
        assert second_broker.leader_election.is_leader()
        assert await second.ok("GET", "/admin/v2/brokers/leaderBroker") == {
            "serviceUrl": "http://127.0.0.1:8081",
            "brokerId": "127.0.0.1:8081",
        }
        metrics = (await second.ok("GET", "/metrics")).splitlines()
        assert 'emubroker_leader_election_is_leader{cluster="standalone"} 1' in metrics
        assert 'emubroker_leader_election_changes_total{cluster="standalone"} 2' in metrics
        stop_second.set()


async def test_no_known_leader_answers_404(fake_clock: FakeClock) -> None:
    async with AsyncExitStack() as stack:
        broker, _ = await _broker(stack, MemoryMetadataTree(), fake_clock, 8080)
        assert broker.admin is not None
        without = msgspec.structs.replace(broker.admin, leader_election=None)
        admin = Admin(
            await stack.enter_async_context(TestClient(TestServer(build_admin_app(without))))
        )
        await admin.fails(
            "GET", "/admin/v2/brokers/leaderBroker", 404, "Couldn't find leader broker"
        )
