"""Fixtures for the admin REST tests: an in-process broker and an aiohttp client on its app.

aiohttp runs on asyncio only (DESIGN.md decision 5): the modules that use the ``admin`` fixture
override ``anyio_backend`` with ``"asyncio"``; the client binds a loopback socket, so they are
integration tests.
The broker has no listening sockets; clients that produce or consume reach it over in-memory
streams (``Broker.start_session``), so the REST calls and the binary protocol act on the same
topics.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from emubroker.admin import build_admin_app
from emubroker.app import Broker, open_broker
from emubroker.config import load_config
from protocol import commands as c
from protocol.clock import FakeClock
from tests.support.broker import WireClient, memory_stream_pair


@pytest.fixture
async def broker(fake_clock: FakeClock) -> AsyncIterator[Broker]:
    config = load_config(overrides={"brokerServicePort": 6650, "webServicePort": 8080})
    async with open_broker(config, clock=fake_clock, listen=False, admin=False) as running:
        yield running


class Admin:
    """The REST API of one broker, called through aiohttp's test client."""

    def __init__(self, client: TestClient[Any, Any]) -> None:
        self.client = client

    async def call(
        self, method: str, path: str, *, json: Any = None, data: Any = None
    ) -> tuple[int, Any]:
        """``(status, body)``: decoded JSON, text, or None for an empty body."""
        response = await self.client.request(method, path, json=json, data=data)
        text = await response.text()
        if not text:
            return response.status, None
        if response.content_type == "application/json":
            return response.status, await response.json()
        return response.status, text

    async def get(self, path: str) -> tuple[int, Any]:
        return await self.call("GET", path)

    async def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        """Call and require a 2xx answer; returns the body."""
        status, body = await self.call(method, path, **kwargs)
        assert 200 <= status < 300, (method, path, status, body)
        return body

    async def fails(self, method: str, path: str, status: int, reason: str, **kwargs: Any) -> None:
        """Call and require ``status`` and a ``{"reason": ...}`` body containing ``reason``."""
        got, body = await self.call(method, path, **kwargs)
        assert (got, reason in (body or {}).get("reason", "")) == (status, True), (
            method,
            path,
            got,
            body,
        )


@pytest.fixture
async def admin(broker: Broker) -> AsyncIterator[Admin]:
    assert broker.admin is not None
    async with TestClient(TestServer(build_admin_app(broker.admin))) as client:
        yield Admin(client)


class Wire:
    """Binary-protocol clients of the broker over in-memory streams."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.clients: list[WireClient] = []
        self._ids = iter(range(1, 1 << 30))

    async def client(self) -> WireClient:
        client_end, server_end = memory_stream_pair()
        self.broker.start_session(server_end)
        client = WireClient(client_end)
        self.clients.append(client)
        await client.handshake()
        return client

    async def produce(
        self, topic: str, count: int, *, publish_time: int = 1_700_000_000_000
    ) -> None:
        """Publish ``count`` messages and wait for their receipts; the producer stays attached."""
        client = await self.client()
        producer_id = next(self._ids)
        await client.send(c.Producer(topic=topic, producer_id=producer_id, request_id=0))
        reply = await client.receive_command()
        assert isinstance(reply, c.ProducerSuccess), reply
        for sequence_id in range(count):
            meta = c.MessageMetadata(
                producer_name=reply.producer_name,
                sequence_id=sequence_id,
                publish_time=publish_time + sequence_id,
            )
            await client.send_message(producer_id, sequence_id, b"m%d" % sequence_id, metadata=meta)
        for _ in range(count):
            receipt = await client.receive_command()
            assert isinstance(receipt, c.SendReceipt), receipt

    async def consumer(
        self, topic: str, subscription: str, *, sub_type: c.SubType = c.SubType.SHARED
    ) -> WireClient:
        """An attached consumer (no permits given, so nothing is delivered)."""
        client = await self.client()
        await client.send(
            c.Subscribe(
                topic=topic,
                subscription=subscription,
                sub_type=sub_type,
                consumer_id=1,
                request_id=1,
                initial_position=c.InitialPosition.EARLIEST,
            )
        )
        reply = await client.receive_command()
        assert reply == c.Success(request_id=1), reply
        return client

    async def aclose(self) -> None:
        for client in self.clients:
            await client.stream.aclose()


@pytest.fixture
async def wire(broker: Broker) -> AsyncIterator[Wire]:
    clients = Wire(broker)
    try:
        yield clients
    finally:
        await clients.aclose()
