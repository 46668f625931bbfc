"""The leader's admin calls over HTTP (``admin.owner_admin``), against a loopback server."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from emubroker.admin.owner_admin import HttpOwnerAdmin
from emubroker.config import BrokerConfig, ConfigError, load_config
from emubroker.loadbalance.ownership.owner_calls import OwnerCallError, parse_bundle
from emubroker.loadbalance.ownership.records import BrokerInfo

pytestmark = pytest.mark.anyio

BUNDLE = parse_bundle("public/default/0x00000000_0x80000000")
PATH = "/admin/v2/namespaces/public/default/0x00000000_0x80000000"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


class Owner:
    """A broker's admin endpoints as the owner answers them; records what it was sent."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], str | None]] = []
        self.status = 204

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(
            (request.path, dict(request.query), request.headers.get("Authorization"))
        )
        if self.status >= 300:
            return web.Response(status=self.status, text='{"reason": "Namespace does not exist"}')
        return web.Response(status=204)


@pytest.fixture
async def owner() -> AsyncIterator[tuple[Owner, BrokerInfo]]:
    found = Owner()
    app = web.Application()
    app.router.add_put(PATH + "/unload", found.handle)
    app.router.add_put(PATH + "/split", found.handle)
    async with TestServer(app, host="127.0.0.1") as server:
        url = f"http://127.0.0.1:{server.port}"
        yield found, BrokerInfo("pulsar://127.0.0.1:6650", url)


def conf(**overrides: Any) -> BrokerConfig:
    return load_config(overrides=overrides, environ={})


async def test_unload_and_split_are_authoritative_puts_at_the_owner(
    owner: tuple[Owner, BrokerInfo],
) -> None:
    server, info = owner
    admin = HttpOwnerAdmin(conf)
    await admin.unload(info, BUNDLE, reason="shedding", destination="")
    await admin.unload(info, BUNDLE, reason="admin", destination="127.0.0.1:8081")
    await admin.split(info, BUNDLE, unload=True)
    # The reason and destination go into the owner's ``unload`` trace row.
    assert server.requests == [
        (PATH + "/unload", {"authoritative": "true", "emubrokerUnloadReason": "shedding"}, None),
        (
            PATH + "/unload",
            {
                "authoritative": "true",
                "emubrokerUnloadReason": "admin",
                "destinationBroker": "127.0.0.1:8081",
            },
            None,
        ),
        (PATH + "/split", {"unload": "true", "authoritative": "true"}, None),
    ]


async def test_the_broker_client_credentials_go_with_each_call(
    owner: tuple[Owner, BrokerInfo],
) -> None:
    server, info = owner
    token = conf(
        brokerClientAuthenticationPlugin="org.apache.pulsar.client.impl.auth.AuthenticationToken",
        brokerClientAuthenticationParameters="token:abc.def.ghi",
    )
    await HttpOwnerAdmin(lambda: token).unload(info, BUNDLE, reason="admin", destination="")
    basic = conf(
        brokerClientAuthenticationPlugin="org.apache.pulsar.client.impl.auth.AuthenticationBasic",
        brokerClientAuthenticationParameters='{"userId": "broker", "password": "secret"}',
    )
    await HttpOwnerAdmin(lambda: basic).unload(info, BUNDLE, reason="admin", destination="")
    assert [auth for _, _, auth in server.requests] == [
        "Bearer abc.def.ghi",
        "Basic " + base64.b64encode(b"broker:secret").decode(),
    ]


async def test_a_refusal_or_a_dead_owner_raises_with_the_reason(
    owner: tuple[Owner, BrokerInfo],
) -> None:
    server, info = owner
    server.status = 404
    with pytest.raises(OwnerCallError, match=r"answered 404: .*Namespace does not exist"):
        await HttpOwnerAdmin(conf).unload(info, BUNDLE, reason="admin", destination="")
    dead = BrokerInfo("pulsar://127.0.0.1:1", "http://127.0.0.1:1")  # nothing listens there
    with pytest.raises(OwnerCallError, match=re.escape("127.0.0.1:1")):
        await HttpOwnerAdmin(conf).split(dead, BUNDLE, unload=False)


def test_an_unknown_broker_client_plugin_stops_start_up_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="brokerClientAuthenticationPlugin"):
        conf(
            brokerClientAuthenticationPlugin="org.apache.pulsar.client.impl.auth.AuthenticationSasl"
        )
