"""Fixtures for the client's component tests: a fake broker and a client wired to it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from protocol.client import Client, open_client
from protocol.clock import FakeClock
from tests.support.fake_broker import FakeBroker, fake_broker


@pytest.fixture
async def broker() -> AsyncIterator[FakeBroker]:
    async with fake_broker() as b:
        yield b


@pytest.fixture
async def client(broker: FakeBroker, fake_clock: FakeClock) -> AsyncIterator[Client]:
    async with open_client(
        broker.url, connector=broker.connect, clock=fake_clock, operation_timeout=5.0
    ) as c:
        yield c
