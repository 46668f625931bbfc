"""In-memory byte streams: the stub's transport when client and stub share a process.

Tests and the embedded deployment connect a ``StubClient`` to an in-process stub through a
:func:`memory_stream_pair` instead of a socket (STYLE.md §1.3): same bytes, same code paths, no
ports. Each direction is an anyio memory object stream of byte chunks.
"""

from __future__ import annotations

from typing import Final

import anyio
import anyio.lowlevel
from anyio.abc import ByteStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["MemoryByteStream", "memory_stream_pair"]

# Chunks buffered per direction before a sender waits: the peer reads whole chunks, and a
# writer sends one chunk per batch of frames, so this is a backlog of batches, not of bytes.
CHUNK_BACKLOG: Final = 256


class MemoryByteStream(ByteStream):
    """One end of an in-memory byte stream pair."""

    def __init__(
        self, send: MemoryObjectSendStream[bytes], receive: MemoryObjectReceiveStream[bytes]
    ) -> None:
        self._send = send
        self._receive = receive
        self._leftover = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        """Return up to ``max_bytes`` bytes.

        Raises:
            anyio.EndOfStream: The peer closed or sent EOF.
            anyio.ClosedResourceError: This end was closed.
        """
        if not self._leftover:
            self._leftover = await self._receive.receive()
        chunk, self._leftover = self._leftover[:max_bytes], self._leftover[max_bytes:]
        return chunk

    async def send(self, item: bytes) -> None:
        """Send bytes to the peer.

        Raises:
            anyio.BrokenResourceError: The peer closed its end.
            anyio.ClosedResourceError: This end was closed.
        """
        if item:
            await self._send.send(bytes(item))

    async def send_eof(self) -> None:
        self._send.close()
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        self._send.close()
        self._receive.close()
        await anyio.lowlevel.checkpoint()


def memory_stream_pair() -> tuple[MemoryByteStream, MemoryByteStream]:
    """Return two connected streams: what one sends, the other receives."""
    a_send, b_receive = anyio.create_memory_object_stream[bytes](CHUNK_BACKLOG)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](CHUNK_BACKLOG)
    return MemoryByteStream(a_send, a_receive), MemoryByteStream(b_send, b_receive)
