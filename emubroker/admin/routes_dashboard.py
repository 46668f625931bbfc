"""``/dashboard/``: the live cluster dashboard of every broker (docs/dashboard.md).

The page and its files come from :mod:`emubroker.dashboard.assets`; the page polls
``/dashboard/api/state`` every second (:func:`~emubroker.admin.dashboard_state.cluster_state`),
and brokers ask each other for ``/dashboard/api/local``. Like Pulsar's ``brokers`` and
``broker-stats`` endpoints, all of it needs a super-user when authorization is on (``access``:
routes outside ``/admin/v2`` need one).
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from emubroker.admin.dashboard_state import cluster_state, local_state
from emubroker.admin.http import context
from emubroker.dashboard.assets import add_page_routes

__all__ = ["add_routes", "json_response"]


def json_response(value: object) -> web.Response:
    # None stays null (the page reads "no owner", "no limit" from it), unlike the admin API's
    # Pulsar-style encoding, which drops null fields.
    return web.Response(
        body=msgspec.json.encode(value),
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


async def state(request: web.Request) -> web.Response:
    """``GET /dashboard/api/state``: the whole cluster."""
    return json_response(
        await cluster_state(context(request), request.headers.get("Authorization"))
    )


async def local(request: web.Request) -> web.Response:
    """``GET /dashboard/api/local``: this broker's topics and recent decisions."""
    return json_response(local_state(context(request)))


def add_routes(app: web.Application) -> None:
    """Register the dashboard's page and JSON routes."""
    add_page_routes(app)
    app.router.add_get("/dashboard/api/state", state)
    app.router.add_get("/dashboard/api/local", local)
