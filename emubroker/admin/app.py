"""The HTTP admin server (aiohttp): Pulsar's REST v2 paths, served on ``webServicePort``.

For now: ``GET /admin/v2/brokers/health`` (``ok``, what ``pulsar-admin brokers healthcheck``
reads) and ``GET /metrics`` (Prometheus text, see ``metrics``). The full REST API is a later
issue; routes are added per resource in ``routes_*.py`` modules.

aiohttp runs on asyncio only (DESIGN.md decision 5), so ``serve_admin`` needs anyio's asyncio
backend. It serves on sockets bound by the caller (``net.bind_tcp_sockets``), so the admin API
gets the same ``localhost`` = 127.0.0.1 + ::1 and port-0 rules as the binary protocol.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
from aiohttp import web

from emubroker.admin.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    import socket

    from anyio.abc import TaskStatus

    from emubroker.admin.metrics import MetricsCollector

__all__ = ["build_admin_app", "serve_admin"]

log = logging.getLogger(__name__)


def build_admin_app(metrics: MetricsCollector) -> web.Application:
    """The aiohttp application with the admin routes.

    Args:
        metrics: Renders ``/metrics``.
    """
    app = web.Application()

    async def health(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def prometheus(request: web.Request) -> web.Response:
        return web.Response(body=metrics.render().encode(), headers={"Content-Type": CONTENT_TYPE})

    app.router.add_get("/admin/v2/brokers/health", health)
    app.router.add_get("/metrics", prometheus)
    app.router.add_get("/metrics/", prometheus)
    return app


async def serve_admin(
    app: web.Application,
    sockets: list[socket.socket],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on the given listening sockets until cancelled.

    Args:
        app: From :func:`build_admin_app`.
        sockets: Bound, listening sockets; closed when the server stops.
        task_status: Told once every socket accepts requests.
    """
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        for sock in sockets:
            await web.SockSite(runner, sock).start()
        task_status.started()
        await anyio.Event().wait()  # serve until cancelled
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()
        for sock in sockets:
            sock.close()
