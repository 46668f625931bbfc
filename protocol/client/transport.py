"""The byte pipe under a client connection: a tiny interface, TCP, and an in-memory pair.

The client's async layer talks to a broker only through `Transport` (STYLE.md §1.3), so tests can
run the whole client over memory streams. This is also the boundary where anyio and OS errors
enter, so they are translated here and nowhere else (STYLE.md §1.11, §1.13): "you closed it"
becomes `ClientClosedError`, anything that broke underneath us becomes `ConnectionBrokenError`.
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc
import anyio.lowlevel

from protocol.errors import ClientClosedError, ConnectionBrokenError

if TYPE_CHECKING:
    from collections.abc import Callable

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


class _Pipe:
    """One direction of an in-memory byte pipe: the bytes in order, and who waits on them."""

    __slots__ = (
        "chunks",
        "event",
        "max_chunks",
        "readable",
        "receiver_closed",
        "room",
        "sender_closed",
    )

    def __init__(self, max_chunks: float) -> None:
        self.chunks: deque[bytes] = deque()
        # The running backend's event class, learnt from the first `anyio.Event()` a wait made:
        # `anyio.Event()` looks the backend up each time (~7 µs, most of a reader's wait in a
        # simulation, where it waits once per message it reads); the class itself makes one
        # without the look-up. A pipe serves one event loop, so the class stays right.
        self.event: Callable[[], anyio.Event] = anyio.Event
        self.max_chunks = max_chunks
        self.readable: anyio.Event | None = None  # set when bytes arrive or an end closes
        self.room: anyio.Event | None = None  # set when a full pipe is read from or closed
        self.sender_closed = False
        self.receiver_closed = False

    def wake_reader(self) -> None:
        if self.readable is not None:
            self.readable.set()

    def wake_writer(self) -> None:
        if self.room is not None:
            self.room.set()


class MemoryByteStream(anyio.abc.ByteStream):
    """One end of an in-memory byte pipe (see `memory_byte_stream_pair`).

    A pipe of its own rather than anyio's memory object streams: their `receive` gives way to
    every other runnable task before it looks for an item, and their `send` too, so a reader
    that has to wait pays two steps of the event loop for each wake-up, and a hand-over one
    more round (a message through client and broker in a simulation crosses this pipe four
    times or more). Here a send that fits and a receive of bytes already there are cancellation
    points but not scheduling points, and a waiting reader is woken once, by the send. A receive
    takes every chunk waiting, up to `max_bytes`, so the reader decodes them in one go.

    Args:
        outgoing: where our writes go.
        incoming: where the peer's writes arrive.
    """

    def __init__(self, outgoing: _Pipe, incoming: _Pipe) -> None:
        self._out = outgoing
        self._in = incoming
        self._closed = False

    async def send(self, item: bytes) -> None:
        """Send `item` to the other end (empty items are not sent), waiting for room."""
        if item:
            await anyio.lowlevel.checkpoint_if_cancelled()
            while not self.send_nowait(item):
                pipe = self._out
                pipe.room = room = anyio.Event()
                try:
                    await room.wait()
                finally:
                    pipe.room = None

    def send_nowait(self, item: bytes) -> bool:
        """Send `item` if the pipe has room (True), else nothing (False); never waits.

        Raises:
            anyio.ClosedResourceError: This end was closed.
            anyio.BrokenResourceError: The other end was closed.
        """
        if self._closed:
            raise anyio.ClosedResourceError
        pipe = self._out
        if pipe.receiver_closed:
            raise anyio.BrokenResourceError
        if item:
            if len(pipe.chunks) >= pipe.max_chunks:
                return False
            pipe.chunks.append(bytes(item))
            pipe.wake_reader()
        return True

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """What the other end sent, up to `max_bytes` (the rest is kept for the next call).

        Raises:
            anyio.ClosedResourceError: This end was closed.
            anyio.EndOfStream: The other end closed and everything it sent has been read.
        """
        pipe = self._in
        chunks = pipe.chunks
        if chunks or self._closed or pipe.sender_closed:
            # Nothing to wait for: still a cancellation point, as every receive is.
            await anyio.lowlevel.checkpoint_if_cancelled()
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            if chunks:
                break
            if pipe.sender_closed:
                raise anyio.EndOfStream
            pipe.readable = readable = pipe.event()
            if pipe.event is anyio.Event:
                pipe.event = type(readable)
            try:
                await readable.wait()  # the cancellation point of a receive that waits
            finally:
                pipe.readable = None
        data = chunks.popleft()
        if len(data) > max_bytes:
            chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        elif chunks and len(data) + len(chunks[0]) <= max_bytes:
            parts = [data]
            size = len(data)
            while chunks and size + len(chunks[0]) <= max_bytes:
                size += len(chunks[0])
                parts.append(chunks.popleft())
            data = b"".join(parts)
        pipe.wake_writer()
        return data

    async def send_eof(self) -> None:
        """Tell the other end nothing more will be sent."""
        self._out.sender_closed = True
        self._out.wake_reader()

    async def aclose(self) -> None:
        """Close both directions (the other end reads what was sent, then the end)."""
        self._closed = True
        self._out.sender_closed = True
        self._out.wake_reader()
        self._in.receiver_closed = True
        self._in.chunks.clear()
        self._in.wake_reader()  # a receive of ours waiting: it sees this end closed
        self._in.wake_writer()  # a send of the peer waiting for room: it sees the break
        # No checkpoint, as anyio's memory streams: the caller goes on before anyone wakes.


def memory_byte_stream_pair(
    max_buffer: float = math.inf,
) -> tuple[MemoryByteStream, MemoryByteStream]:
    """Two connected in-memory byte streams; closing one ends the other's reads with EOF.

    Args:
        max_buffer: chunks (sends) a direction holds before a send waits.
    """
    a_to_b, b_to_a = _Pipe(max_buffer), _Pipe(max_buffer)
    return MemoryByteStream(a_to_b, b_to_a), MemoryByteStream(b_to_a, a_to_b)


def memory_transport_pair(max_buffer: float = math.inf) -> tuple[StreamTransport, StreamTransport]:
    """Two connected in-memory transports, for tests and in-process wiring."""
    a, b = memory_byte_stream_pair(max_buffer)
    return StreamTransport(a), StreamTransport(b)
