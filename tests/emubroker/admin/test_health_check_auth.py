"""``GET /admin/v2/brokers/health`` with authentication on: the check's own client logs in as
the broker (``brokerClientAuthenticationPlugin`` / ``...Parameters``), as Pulsar's does.

No anonymous role is configured, so a check whose CONNECT carried no credentials would be
refused and retry until its 58 s timeout; the fake clock never advances here, so only a check
that authenticates answers at all (the real-time bound just stops a broken one).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from aiohttp.test_utils import TestClient, TestServer

from emubroker.admin import build_admin_app
from emubroker.app import open_broker
from emubroker.auth.certs import write_local_certificates
from emubroker.auth.token import create_token
from emubroker.config import load_config
from protocol.clock import FakeClock

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SECRET = bytes(range(32))
PROVIDERS = ",".join(
    f"org.apache.pulsar.broker.authentication.AuthenticationProvider{name}"
    for name in ("Token", "Basic", "Tls")
)
USERS = "broker:$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.\n"  # password "123456"
PLUGIN = "org.apache.pulsar.client.impl.auth.Authentication"
BROKER_CLIENTS = {
    "token": (f"{PLUGIN}Token", f"token:{create_token(SECRET, 'broker')}"),
    "basic": (f"{PLUGIN}Basic", '{"userId": "broker", "password": "123456"}'),
}
ROOT = {"Authorization": f"Bearer {create_token(SECRET, 'root')}"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def _serve(
    fake_clock: FakeClock, plugin: str, params: str, **more: Any
) -> AsyncIterator[TestClient[Any, Any]]:
    config = load_config(
        overrides={
            "brokerServicePort": 6650,
            "webServicePort": 8080,
            "authenticationEnabled": True,
            "authenticationProviders": PROVIDERS,
            "authorizationEnabled": True,
            "superUserRoles": "root,broker",
            "tokenSecretKey": f"data:;base64,{base64.b64encode(SECRET).decode()}",
            "basicAuthConf": f"data:;base64,{base64.b64encode(USERS.encode()).decode()}",
            "brokerClientAuthenticationPlugin": plugin,
            "brokerClientAuthenticationParameters": params,
            **more,
        },
        environ={},
    )
    async with (
        open_broker(config, clock=fake_clock, listen=False, admin=False) as broker,
        TestClient(TestServer(build_admin_app(broker.admin))) as http,  # type: ignore[arg-type]
    ):
        yield http


@pytest.fixture(params=sorted(BROKER_CLIENTS))
async def http(
    request: pytest.FixtureRequest, fake_clock: FakeClock
) -> AsyncIterator[TestClient[Any, Any]]:
    plugin, params = BROKER_CLIENTS[request.param]
    async for client in _serve(fake_clock, plugin, params):
        yield client


async def test_health_check_authenticates_as_the_broker(http: TestClient[Any, Any]) -> None:
    for version in ("V1", "V2"):
        with anyio.fail_after(10):
            response = await http.get(
                "/admin/v2/brokers/health", params={"topicVersion": version}, headers=ROOT
            )
        assert (response.status, await response.text()) == (200, "ok")


async def test_a_tls_broker_client_is_known_by_its_certificate_and_bootstraps(
    fake_clock: FakeClock, tmp_path: Path
) -> None:
    # AuthenticationTls with a certificate of CN "broker" (a super-user): the health check's
    # in-memory connection presents it, and the standalone's bootstrap runs as that role.
    certs = write_local_certificates(tmp_path, client_role="broker")
    params = json.dumps(
        {"tlsCertFile": str(certs.client_cert), "tlsKeyFile": str(certs.client_key)}
    )
    async for http in _serve(fake_clock, f"{PLUGIN}Tls", params):
        for version in ("V1", "V2"):
            with anyio.fail_after(10):
                response = await http.get(
                    "/admin/v2/brokers/health", params={"topicVersion": version}, headers=ROOT
                )
            assert (response.status, await response.text()) == (200, "ok")
        response = await http.get("/admin/v2/namespaces/public", headers=ROOT)
        assert (response.status, await response.json()) == (
            200,
            ["public/default", "public/default-2"],
        )


async def test_without_a_super_user_broker_client_nothing_is_bootstrapped(
    fake_clock: FakeClock, tmp_path: Path
) -> None:
    certs = write_local_certificates(tmp_path, client_role="someone")
    params = f"tlsCertFile:{certs.client_cert},tlsKeyFile:{certs.client_key}"
    async for http in _serve(fake_clock, f"{PLUGIN}Tls", params):
        response = await http.get("/admin/v2/tenants", headers=ROOT)
        assert (response.status, await response.json()) == (200, [])


async def test_unusable_broker_client_parameters_fail_the_check_with_their_reason(
    fake_clock: FakeClock,
) -> None:
    async for http in _serve(fake_clock, f"{PLUGIN}Basic", "no-colon-here"):
        with anyio.fail_after(10):
            response = await http.get("/admin/v2/brokers/health", headers=ROOT)
        assert response.status == 500
        assert "brokerClientAuthenticationParameters" in (await response.json())["reason"]


async def test_a_refused_broker_client_fails_the_check_at_once(fake_clock: FakeClock) -> None:
    # No broker client credentials and no anonymous role: the CONNECT is refused, and the
    # check says so at once instead of retrying for 58 s.
    async for http in _serve(fake_clock, "", ""):
        with anyio.fail_after(10):
            response = await http.get("/admin/v2/brokers/health", headers=ROOT)
        assert response.status == 500
        reason = (await response.json())["reason"]
        assert "AuthenticationError: Failed to authenticate" in reason
