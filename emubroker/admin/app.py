"""The HTTP admin server (aiohttp): Pulsar's REST v2 paths and ``/metrics`` on ``webServicePort``.

Every route of ``access.ROUTE_RULES`` is registered at start; the ``routes_*`` modules that
handle them (clusters, tenants, namespaces, topics, subscriptions, messages, schemas, brokers,
lookup, ...) are imported at the first request (``routing``); every failure becomes Pulsar's
``{"reason": ...}`` body through the ``errors.rest_errors`` middleware, unknown paths included.
Handlers reach the broker through the :class:`~emubroker.admin.context.AdminContext` stored in
the application.

aiohttp runs on asyncio only (DESIGN.md decision 5), so ``serve_admin`` needs anyio's asyncio
backend. It serves on sockets bound by the caller (``net.bind_tcp_sockets``), so the admin API
gets the same ``localhost`` = 127.0.0.1 + ::1 and port-0 rules as the binary protocol.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import anyio
from aiohttp import web

from emubroker.admin import routing
from emubroker.admin.context import CONTEXT
from emubroker.admin.errors import rest_errors
from emubroker.admin.http import MAX_BODY, max_request_size
from emubroker.admin.security import rest_security
from emubroker.admin.topic_owner import topic_ownership

if TYPE_CHECKING:
    import socket
    import ssl

    from anyio.abc import TaskStatus

    from emubroker.admin.context import AdminContext

__all__ = ["build_admin_app", "serve_admin"]

log = logging.getLogger(__name__)


def build_admin_app(context: AdminContext) -> web.Application:
    """The aiohttp application with every admin route.

    Args:
        context: The broker services the handlers use.
    """
    # rest_errors outermost: the security middleware's refusals become Pulsar's error bodies.
    # topic_ownership innermost: only authorized calls are looked up and redirected.
    app = web.Application(
        middlewares=[rest_errors, max_request_size, rest_security, topic_ownership],
        client_max_size=MAX_BODY,
    )
    app[CONTEXT] = context
    routing.add_routes(app)
    return app


HTTP_IDLE_TIMEOUT_SECONDS: Final = 30.0
"""How long an admin connection may wait without a request before it is closed: Jetty's idle
timeout, which Pulsar's web service keeps. aiohttp's own default is an hour, and it also covers
a connection that connects and sends only part of its headers, so a slow client cannot hold a
file descriptor longer than this."""


async def serve_admin(
    app: web.Application,
    sockets: list[socket.socket],
    *,
    tls_sockets: list[socket.socket] | None = None,
    ssl_context: ssl.SSLContext | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on the given listening sockets until cancelled.

    Args:
        app: From :func:`build_admin_app`.
        sockets: Bound, listening sockets for HTTP; closed when the server stops.
        tls_sockets: Bound, listening sockets for HTTPS (``webServicePortTls``).
        ssl_context: The TLS context of ``tls_sockets``.
        task_status: Told once every socket accepts requests.
    """
    runner = web.AppRunner(
        app, handle_signals=False, access_log=None, keepalive_timeout=HTTP_IDLE_TIMEOUT_SECONDS
    )
    await runner.setup()
    tls_sockets = tls_sockets or []
    sockets = [*sockets, *tls_sockets]
    try:
        for sock in sockets:
            context = ssl_context if sock in tls_sockets else None
            await web.SockSite(runner, sock, ssl_context=context).start()
        task_status.started()
        await anyio.Event().wait()  # serve until cancelled
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()
        for sock in sockets:
            sock.close()
