"""An HTTP/1.1 client for etcd's JSON gateway, on anyio streams (so trio works too).

etcd answers its v3 API as JSON on the client port (``POST /v3/kv/txn`` with a JSON body; see
``etcd_messages``). This client keeps a few keep-alive connections per gateway for unary calls
and opens a connection of its own for each server stream (a watch, a lease keep-alive), whose
reply is chunked with one JSON object per line.

Endpoints: one cluster may be given as several ``host:port`` endpoints. Connections go to the
current one; when it refuses or times out, the next is tried, and the one that answered becomes
current. A call is retried elsewhere only while its request cannot have reached a server
(connecting failed, or a pooled connection turned out to be closed before any reply byte):
etcd's writes are not idempotent, so a call that may have been applied fails instead.

Timeouts are deadlines on the injected clock (STYLE.md §3), kept by a ``DeadlineWatchdog`` whose
``run`` the gateway's owner keeps running.
"""

from __future__ import annotations

import logging
from collections import deque
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final, Generic, TypeVar

import anyio
import msgspec

from emubroker.metadata import http11
from emubroker.metadata.deadlines import DeadlineWatchdog
from emubroker.metadata.etcd_messages import GatewayStatus, StreamMessage

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

    from anyio.abc import SocketStream


__all__ = [
    "EtcdGateway",
    "GatewayCallError",
    "GatewayError",
    "GatewayTimeoutError",
    "GatewayUnavailableError",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Idle keep-alive connections kept per gateway; calls beyond it open (and then close) more.
# A broker's metadata calls in flight at once are few; 32 covers bursts without reconnecting.
MAX_IDLE_CONNECTIONS: Final = 32
# A reply, or one line of a stream (a watch response: the events of one revision), larger than
# this is refused. etcd's own request limit is 1.5 MiB and a revision's events are bounded by a
# transaction's ops (128 by default); a range of a whole big tree may be large, but 64 MiB of
# metadata JSON is corruption or a hostile peer.
MAX_REPLY_BYTES: Final = 64 * 1024 * 1024
_READ_CHUNK: Final = 65536
_ENCODER: Final = msgspec.json.Encoder()


class GatewayError(Exception):
    """Base of the gateway client's errors."""


class GatewayUnavailableError(GatewayError):
    """No endpoint could be reached, or a connection broke.

    Attributes:
        maybe_applied: Whether the request may have reached etcd (and so may have been applied).
    """

    def __init__(self, message: str, *, maybe_applied: bool) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


class GatewayTimeoutError(GatewayUnavailableError):
    """The call did not finish within its timeout."""


class GatewayCallError(GatewayError):
    """etcd answered with an error: ``code`` is the gRPC status code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd error {code}: {message}")
        self.code = code
        self.message = message


class _StaleConnectionError(Exception):
    # A pooled connection was closed by the server before it sent a byte of the reply.
    pass


def _call_error(status: int, body: bytes) -> GatewayCallError:
    try:
        error = msgspec.json.decode(body, type=GatewayStatus, strict=False)
    except msgspec.DecodeError:
        return GatewayCallError(0, f"HTTP {status}: {body[:200]!r}")
    return GatewayCallError(error.code, error.message or error.error)


class _Connection:
    """One HTTP/1.1 connection: the sans-IO reader pumped over an anyio stream."""

    def __init__(self, stream: SocketStream, host: str) -> None:
        self.stream = stream
        self.host = host
        self.reader = http11.ResponseReader()
        self.received_any = False
        self.keep_alive = False

    async def send_request(self, path: str, body: bytes) -> None:
        await self.stream.send(http11.post_request(self.host, path, body))

    async def next_event(self) -> http11.ResponseHead | bytes | object:
        while True:
            event = self.reader.next_event()
            if event is not http11.NEED_DATA:
                return event
            try:
                data = await self.stream.receive(_READ_CHUNK)
            except anyio.EndOfStream:
                data = b""
            self.received_any = self.received_any or bool(data)
            self.reader.feed(data)

    async def read_head(self) -> int:
        event = await self.next_event()
        if not isinstance(event, http11.ResponseHead):
            raise http11.HttpProtocolError(f"expected a response head, got {event!r}")
        self.keep_alive = event.keep_alive
        return event.status

    async def read_body_part(self) -> bytes | None:
        """The next bytes of the body; ``None`` once it is complete."""
        event = await self.next_event()
        if event is http11.END:
            return None
        if not isinstance(event, bytes):
            raise http11.HttpProtocolError(f"unexpected {event!r} in a response body")
        return event

    def reusable(self) -> bool:
        if self.keep_alive and self.reader.done:
            self.reader.next_response()
            self.received_any = False
            return True
        return False


async def _read_all(conn: _Connection) -> bytes:
    parts: list[bytes] = []
    size = 0
    while (chunk := await conn.read_body_part()) is not None:
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise http11.HttpProtocolError(f"an etcd reply is larger than {MAX_REPLY_BYTES} bytes")
        parts.append(chunk)
    return b"".join(parts)


class _StreamMessages(Generic[T]):
    """The results of a server stream, one JSON object per line of the chunked body.

    A class rather than an async generator: a stream is often left before its end (a watch is
    stopped, a keep-alive wants one reply), and a generator left suspended is only finalised
    by the garbage collector.
    """

    def __init__(self, conn: _Connection, decoder: msgspec.json.Decoder[StreamMessage[T]]) -> None:
        self._conn = conn
        self._decoder = decoder
        self._lines: deque[bytes] = deque()
        self._pending = b""

    def __aiter__(self) -> _StreamMessages[T]:
        return self

    async def __anext__(self) -> T:
        while True:
            while self._lines:
                message = self._decoder.decode(self._lines.popleft())
                if message.error is not None:
                    raise GatewayCallError(message.error.code, message.error.message)
                if message.result is not None:
                    return message.result
            part = await self._conn.read_body_part()
            if part is None:
                if self._pending.strip():
                    raise http11.HttpProtocolError("an etcd stream ended inside a message")
                raise StopAsyncIteration
            lines = (self._pending + part).split(b"\n")
            self._pending = lines.pop()
            if len(self._pending) > MAX_REPLY_BYTES:
                raise http11.HttpProtocolError("an etcd stream message is too large")
            self._lines.extend(line for line in lines if line.strip())


class EtcdGateway:
    """JSON calls to one etcd cluster through the gateway of any of its endpoints.

    Args:
        endpoints: ``(host, port)`` of the cluster's client URLs, in order of preference.
        watchdog: Keeps the timeouts; its owner must keep it running.
        request_timeout: Seconds a unary call may take, connecting included.
        connect_timeout: Seconds one connection attempt may take before the next endpoint.
    """

    def __init__(
        self,
        endpoints: Sequence[tuple[str, int]],
        *,
        watchdog: DeadlineWatchdog,
        request_timeout: float,
        connect_timeout: float,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = list(endpoints)
        self._current = 0
        self.watchdog = watchdog
        self._request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._closed = False

    @property
    def current_endpoint(self) -> tuple[str, int]:
        """The endpoint new connections go to."""
        return self.endpoints[self._current]

    async def call(self, path: str, request: msgspec.Struct, reply: type[T]) -> T:
        """``POST`` ``request`` to ``path`` (``/v3/kv/range``) and decode the reply.

        Raises:
            GatewayCallError: etcd refused the request.
            GatewayTimeoutError: No reply within the request timeout.
            GatewayUnavailableError: No endpoint answered, or the connection broke.
        """
        body = _ENCODER.encode(request)
        with self.watchdog.limit(self._request_timeout) as scope:
            status, data = await self._exchange(path, body)
        if scope.cancelled_caught:
            raise GatewayTimeoutError(f"etcd call {path} timed out", maybe_applied=True)
        if status != 200:
            raise _call_error(status, data)
        try:
            return msgspec.json.decode(data, type=reply, strict=False)
        except msgspec.DecodeError as exc:
            raise GatewayUnavailableError(
                f"etcd sent a malformed reply to {path}: {exc}", maybe_applied=True
            ) from exc

    @asynccontextmanager
    async def open_stream(
        self, path: str, request: msgspec.Struct, reply: type[T]
    ) -> AsyncIterator[AsyncIterator[T]]:
        """Start a server stream (``/v3/watch``) on a connection of its own.

        Yields:
            The stream's messages, decoded; it ends when etcd ends the stream.

        Raises:
            GatewayCallError: etcd refused the request, or reported an error in the stream.
            GatewayUnavailableError: No endpoint answered, or the connection broke.
        """
        decoder = msgspec.json.Decoder(StreamMessage[reply], strict=False)  # type: ignore[valid-type]  # reply is a runtime type
        with self.watchdog.limit(self._request_timeout) as scope:
            conn = await self._connect()
        if scope.cancelled_caught:
            raise GatewayTimeoutError(f"etcd stream {path}: no connection", maybe_applied=False)
        try:
            with self.watchdog.limit(self._request_timeout) as scope:
                await conn.send_request(path, _ENCODER.encode(request))
                status = await conn.read_head()
            if scope.cancelled_caught:
                raise GatewayTimeoutError(f"etcd stream {path} timed out", maybe_applied=True)
            if status != 200:
                raise _call_error(status, await _read_all(conn))
            yield _StreamMessages(conn, decoder)
        except (OSError, anyio.BrokenResourceError, http11.HttpProtocolError) as exc:
            raise GatewayUnavailableError(
                f"etcd stream {path} broke: {exc!r}", maybe_applied=True
            ) from exc
        finally:
            await anyio.aclose_forcefully(conn.stream)

    async def aclose(self) -> None:
        """Close the idle connections; streams end with their ``async with``."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await anyio.aclose_forcefully(conn.stream)

    # ---- connections ---------------------------------------------------------------------------

    async def _exchange(self, path: str, body: bytes) -> tuple[int, bytes]:
        while True:
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else await self._connect()
            done = False
            try:
                await conn.send_request(path, body)
                status = await conn.read_head()
                data = await _read_all(conn)
                done = True
            except (OSError, anyio.BrokenResourceError, http11.HttpProtocolError) as exc:
                if reused and not conn.received_any:
                    continue  # the server had closed it while idle: nothing was processed
                raise GatewayUnavailableError(
                    f"etcd call {path} failed: {exc!r}", maybe_applied=True
                ) from exc
            finally:
                if done and not self._closed and conn.reusable():
                    if len(self._idle) < MAX_IDLE_CONNECTIONS:
                        self._idle.append(conn)
                    else:
                        await anyio.aclose_forcefully(conn.stream)
                else:
                    await anyio.aclose_forcefully(conn.stream)
            return status, data

    async def _connect(self) -> _Connection:
        if self._closed:
            raise GatewayUnavailableError("the etcd gateway client is closed", maybe_applied=False)
        failures: list[str] = []
        for step in range(len(self.endpoints)):
            index = (self._current + step) % len(self.endpoints)
            host, port = self.endpoints[index]
            with self.watchdog.limit(self._connect_timeout) as scope:
                try:
                    stream = await anyio.connect_tcp(host, port)
                except OSError as exc:
                    failures.append(f"{host}:{port}: {exc}")
                    continue
            if scope.cancelled_caught:
                failures.append(f"{host}:{port}: connect timed out")
                continue
            if index != self._current:
                logger.info(
                    "etcd endpoint %s:%d unreachable; using %s:%d",
                    *self.current_endpoint,
                    host,
                    port,
                )
                self._current = index
            return _Connection(stream, f"{host}:{port}")
        raise GatewayUnavailableError(
            "no etcd endpoint answered: " + "; ".join(failures), maybe_applied=False
        )
