"""The byte pipe under a client connection: a tiny interface, TCP, and an in-memory pair.

The client's async layer talks to a broker only through `Transport` (STYLE.md §1.3), so tests can
run the whole client over memory streams. This is also the boundary where anyio and OS errors
enter, so they are translated here and nowhere else (STYLE.md §1.11, §1.13): "you closed it"
becomes `ClientClosedError`, anything that broke underneath us becomes `ConnectionBrokenError`.
"""

from __future__ import annotations

import contextlib
import math
from typing import Protocol

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from protocol.errors import ClientClosedError, ConnectionBrokenError

__all__ = [
    "DEFAULT_RECEIVE_SIZE",
    "MemoryByteStream",
    "StreamTransport",
    "Transport",
    "connect_tcp",
    "memory_transport_pair",
]

DEFAULT_RECEIVE_SIZE = 256 * 1024
"""Bytes asked for per read: large enough that a busy consumer decodes many MESSAGE frames per
wake-up, small enough not to matter for memory."""


class Transport(Protocol):
    """A bidirectional byte stream to one broker."""

    async def send(self, data: bytes) -> None:
        """Write all of `data`.

        Raises:
            ConnectionBrokenError: the stream failed or the peer went away.
            ClientClosedError: we closed this transport.
        """
        ...

    def send_nowait(self, data: bytes) -> bool:
        """Write all of `data` at once if the stream takes it without waiting, else nothing.

        A connection writes through this when nothing of its own is queued (no writer task to
        wake); a stream that can never take bytes at once (TCP) always answers False.

        Returns:
            True when `data` went out whole; False when nothing was written (call `send`).

        Raises:
            ConnectionBrokenError: the stream failed or the peer went away.
            ClientClosedError: we closed this transport.
        """
        ...

    async def receive(self, max_bytes: int = DEFAULT_RECEIVE_SIZE) -> bytes:
        """Read up to `max_bytes`; `b""` means the peer ended the stream.

        Raises:
            ConnectionBrokenError: the stream failed.
            ClientClosedError: we closed this transport.
        """
        ...

    async def aclose(self) -> None:
        """Close the stream; idempotent, never raises."""
        ...


class StreamTransport:
    """A `Transport` over any anyio `ByteStream` (a TCP socket, a memory stream, ...).

    Args:
        stream: the stream to own; closed by `aclose`.
    """

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self._stream = stream
        self._closed = False
        # Only an in-memory pipe takes bytes without waiting; a socket's send is always awaited.
        self._memory = stream if isinstance(stream, MemoryByteStream) else None

    async def send(self, data: bytes) -> None:
        """Send all of `data`.

        Raises:
            ClientClosedError: The transport was closed here.
            ConnectionBrokenError: The peer or the network broke the connection.
        """
        try:
            await self._stream.send(data)
        except anyio.ClosedResourceError as exc:
            raise ClientClosedError("transport closed") from exc
        except (anyio.BrokenResourceError, anyio.EndOfStream, OSError) as exc:
            raise ConnectionBrokenError(f"send failed: {exc!r}") from exc

    def send_nowait(self, data: bytes) -> bool:
        """Send all of `data` at once if the stream takes it without waiting (see `Transport`).

        Raises:
            ClientClosedError: The transport was closed here.
            ConnectionBrokenError: The peer broke the connection.
        """
        memory = self._memory
        if memory is None:
            return False
        try:
            return memory.send_nowait(data)
        except anyio.ClosedResourceError as exc:
            raise ClientClosedError("transport closed") from exc
        except anyio.BrokenResourceError as exc:
            raise ConnectionBrokenError(f"send failed: {exc!r}") from exc

    async def receive(self, max_bytes: int = DEFAULT_RECEIVE_SIZE) -> bytes:
        """Up to `max_bytes` received bytes; `b""` once the peer closed its side.

        Raises:
            ClientClosedError: The transport was closed here.
            ConnectionBrokenError: The peer or the network broke the connection.
        """
        try:
            return await self._stream.receive(max_bytes)
        except anyio.EndOfStream:
            return b""
        except anyio.ClosedResourceError as exc:
            if self._closed:
                raise ClientClosedError("transport closed") from exc
            raise ConnectionBrokenError("stream closed underneath us") from exc
        except (anyio.BrokenResourceError, OSError) as exc:
            raise ConnectionBrokenError(f"receive failed: {exc!r}") from exc

    async def aclose(self) -> None:
        """Close the transport (a broken socket closes without an error)."""
        self._closed = True
        # Closing a broken socket has nothing left to report.
        with contextlib.suppress(anyio.BrokenResourceError, OSError):
            await self._stream.aclose()


