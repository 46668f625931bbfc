"""Fixtures for the stub's component tests: a stub in-process, clients over memory streams."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from storage_stub.client import Backoff, open_stub_client
from storage_stub.server import open_stub_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from anyio.abc import ByteStream

    from protocol.clock import FakeClock
    from storage_stub.client import StubClient
    from storage_stub.server import StubServer

REQUEST_TIMEOUT = 5.0


class Switchboard:
    """Connects clients to whichever in-process stub is current; can cut live connections."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.server: StubServer | None = None
        self.streams: list[ByteStream] = []
        self.refuse = False
        self.attempts: list[float] = []

    async def connect(self) -> ByteStream:
        self.attempts.append(self.clock.now())
        if self.server is None or self.refuse:
            raise ConnectionRefusedError("no stub here")
        stream = self.server.connect()
        self.streams.append(stream)
        return stream

    async def cut(self) -> None:
        """Break every live connection, as a network failure would, and let clients notice."""
        for stream in self.streams:
            await stream.aclose()
        self.streams.clear()
        await anyio.wait_all_tasks_blocked()


@asynccontextmanager
async def running_stub(clock: FakeClock, **options: Any) -> AsyncIterator[Switchboard]:
    board = Switchboard(clock)
    async with open_stub_server(clock=clock, **options) as server:
        board.server = server
        yield board


@asynccontextmanager
async def client_of(
    board: Switchboard, clock: FakeClock, **options: Any
) -> AsyncIterator[StubClient]:
    options.setdefault("request_timeout", REQUEST_TIMEOUT)
    options.setdefault("backoff", Backoff(initial=0.1, maximum=1.0))
    async with open_stub_client(connect=board.connect, clock=clock, **options) as client:
        yield client


@pytest.fixture
async def board(fake_clock: FakeClock) -> AsyncIterator[Switchboard]:
    async with running_stub(fake_clock) as switchboard:
        yield switchboard


@pytest.fixture
async def client(board: Switchboard, fake_clock: FakeClock) -> AsyncIterator[StubClient]:
    async with client_of(board, fake_clock) as opened:
        yield opened
