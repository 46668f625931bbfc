"""The accept loop of the binary protocol, and socket binding shared with the admin server.

``serve_pulsar`` follows STYLE.md §1.15: it never returns, calls ``task_status.started`` once it
is listening, and runs one ``Session`` per accepted connection inside its own task group, so
cancelling it closes every connection. A session that fails is logged and forgotten; it never
takes the listener down.

``bind_tcp_sockets`` implements the bind rules of the ``standalone`` command: ``localhost`` means
both 127.0.0.1 and ::1 on the same port (the official client resolves ``localhost`` to either);
when ::1 is unavailable on the machine we bind 127.0.0.1 alone and log it. Port 0 picks a free
port, the same one on every address.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
from typing import TYPE_CHECKING, Final

import anyio
from anyio.abc import SocketAttribute, SocketListener
from anyio.streams.stapled import MultiListener
from anyio.streams.tls import TLSStream

from emubroker.net.accepting import PatientListener
from emubroker.net.guards import NetGuards
from emubroker.net.session import Session
from protocol import commands as c
from protocol.clock import AnyioClock
from protocol.errors import ServerError
from protocol.framing import encode_frame

if TYPE_CHECKING:
    import ssl

    from anyio.abc import ByteStream, Listener, SocketStream, TaskStatus

    from emubroker.net.session import HandlerFactory
    from emubroker.net.traffic import TrafficCounter
    from protocol.clock import Clock

__all__ = [
    "bind_tcp_sockets",
    "create_pulsar_listener",
    "listener_from_sockets",
    "listener_port",
    "serve_pulsar",
]

log = logging.getLogger(__name__)

BACKLOG: Final = 1024
"""Pending connections the kernel may queue; test suites open many clients at once."""

TLS_HANDSHAKE_GUARD_SECONDS: Final = 10.0
"""How long a TLS client may take to finish its handshake before it is dropped: a guard against
a peer that connects and stays silent (real time, like the session's flush guard), far above
what a loopback handshake needs."""

REFUSAL_GUARD_SECONDS: Final = 5.0
"""How long writing the ERROR to a refused connection may take (a guard; real time)."""

NO_REQUEST: Final = 2**64 - 1
"""The request id of an ERROR that answers no request: Pulsar's -1 as the uint64 it is sent as."""

_BIND_ATTEMPTS: Final = 10  # port 0 on two families: retry when the second family's port is taken
_IPV6_UNAVAILABLE: Final = frozenset(
    {errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT}
)


def _bind(family: socket.AddressFamily, address: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


async def _addresses(host: str) -> list[tuple[socket.AddressFamily, str]]:
    if host == "localhost":
        return [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")]
    infos = await anyio.getaddrinfo(host, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    found: list[tuple[socket.AddressFamily, str]] = []
    for family, _, _, _, sockaddr in infos:
        item = (family, str(sockaddr[0]))
        if item not in found:
            found.append(item)
    return found


async def bind_tcp_sockets(host: str, port: int) -> list[socket.socket]:
    """Bind listening, non-blocking TCP sockets for ``host:port``.

    Args:
        host: ``localhost`` (127.0.0.1 and ::1), an address, or a name to resolve.
        port: The port; ``0`` picks a free one, shared by every socket.

    Returns:
        One socket per address, in the order above; the caller owns them.

    Raises:
        OSError: Binding failed (e.g. the port is in use).
    """
    addresses = await _addresses(host)
    for _ in range(_BIND_ATTEMPTS):
        sockets: list[socket.socket] = []
        chosen = port
        try:
            for family, address in addresses:
                try:
                    sock = _bind(family, address, chosen)
                except OSError as exc:
                    if (
                        host == "localhost"
                        and family == socket.AF_INET6
                        and (exc.errno in _IPV6_UNAVAILABLE)
                    ):
                        log.warning(
                            "::1 is not available here (%s); listening on 127.0.0.1 only", exc
                        )
                        continue
                    raise
                sockets.append(sock)
                chosen = sock.getsockname()[1]
        except OSError as exc:
            for sock in sockets:
                sock.close()
            if port == 0 and exc.errno == errno.EADDRINUSE:
                continue  # the free port of the first family is taken on another: start over
            raise
        return sockets
    raise OSError(errno.EADDRINUSE, f"no free port available on every address of {host!r}")


async def create_pulsar_listener(
    host: str, port: int, *, clock: Clock | None = None
) -> MultiListener[SocketStream]:
    """An anyio listener on ``host:port`` (see :func:`bind_tcp_sockets`).

    Raises:
        OSError: Binding failed.
    """
    return await listener_from_sockets(await bind_tcp_sockets(host, port), clock=clock)


async def listener_from_sockets(
    sockets: list[socket.socket], *, clock: Clock | None = None
) -> MultiListener[SocketStream]:
    """One anyio listener over bound, listening sockets (it takes ownership of them).

    Each accepts patiently: running out of file descriptors pauses accepting, never the broker
    (``accepting``); ``clock`` times the pause.
    """
    patience = AnyioClock() if clock is None else clock
    return MultiListener(
        [
            PatientListener(await SocketListener.from_socket(sock), clock=patience)
            for sock in sockets
        ]
    )


def listener_port(listener: Listener[ByteStream]) -> int:
    """The local port of a TCP listener (the real one when it was bound to port 0)."""
    port: int = listener.extra(SocketAttribute.local_port)
    return port


async def serve_pulsar(
    listener: Listener[ByteStream],
    handler_factory: HandlerFactory,
    *,
    clock: Clock,
    max_frame_size: int,
    keepalive_interval: float,
    ssl_context: ssl.SSLContext | None = None,
    guards: NetGuards | None = None,
    traffic: TrafficCounter | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Accept connections forever, one :class:`Session` each; closes the listener when cancelled.

    Args:
        listener: Where connections come from (see :func:`create_pulsar_listener`).
        handler_factory: Builds each session's command handler.
        clock: Drives every session's keep-alive.
        max_frame_size: Largest frame a client may send (``maxMessageSize`` + 10 KiB, §2.3).
        keepalive_interval: ``keepAliveIntervalSeconds``.
        ssl_context: Serve TLS (``pulsar+ssl://``): each connection's handshake completes
            before its session starts; a failed handshake is logged and the connection dropped.
        guards: The broker-wide limits (shared with the broker's other listeners); a connection
            over ``brokerMaxConnections`` or ``brokerMaxConnectionsPerIp`` is answered ERROR
            ``NotAllowedError`` and closed, as Pulsar's ``ServerCnx.channelActive`` does.
        traffic: Counts every session's bytes (the broker's own bandwidth).
        task_status: Told once the listener accepts connections.
    """
    if guards is None:
        guards = NetGuards()
    connections = guards.connections

    async def serve_one(stream: ByteStream) -> None:
        address = stream.extra(SocketAttribute.remote_address, None)
        ip = str(address[0]) if isinstance(address, tuple) else str(address)
        refusal = connections.admit(ip)
        try:
            if ssl_context is not None:
                tls = await _tls_handshake(stream, ssl_context)
                if tls is None:
                    return
                stream = tls
            if refusal is not None:
                await _refuse(stream, refusal)
                return
            session = Session(
                stream,
                handler_factory,
                clock=clock,
                max_frame_size=max_frame_size,
                keepalive_interval=keepalive_interval,
                guards=guards,
                traffic=traffic,
            )
            await session.run()
        except Exception:
            # Task boundary (STYLE.md §1.17): a broken session must not stop the accept loop.
            log.exception("session failed")
            with anyio.CancelScope(shield=True):
                await stream.aclose()
        finally:
            if refusal is None:
                connections.release(ip)

    try:
        async with anyio.create_task_group() as tg:
            task_status.started()
            await listener.serve(serve_one, tg)
    finally:
        # Shielded: MultiListener closes its listeners one by one with a checkpoint each, and a
        # cancellation there would leave the rest (e.g. the ::1 socket) open.
        with anyio.CancelScope(shield=True):
            await listener.aclose()


async def _refuse(stream: ByteStream, reason: str) -> None:
    """Answer a connection over a limit with ERROR ``NotAllowedError``, then close it.

    Pulsar writes the error before any CONNECT, with request id -1 (all ones as a uint64).
    """
    log.warning("refusing a connection: %s", reason)
    error = c.Error(request_id=NO_REQUEST, error=ServerError.NotAllowedError, message=reason)
    with anyio.move_on_after(REFUSAL_GUARD_SECONDS):
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stream.send(encode_frame(error))
    with anyio.CancelScope(shield=True):
        await stream.aclose()


async def _tls_handshake(stream: ByteStream, context: ssl.SSLContext) -> TLSStream | None:
    """The TLS stream over ``stream``, or None (logged, stream closed) when the handshake fails."""
    peer = stream.extra(SocketAttribute.remote_address, "?")
    reason = "timed out"
    with anyio.move_on_after(TLS_HANDSHAKE_GUARD_SECONDS):
        try:
            # standard_compatible=False: Pulsar clients hang up without a TLS close_notify.
            return await TLSStream.wrap(
                stream, server_side=True, ssl_context=context, standard_compatible=False
            )
        except (OSError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            reason = repr(exc.__cause__ or exc)
    log.warning("TLS handshake with %s failed: %s", peer, reason)
    with anyio.CancelScope(shield=True):
        await stream.aclose()
    return None
