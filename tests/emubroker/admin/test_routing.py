"""The admin routes: registered from ``ROUTE_RULES``, their handlers loaded at first use."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from emubroker.admin import build_admin_app, routing
from emubroker.admin.access import ROUTE_RULES
from tests.emubroker.admin.conftest import Admin

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


def test_the_routes_modules_handle_exactly_the_routes_of_route_rules() -> None:
    recorded = routing.handlers()
    assert set(recorded) - set(ROUTE_RULES) == set(), "handled, but not in ROUTE_RULES"
    assert set(ROUTE_RULES) - set(recorded) == set(), "in ROUTE_RULES, but no module handles it"


def test_each_route_is_registered_on_the_path_its_module_gives_it() -> None:
    # The patterns included ({domain:persistent|non-persistent}, {value:.+}): a route registered
    # from ROUTE_RULES matches the URLs its module's own registration matched.
    for (method, canonical), handler in routing.handlers().items():
        assert routing.route_path(canonical) == handler.path, (method, canonical)


def test_the_app_serves_each_route_of_route_rules_once_and_head_with_get() -> None:
    app = build_admin_app(object())  # type: ignore[arg-type]  # routes only
    served = [
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    ]
    assert len(served) == len(set(served))
    gets = {path for method, path in ROUTE_RULES if method == "GET"}
    assert set(served) == set(ROUTE_RULES) | {("HEAD", path) for path in gets}


def test_a_literal_segment_wins_over_a_variable_one_registered_after_it() -> None:
    # aiohttp tries the paths of one prefix in registration order (ROUTE_RULES' order).
    app = build_admin_app(object())  # type: ignore[arg-type]  # routes only
    order = [route.resource.canonical for route in app.router.routes() if route.resource]
    isolation = "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies"
    assert order.index(f"{isolation}/brokers") < order.index(f"{isolation}/{{policy}}")
    topic = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}"
    assert order.index(f"{topic}/{{subName}}/dispatchRate") < order.index(
        f"{topic}/subscription/{{subscription}}"
    )


BEFORE_AND_AFTER_A_REQUEST = """
import asyncio, sys
from aiohttp.test_utils import TestClient, TestServer
from emubroker.admin import build_admin_app
from emubroker.app import open_broker
from emubroker.config import load_config

def loaded():
    return sorted(name for name in sys.modules if name.startswith("emubroker.admin.routes_"))

async def main():
    config = load_config(overrides={"brokerServicePort": 6650, "webServicePort": 8080})
    async with open_broker(config, listen=False, admin=False) as broker:
        async with TestClient(TestServer(build_admin_app(broker.admin))) as client:
            print(len(loaded()))
            response = await client.get("/admin/v2/clusters")
            print(response.status, await response.text())
            print(len(loaded()) > 20)

asyncio.run(main())
"""


def test_the_first_request_loads_the_routes_modules_and_is_answered() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_AND_AFTER_A_REQUEST],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.splitlines() == ["0", '200 ["standalone"]', "True"]


async def test_a_request_after_the_handlers_are_forgotten_is_answered_the_same(
    admin: Admin,
) -> None:
    await admin.ok("PUT", "/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]})
    before = await admin.get("/admin/v2/tenants/acme")
    routing.handlers.cache_clear()  # as at a broker's first request
    assert await admin.get("/admin/v2/tenants/acme") == before
    head = await admin.client.head("/admin/v2/tenants/acme")
    assert head.status == 200
    wrong_method = await admin.call("PATCH", "/admin/v2/tenants/acme")
    assert wrong_method[0] == 405


def test_each_route_matches_with_the_expression_aiohttp_would_compile_for_it() -> None:
    from aiohttp import web

    app = build_admin_app(object())  # type: ignore[arg-type]  # routes only
    deferred = [r for r in app.router.resources() if isinstance(r, routing.PatternResource)]
    assert len(deferred) > 100
    for resource in deferred:
        path = routing.route_path(resource.canonical)
        assert resource._source == web.DynamicResource(path)._pattern.pattern, path


def test_building_the_admin_app_compiles_no_route_expression() -> None:
    # aiohttp compiled one per path with variables as it was registered: ~15 ms of a start.
    re.purge()
    app = build_admin_app(object())  # type: ignore[arg-type]  # routes only
    sources = {resource.get_info().get("pattern") for resource in app.router.resources()}
    assert len(sources) > 100
    re.purge()
    app = build_admin_app(object())  # type: ignore[arg-type]  # routes only
    compiled = {key[1] for key in re._cache}  # type: ignore[attr-defined]
    assert compiled & {pattern.pattern for pattern in sources if pattern is not None} == set()


async def test_a_route_is_compiled_at_its_first_request_and_answers(admin: Admin) -> None:
    app = admin.client.server.app
    assert app is not None
    stats = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/stats"
    (resource,) = [r for r in app.router.resources() if r.canonical == stats]
    assert isinstance(resource, routing.PatternResource)
    assert resource._compiled is None
    await admin.fails(
        "GET",
        "/admin/v2/persistent/public/default/t/stats",
        404,
        "Topic persistent://public/default/t not found",
    )
    assert resource._compiled is not None
    # The domain's pattern still applies: no route matches another domain.
    await admin.fails("GET", "/admin/v2/other/public/default/t/stats", 404, "No such REST endpoint")
