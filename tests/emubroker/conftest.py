"""Fixtures shared by the broker's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from emubroker.app import Broker, open_broker
from emubroker.config import load_config
from protocol.clock import FakeClock


@pytest.fixture
async def memory_broker(fake_clock: FakeClock) -> AsyncIterator[Broker]:
    """A broker with default settings, no sockets and no admin server, on the fake clock."""
    config = load_config(overrides={"brokerServicePort": 6650, "webServicePort": 8080})
    async with open_broker(config, clock=fake_clock, listen=False, admin=False) as running:
        yield running
