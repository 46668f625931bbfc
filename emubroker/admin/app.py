"""The HTTP admin server (aiohttp): Pulsar's REST v2 paths and ``/metrics`` on ``webServicePort``.

Routes are registered per resource by the ``routes_*`` modules (clusters, tenants, namespaces,
topics, subscriptions, messages, schemas, brokers, lookup); every failure becomes Pulsar's
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

from emubroker.admin import (
    routes_backlog_quota,
    routes_broker_stats,
    routes_brokers,
    routes_bundles,
    routes_clusters,
    routes_dashboard,
    routes_dispatch_rate,
    routes_failure_domains,
    routes_limits,
    routes_lookup,
    routes_messages,
    routes_namespace_policies,
    routes_namespaces,
    routes_partitioned,
    routes_permissions,
    routes_placement_policies,
    routes_schemas,
    routes_subscriptions,
    routes_tenants,
    routes_termination,
    routes_topic_policies,
    routes_topic_properties,
    routes_topics,
    routes_unload,
)
from emubroker.admin.context import CONTEXT
from emubroker.admin.errors import rest_errors
from emubroker.admin.http import MAX_BODY, max_request_size
from emubroker.admin.metrics import CONTENT_TYPE
from emubroker.admin.security import rest_security
from emubroker.admin.topic_owner import topic_ownership

if TYPE_CHECKING:
    import socket
    import ssl

    from anyio.abc import TaskStatus

    from emubroker.admin.context import AdminContext

__all__ = ["build_admin_app", "serve_admin"]

log = logging.getLogger(__name__)


async def _prometheus(request: web.Request) -> web.Response:
    text = request.app[CONTEXT].metrics.render()
    return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})


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
    routes_brokers.add_routes(app)
    routes_broker_stats.add_routes(app)
    routes_clusters.add_routes(app)
    routes_tenants.add_routes(app)
    routes_namespaces.add_routes(app)
    routes_namespace_policies.add_routes(app)
    routes_placement_policies.add_routes(app)
    routes_failure_domains.add_routes(app)
    routes_unload.add_routes(app)
    routes_bundles.add_routes(app)
    routes_permissions.add_routes(app)
    routes_topic_properties.add_routes(app)
    routes_topics.add_routes(app)
    routes_partitioned.add_routes(app)
    routes_dispatch_rate.add_routes(app)
    routes_limits.add_routes(app)
    routes_backlog_quota.add_routes(app)
    routes_topic_policies.add_routes(app)
    routes_subscriptions.add_routes(app)
    routes_messages.add_routes(app)
    routes_termination.add_routes(app)
    routes_schemas.add_routes(app)
    routes_lookup.add_routes(app)
    routes_dashboard.add_routes(app)
    app.router.add_get("/metrics", _prometheus)
    app.router.add_get("/metrics/", _prometheus)
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
