"""The connection pool: one `ClientConnection` per broker URL string, as the C++ client keeps.

Concurrent requests for a URL that is still connecting share that attempt. A connection that
ends removes itself; the next request for its URL connects again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from protocol.client._util import Future, with_deadline
from protocol.client.connection import ClientConnection
from protocol.client.transport import Transport
from protocol.clock import Clock
from protocol.errors import ClientClosedError, ConnectionBrokenError

if TYPE_CHECKING:
    from protocol import commands as c

__all__ = ["ConnectionPool", "Connector", "host_port", "service_urls"]

Connector = Callable[[str, int], Awaitable[Transport]]
"""Opens a transport to `(host, port)`; `connect_tcp` in production, a fake in tests."""

DEFAULT_PORT: Final = 6650


def host_port(url: str) -> tuple[str, int]:
    """`("host", port)` of a `pulsar://host:port` URL.

    Raises:
        ValueError: not a `pulsar://` URL (TLS is not supported).
    """
    parts = urlsplit(url)
    if parts.scheme != "pulsar" or not parts.hostname:
        raise ValueError(f"unsupported broker URL {url!r} (expected pulsar://host:port)")
    return parts.hostname, parts.port or DEFAULT_PORT


def service_urls(service_url: str) -> list[str]:
    """The broker URLs a service URL names: `pulsar://h1:p1,h2:p2` -> one URL per host.

    A cluster's service URL may list several brokers, as the C++ client's `ServiceURI` reads
    it; a host without a port gets 6650.

    Raises:
        ValueError: not a `pulsar://` URL, or a host is empty.
    """
    scheme, sep, rest = service_url.rstrip("/").partition("://")
    if not sep or scheme != "pulsar":
        raise ValueError(f"unsupported service URL {service_url!r} (expected pulsar://host:port)")
    urls = [f"pulsar://{host.strip()}" for host in rest.split("/", 1)[0].split(",")]
    for url in urls:
        host_port(url)
    return urls


class ConnectionPool:
    """Open connections by URL.

    Args:
        clock: for the connect deadline and the connections' keep-alive.
        connector: opens transports.
        spawn: starts a connection's pump in the client's task group.
        connection_timeout: seconds to connect and finish the handshake.
        keep_alive_interval: seconds between PINGs (None disables them).
        client_version: sent in CONNECT.
        authentication: the credential CONNECT carries (None: none).
    """

    def __init__(
        self,
        clock: Clock,
        connector: Connector,
        spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
        *,
        connection_timeout: float,
        keep_alive_interval: float | None,
        client_version: str,
        authentication: c.AuthData | None = None,
    ) -> None:
        self._clock = clock
        self._authentication = authentication
        self._connector = connector
        self._spawn = spawn
        self._connection_timeout = connection_timeout
        self._keep_alive_interval = keep_alive_interval
        self._client_version = client_version
        self._connections: dict[str, ClientConnection] = {}
        self._connecting: dict[str, Future[ClientConnection]] = {}
        self.closed = False

    async def get(self, url: str) -> ClientConnection:
        """The open connection to `url`, connecting (and handshaking) if there is none.

        Raises:
            ConnectionBrokenError: the broker cannot be reached.
            OperationTimeoutError: connecting took longer than the connection timeout.
            ClientClosedError: the pool is closed.
        """
        if self.closed:
            raise ClientClosedError("client is closed")
        cnx = self._connections.get(url)
        if cnx is not None and cnx.is_open:
            return cnx
        pending = self._connecting.get(url)
        if pending is not None:
            return await pending.wait()
        future: Future[ClientConnection] = Future()
        self._connecting[url] = future
        try:
            cnx = await self._connect(url)
            future.set_result(cnx)
            return cnx
        except BaseException as exc:
            future.set_exception(
                exc if isinstance(exc, Exception) else ConnectionBrokenError(f"connect to {url}")
            )
            raise
        finally:
            del self._connecting[url]

    async def _connect(self, url: str) -> ClientConnection:
        host, port = host_port(url)
        deadline = self._clock.now() + self._connection_timeout
        transport = await with_deadline(
            self._clock, deadline, lambda: self._connector(host, port), f"connect to {url}"
        )
        cnx = ClientConnection(
            url,
            transport,
            self._clock,
            keep_alive_interval=self._keep_alive_interval,
            on_closed=self._forget,
        )
        await cnx.handshake(
            deadline, client_version=self._client_version, authentication=self._authentication
        )
        self._connections[url] = cnx
        self._spawn(cnx.run)
        return cnx

    def _forget(self, cnx: ClientConnection) -> None:
        if self._connections.get(cnx.url) is cnx:
            del self._connections[cnx.url]

    async def aclose(self) -> None:
        """Close every connection; later `get` calls raise `ClientClosedError`."""
        self.closed = True
        for cnx in list(self._connections.values()):
            await cnx.aclose()
