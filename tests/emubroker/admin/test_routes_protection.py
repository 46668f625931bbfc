"""Admin calls that must not cost unbounded work or memory, and the limits REST enforces.

``httpMaxRequestSize`` (Pulsar's ``MaxRequestSizeFilter``), ``maxNumPartitionsPerPartitionedTopic``,
``maxTopicsPerNamespace`` over REST and on the wire, and peek / skip far into a backlog without a
walk through it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from emubroker.admin import build_admin_app
from emubroker.app import Broker, open_broker
from emubroker.config import load_config
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.errors import ServerError
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

NS = "/admin/v2/persistent/public/default"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


@pytest.fixture
async def limited(fake_clock: FakeClock) -> AsyncIterator[Broker]:
    config = load_config(
        overrides={
            "brokerServicePort": 6650,
            "webServicePort": 8080,
            "httpMaxRequestSize": 100,
            "maxNumPartitionsPerPartitionedTopic": 8,
            "maxTopicsPerNamespace": 3,
        },
        environ={},
    )
    async with open_broker(config, clock=fake_clock, listen=False, admin=False) as running:
        yield running


@pytest.fixture
async def admin(limited: Broker) -> AsyncIterator[Admin]:
    assert limited.admin is not None
    async with TestClient(TestServer(build_admin_app(limited.admin))) as client:
        yield Admin(client)


@pytest.fixture
async def wire(limited: Broker) -> AsyncIterator[Wire]:
    clients = Wire(limited)
    try:
        yield clients
    finally:
        await clients.aclose()


async def test_a_body_over_http_max_request_size_is_refused(admin: Admin) -> None:
    ok = f"{NS}/small/partitions"
    assert (await admin.call("PUT", ok, json=2))[0] == 204
    status, _ = await admin.call("PUT", f"{NS}/big/partitions", data=b"2" + b" " * 200)
    assert status == 400

    async def chunks() -> AsyncIterator[bytes]:
        yield b"2"

    # A chunked body has no size up front: Pulsar's filter refuses it whatever its size.
    response = await admin.client.put(f"{NS}/chunked/partitions", data=chunks())
    assert response.status == 400


async def test_partitions_above_the_key_are_refused(admin: Admin) -> None:
    await admin.fails("PUT", f"{NS}/p/partitions", 406, "less than or equal to 8", json=9)


async def test_topics_per_namespace_over_rest_and_on_the_wire(admin: Admin, wire: Wire) -> None:
    assert (await admin.call("PUT", f"{NS}/a"))[0] == 204
    assert (await admin.call("PUT", f"{NS}/p/partitions", json=2))[0] == 204
    await admin.fails("PUT", f"{NS}/b", 412, "Exceed maximum number of topics in namespace.")
    client = await wire.client()
    await client.send(
        c.Producer(topic="persistent://public/default/b", producer_id=1, request_id=7)
    )
    assert await client.receive_command() == c.Error(
        request_id=7,
        error=ServerError.NotAllowedError,
        message="Exceed maximum number of topics in namespace.",
    )


async def test_skip_any_count_is_one_cumulative_ack(admin: Admin, wire: Wire) -> None:
    topic = "persistent://public/default/a"
    await wire.produce(topic, 5)
    await admin.ok("PUT", f"{NS}/a/subscription/s", json="earliest")
    await admin.ok("POST", f"{NS}/a/subscription/s/skip/2")
    backlog = await admin.ok("GET", f"{NS}/a/stats")
    assert backlog["subscriptions"]["s"]["msgBacklog"] == 3
    await admin.ok("POST", f"{NS}/a/subscription/s/skip/{10**18}")
    backlog = await admin.ok("GET", f"{NS}/a/stats")
    assert backlog["subscriptions"]["s"]["msgBacklog"] == 0
