"""``GET /metrics``: the broker's Prometheus text (Pulsar serves it beside the admin API)."""

from __future__ import annotations

from aiohttp import web

from emubroker.admin.context import CONTEXT
from emubroker.admin.metrics import CONTENT_TYPE

__all__ = ["add_routes"]


async def _prometheus(request: web.Request) -> web.Response:
    text = request.app[CONTEXT].metrics.render()
    return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})


def add_routes(app: web.Application) -> None:
    """Register ``/metrics`` (and ``/metrics/``)."""
    app.router.add_get("/metrics", _prometheus)
    app.router.add_get("/metrics/", _prometheus)
