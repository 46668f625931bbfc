"""Fixtures for the client's component tests: a fake broker and a client wired to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from protocol.client import Client, open_client
from protocol.clock import FakeClock
from tests.support.fake_broker import FakeBroker, fake_broker

HANG_GUARD = 3.0
"""Real seconds a test may take, fixture teardown included: a test that leaves the client waiting
on the (never advanced) FakeClock fails instead of hanging the run in the graceful close."""


@pytest.fixture
async def broker() -> AsyncIterator[FakeBroker]:
    async with fake_broker() as b:
        yield b


@pytest.fixture
async def client(broker: FakeBroker, fake_clock: FakeClock) -> AsyncIterator[Client]:
    with anyio.fail_after(HANG_GUARD):
        async with open_client(
            broker.url, connector=broker.connect, clock=fake_clock, operation_timeout=5.0
        ) as c:
            yield c
