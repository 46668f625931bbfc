"""``emubroker dashboard RUN_DIR [--port N] [--bind HOST]``: the dashboard over a recorded run.

Serves the live page's files and ``/dashboard/api/state?t=SECONDS`` from
:class:`~emubroker.dashboard.replay.Recording` until SIGINT or SIGTERM, after printing one line
with its URL. A run directory that cannot be replayed (none, no load-balancer trace, a trace of
an unknown schema version) is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys

import anyio
import msgspec
from aiohttp import web

from emubroker.dashboard.assets import add_page_routes
from emubroker.dashboard.replay import Recording, RunError, load_run

__all__ = ["add_arguments", "build_replay_app", "run"]

_RECORDING = web.AppKey("emubroker.dashboard.recording", Recording)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory with traces")
    parser.add_argument("--port", type=_port, default=0, help="HTTP port (default 0: any free)")
    parser.add_argument("--bind", default="127.0.0.1", help="address (default 127.0.0.1)")


async def _state(request: web.Request) -> web.Response:
    recording = request.app[_RECORDING]
    try:
        at = float(request.query.get("t", "0"))
    except ValueError:
        raise web.HTTPBadRequest(text="t: seconds since the run started") from None
    return web.Response(
        body=msgspec.json.encode(recording.state_at(at)),
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def build_replay_app(recording: Recording) -> web.Application:
    """The page and its replayed state."""
    app = web.Application()
    app[_RECORDING] = recording
    add_page_routes(app)
    app.router.add_get("/dashboard/api/state", _state)
    return app


async def _serve(recording: Recording, sock: socket.socket) -> None:
    runner = web.AppRunner(build_replay_app(recording), handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        host, port = sock.getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        decisions = len(recording.decisions())
        sys.stdout.write(
            f"dashboard: http://{host}:{port}/dashboard/ (replay of {recording.name}: "
            f"{recording.duration:.0f} s, {decisions} decisions)\n"
        )
        sys.stdout.flush()
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                return
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()


def run(args: argparse.Namespace) -> int:
    """Run the command; returns the exit code."""
    try:
        recording = load_run(args.run_dir)
    except RunError as exc:
        sys.stderr.write(f"emubroker dashboard: {exc}\n")
        return 2
    try:
        family = socket.AF_INET6 if ":" in args.bind else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((args.bind, args.port))
        sock.listen(128)
    except OSError as exc:
        sys.stderr.write(f"emubroker dashboard: cannot listen on {args.bind}:{args.port}: {exc}\n")
        return 1
    with sock:
        anyio.run(_serve, recording, sock, backend="asyncio")
    return 0
