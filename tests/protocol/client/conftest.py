"""Fixtures for the client's component tests: a fake broker and a client wired to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from protocol.client import Client, open_client
from protocol.clock import FakeClock
from tests.support.fake_broker import FakeBroker, fake_broker


@pytest.fixture
async def broker() -> AsyncIterator[FakeBroker]:
    async with fake_broker() as b:
        yield b


async def close_on_fake_time(client: Client, clock: FakeClock) -> None:
    """Close `client` gracefully, moving the FakeClock so its timeouts can fire.

    A test that fails with sends or requests still pending would otherwise leave the graceful
    close waiting forever on a clock nobody advances.
    """
    closed = anyio.Event()

    async def close() -> None:
        await client.aclose()
        closed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(close)
        while True:
            await anyio.wait_all_tasks_blocked()
            if closed.is_set():
                break
            await clock.advance(1.0)


@pytest.fixture
async def client(broker: FakeBroker, fake_clock: FakeClock) -> AsyncIterator[Client]:
    async with open_client(
        broker.url, connector=broker.connect, clock=fake_clock, operation_timeout=5.0
    ) as c:
        yield c
        await close_on_fake_time(c, fake_clock)
