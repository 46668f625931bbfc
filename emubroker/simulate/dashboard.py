"""The live dashboard of a real-time simulation (``emubroker simulate --real-time``).

The simulated brokers have no admin HTTP servers, so the simulation serves the page itself on a
loopback port: the same page and the same state (``admin.dashboard_state.cluster_state``, asked
of a running broker, the leader when there is one), with every broker's local part read from its
admin context in this process instead of over HTTP.

The simulation runs on trio and aiohttp on asyncio: the server runs an asyncio loop in a thread
of its own, and each poll computes the state on the simulation's loop (``anyio.from_thread``).
A virtual-clock simulation does not serve it: it runs faster than anyone could watch.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from aiohttp import web

from emubroker.admin.dashboard_state import cluster_state, local_state
from emubroker.admin.routes_dashboard import json_response
from emubroker.dashboard.assets import add_page_routes

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.simulate.cluster import SimulatedCluster

__all__ = ["serving_dashboard"]

log = logging.getLogger(__name__)

HOST = "127.0.0.1"


def _contexts(cluster: SimulatedCluster) -> dict[str, AdminContext]:
    return {b.admin.broker_id: b.admin for b in cluster.brokers if b.admin is not None}


async def simulated_state(cluster: SimulatedCluster) -> dict[str, Any] | None:
    """The page's state of the running brokers; None while none runs."""
    contexts = _contexts(cluster)
    if not contexts:
        return None
    leading = [
        ctx
        for ctx in contexts.values()
        if ctx.leader_election is not None and ctx.leader_election.is_leader()
    ]
    ctx = (leading or list(contexts.values()))[0]

    async def in_process(
        peers: dict[str, str], headers: dict[str, str]
    ) -> dict[str, dict[str, Any] | None]:
        # A stopped broker has no context: shown unreachable, with its stored report.
        return {
            broker: local_state(contexts[broker]) if broker in contexts else None
            for broker in peers
        }

    return await cluster_state(ctx, None, local_parts=in_process)


def _app(state: Callable[[], dict[str, Any] | None]) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        # ``state`` blocks until the simulation's loop answers: off this loop's thread.
        found = await anyio.to_thread.run_sync(state)
        if found is None:
            raise web.HTTPServiceUnavailable(text="no simulated broker is running")
        return json_response(found)

    app = web.Application()
    add_page_routes(app)
    app.router.add_get("/dashboard/api/state", handle)
    return app


class _Server:
    """The page's aiohttp server on an asyncio loop of its own, in a thread."""

    def __init__(self, app: web.Application, sock: socket.socket) -> None:
        self._app = app
        self._sock = sock
        self._ready = threading.Event()
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._stop: anyio.Event | None = None
        self.thread = threading.Thread(target=self._run, name="simulation-dashboard", daemon=True)

    def _run(self) -> None:
        anyio.run(self._serve, backend="asyncio")  # aiohttp needs asyncio

    async def _serve(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._stop = anyio.Event()
        runner = web.AppRunner(self._app, handle_signals=False, access_log=None)
        await runner.setup()
        try:
            await web.SockSite(runner, self._sock).start()
            self._ready.set()
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def start(self) -> None:
        """Start serving; returns once it listens (blocking: call it from a worker thread)."""
        self.thread.start()
        self._ready.wait(5.0)

    def stop(self) -> None:
        """Stop serving and wait for the thread (blocking: call it from a worker thread)."""
        if self._stop is not None and self._token is not None:
            anyio.from_thread.run_sync(self._stop.set, token=self._token)
        self.thread.join(5.0)


@asynccontextmanager
async def serving_dashboard(cluster: SimulatedCluster, port: int = 0) -> AsyncIterator[str]:
    """Serve the page on ``127.0.0.1:port`` (0: a free port) while inside; yields its URL.

    Raises:
        OSError: The port could not be bound.
    """
    token = anyio.lowlevel.current_token()

    def state() -> dict[str, Any] | None:
        return anyio.from_thread.run(simulated_state, cluster, token=token)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(128)
        server = _Server(_app(state), sock)
        await anyio.to_thread.run_sync(server.start)
        try:
            yield f"http://{HOST}:{sock.getsockname()[1]}/dashboard/"
        finally:
            await anyio.to_thread.run_sync(server.stop)