async def connect_tcp(host: str, port: int) -> StreamTransport:
    """Open a TCP connection (TCP_NODELAY is set by anyio).

    Raises:
        ConnectionBrokenError: the connection could not be made.
    """
    try:
        stream = await anyio.connect_tcp(host, port)
    except OSError as exc:  # refused, unreachable, DNS failure (all OSError subclasses)
        raise ConnectionBrokenError(f"cannot connect to {host}:{port}: {exc}") from exc
    return StreamTransport(stream)


class MemoryByteStream(anyio.abc.ByteStream):
    """One end of an in-memory byte pipe (see `memory_transport_pair`).

    Args:
        send: where our writes go.
        receive: where the peer's writes arrive.
    """

    def __init__(
        self,
        send: MemoryObjectSendStream[bytes],
        receive: MemoryObjectReceiveStream[bytes],
    ) -> None:
        self._send = send
        self._receive = receive
        self._leftover = b""

    # A send that fits the buffer, and a receive of data already there, are cancellation points
    # but not scheduling points: the anyio stream's own `send` and `receive` give way to every
    # other runnable task first, one more round of the event loop per hand-over (a message
    # through client and broker in a simulation crosses this pipe four times or more).

    async def send(self, item: bytes) -> None:
        """Send `item` to the other end (empty items are not sent)."""
        if item:
            await anyio.lowlevel.checkpoint_if_cancelled()
            try:
                self._send.send_nowait(bytes(item))
            except anyio.WouldBlock:
                await self._send.send(bytes(item))

    def send_nowait(self, item: bytes) -> bool:
        """Send `item` if the buffer has room (True), else nothing (False); never waits.

        Raises:
            anyio.ClosedResourceError: This end was closed.
            anyio.BrokenResourceError: The other end was closed.
        """
        if item:
            try:
                self._send.send_nowait(bytes(item))
            except anyio.WouldBlock:
                return False
        return True

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Up to `max_bytes` of what the other end sent (the rest is kept for the next call)."""
        data = self._leftover
        if not data:
            await anyio.lowlevel.checkpoint_if_cancelled()
            try:
                data = self._receive.receive_nowait()
            except anyio.WouldBlock:
                data = await self._receive.receive()
        if len(data) <= max_bytes:  # the common case: no slices made
            self._leftover = b""
            return data
        self._leftover = data[max_bytes:]
        return data[:max_bytes]

    async def send_eof(self) -> None:
        """Tell the other end nothing more will be sent."""
        await self._send.aclose()

    async def aclose(self) -> None:
        """Close both directions."""
        await self._send.aclose()
        await self._receive.aclose()


def memory_byte_stream_pair(
    max_buffer: float = math.inf,
) -> tuple[MemoryByteStream, MemoryByteStream]:
    """Two connected in-memory byte streams; closing one ends the other's reads with EOF."""
    a_send, b_receive = anyio.create_memory_object_stream[bytes](max_buffer)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](max_buffer)
    return MemoryByteStream(a_send, a_receive), MemoryByteStream(b_send, b_receive)


def memory_transport_pair(max_buffer: float = math.inf) -> tuple[StreamTransport, StreamTransport]:
    """Two connected in-memory transports, for tests and in-process wiring."""
    a, b = memory_byte_stream_pair(max_buffer)
    return StreamTransport(a), StreamTransport(b)
