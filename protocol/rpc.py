"""Internal RPC framing: length-prefixed msgpack frames of tagged msgspec Structs.

Brokers talk to the bookie stub and its metadata service with this (DESIGN.md decision 7). A
frame is::

    [u32 big-endian body length][body: msgpack of one msgspec Struct]

The Struct types form a tagged union chosen by the user of this module (``storage_stub.messages``
for the stub), so decoding validates the message shape at the boundary (STYLE.md §1.5) and a
receiver dispatches on the concrete type with ``match`` (§1.4).

Sans-IO like ``framing.FrameDecoder``: bytes in through :meth:`RpcDecoder.feed`, messages out of
:meth:`RpcDecoder.next_message`; :func:`encode` turns a message into bytes. No sockets, no clock,
no anyio here.
"""

from __future__ import annotations

import struct
from typing import Any, Final, Generic, TypeVar

import msgspec

from protocol.errors import RemoteProtocolError

__all__ = [
    "LENGTH_PREFIX_SIZE",
    "MAX_RPC_FRAME_SIZE",
    "RpcDecoder",
    "encode",
    "encode_into",
]

# The largest body we accept. The biggest legitimate message is a read reply: a broker reads at
# most ``dispatcherMaxReadSizeBytes`` (5 MiB) per read plus one entry of up to the 5 MiB
# ``maxMessageSize`` that overshoots it, and an add carries one entry (<= 5 MiB). 64 MiB leaves a
# wide margin for batches and metadata values (load reports are KiBs) while still stopping a
# corrupt or hostile length prefix from making us buffer gigabytes (STYLE.md §1.7).
MAX_RPC_FRAME_SIZE: Final = 64 * 1024 * 1024

LENGTH_PREFIX_SIZE: Final = 4
_PREFIX: Final = struct.Struct(">I")

# Compact the receive buffer once this many consumed bytes sit at its front; compacting on every
# message would make a burst of small frames quadratic in the bytes buffered.
_COMPACT_AT: Final = 64 * 1024

# One encoder for the process (STYLE.md §1.5: build once, reuse). msgspec encoders are
# thread-safe and reentrant for encode/encode_into.
_ENCODER: Final = msgspec.msgpack.Encoder()

T = TypeVar("T")


def encode(message: msgspec.Struct) -> bytes:
    """Encode one message as a complete frame (length prefix included).

    Args:
        message: A Struct of the union the receiver decodes.

    Returns:
        The frame's bytes.
    """
    buffer = bytearray()
    encode_into(message, buffer)
    return bytes(buffer)


def encode_into(message: msgspec.Struct, buffer: bytearray) -> None:
    """Append one frame to ``buffer``; lets a writer batch many frames into one send.

    Args:
        message: A Struct of the union the receiver decodes.
        buffer: The outgoing byte buffer; the frame is appended at its end.
    """
    start = len(buffer)
    # Reserve the prefix, encode the body straight after it, then patch the length in: one
    # buffer, no intermediate body copy.
    buffer.extend(b"\0\0\0\0")
    _ENCODER.encode_into(message, buffer, start + LENGTH_PREFIX_SIZE)
    _PREFIX.pack_into(buffer, start, len(buffer) - start - LENGTH_PREFIX_SIZE)


class RpcDecoder(Generic[T]):
    """Turn a byte stream into messages of one tagged union type.

    Args:
        message_type: The type to decode each body as, typically a ``Union`` of tagged Structs.
        max_frame_size: Largest body accepted, in bytes.

    Example:
        >>> decoder = RpcDecoder(Request)
        >>> decoder.feed(data)
        >>> while (message := decoder.next_message()) is not None:
        ...     handle(message)
    """

    __slots__ = ("_buffer", "_decoder", "_eof", "_max", "_pos")

    def __init__(self, message_type: Any, *, max_frame_size: int = MAX_RPC_FRAME_SIZE) -> None:
        # ``Any`` because a Union is not a ``type[T]``; callers annotate the decoder they keep.
        self._decoder: msgspec.msgpack.Decoder[T] = msgspec.msgpack.Decoder(message_type)
        self._max = max_frame_size
        self._buffer = bytearray()
        self._pos = 0
        self._eof = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as messages."""
        return len(self._buffer) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes; ``b""`` means the peer closed its side (end of stream).

        Args:
            data: The bytes just read from the transport.
        """
        if not data:
            self._eof = True
            return
        self._buffer += data

    def next_message(self) -> T | None:
        """Return the next complete message, or ``None`` if more bytes are needed.

        Returns:
            A decoded message, or ``None`` when the buffer holds no complete frame (and the
            stream has not ended in the middle of one).

        Raises:
            RemoteProtocolError: A frame announces more than ``max_frame_size`` bytes, its body is
                not a valid message, or the stream ended inside a frame.
        """
        buffer = self._buffer
        pos = self._pos
        available = len(buffer) - pos
        if available >= LENGTH_PREFIX_SIZE:
            (size,) = _PREFIX.unpack_from(buffer, pos)
            if size > self._max:
                raise RemoteProtocolError(
                    f"RPC frame of {size} bytes exceeds the limit of {self._max} bytes"
                )
            end = pos + LENGTH_PREFIX_SIZE + size
            if end <= len(buffer):
                with memoryview(buffer) as view:
                    try:
                        message = self._decoder.decode(view[pos + LENGTH_PREFIX_SIZE : end])
                    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
                        raise RemoteProtocolError(f"malformed RPC message: {exc}") from exc
                self._consume(end)
                return message
        if self._eof and available:
            raise RemoteProtocolError(
                f"RPC stream ended inside a frame ({available} bytes left over)"
            )
        return None

    def _consume(self, end: int) -> None:
        if end == len(self._buffer):
            self._buffer.clear()  # the common case: everything read was used
            self._pos = 0
        elif end >= _COMPACT_AT:
            del self._buffer[:end]
            self._pos = 0
        else:
            self._pos = end
