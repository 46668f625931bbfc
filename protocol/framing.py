"""Pulsar frames: ``[total][cmd-size][cmd]`` and the payload variant, sans-IO.

Layout (spec/wire-protocol.md §2, all integers big-endian)::

    simple:  | total:u32 | cmd_size:u32 | BaseCommand |
    payload: | total:u32 | cmd_size:u32 | BaseCommand |
             [ 0x0e02 | bem_size:u32 | BrokerEntryMetadata ]   (MESSAGE only, optional)
             [ 0x0e01 | crc32c:u32 ]                           (optional)
             | metadata_size:u32 | MessageMetadata | payload |

The bytes from ``metadata_size`` to the end of the frame are what a broker stores as an entry and
what the CRC-32C covers; keeping them whole lets the broker replay a stored entry without
re-encoding it.
"""

from __future__ import annotations

import struct

import crc32c as _crc32c
import msgspec

from protocol import commands as c
from protocol.codec import decode_command, encode_command, encode_message
from protocol.errors import RemoteProtocolError, ServerError

MAGIC_CHECKSUM = b"\x0e\x01"
MAGIC_BROKER_ENTRY_METADATA = b"\x0e\x02"

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
"""Pulsar's ``maxMessageSize`` default; announced in CONNECTED."""

FRAME_PADDING = 10 * 1024
"""Room for command and metadata headers on top of ``max_message_size``: a real broker accepts
frames of ``maxMessageSize + 10 KiB``, and the client cuts chunks assuming it does."""

MIN_FRAME_SIZE = 4
"""The smallest legal ``total_size``: a ``cmd_size`` field and an empty command would be 4."""

_U32 = struct.Struct(">I")
_U32X2 = struct.Struct(">II")


def checksum(entry: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) of an entry, as written after ``0x0e01``."""
    return _crc32c.crc32c(entry)


def build_entry(metadata: bytes, payload: bytes | memoryview) -> bytes:
    """``metadata_size | metadata | payload``: the checksummed part of a payload frame."""
    return b"".join((_U32.pack(len(metadata)), metadata, payload))


class Payload(msgspec.Struct, frozen=True):
    """The payload section of a SEND or MESSAGE frame.

    Attributes:
        entry: ``metadata_size | MessageMetadata | payload`` exactly as on the wire.
        checksum: the CRC-32C that came with it, or ``None`` when the frame had none.
        broker_entry_metadata: the raw ``BrokerEntryMetadata`` bytes, if present.
    """

    entry: bytes
    checksum: int | None = None
    broker_entry_metadata: bytes | None = None

    @property
    def metadata(self) -> memoryview:
        """The serialized ``MessageMetadata``."""
        size = _U32.unpack_from(self.entry, 0)[0]
        return memoryview(self.entry)[4 : 4 + size]

    @property
    def body(self) -> memoryview:
        """The message (or batch) bytes after the metadata."""
        size = _U32.unpack_from(self.entry, 0)[0]
        return memoryview(self.entry)[4 + size :]

    def checksum_ok(self) -> bool:
        """True when there is no checksum or it matches the entry bytes."""
        return self.checksum is None or checksum(self.entry) == self.checksum


class Frame(msgspec.Struct, frozen=True):
    """One decoded frame: a command and, for SEND/MESSAGE, its payload."""

    command: c.Command
    payload: Payload | None = None


def encode_frame(command: c.Command) -> bytes:
    """Frame a command that carries no payload.

    Raises:
        LocalProtocolError: the command cannot be encoded.
    """
    body = encode_command(command)
    return _U32X2.pack(len(body) + 4, len(body)) + body


def payload_section(entry: bytes, entry_checksum: int | None) -> bytes:
    """The bytes after the command of a payload frame: ``[0x0e01 | crc] | entry``.

    A broker stores this once per entry so that every MESSAGE is the command plus these bytes,
    without recomputing the checksum or copying the entry into a new layout.
    """
    if entry_checksum is None:
        return entry
    return MAGIC_CHECKSUM + _U32.pack(entry_checksum) + entry


def encode_section_frame(command: c.Send | c.Message, section: bytes) -> bytes:
    """Frame a SEND or MESSAGE whose payload section (see ``payload_section``) is ready-made.

    Raises:
        LocalProtocolError: the command cannot be encoded.
    """
    body = encode_command(command)
    return b"".join((_U32X2.pack(4 + len(body) + len(section), len(body)), body, section))


def encode_message_frame(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: tuple[int, ...],
    section: bytes,
) -> bytes:
    """A MESSAGE frame for a stored entry's payload section: the broker's dispatch hot path.

    Same bytes as ``encode_section_frame(Message(...), section)``, without building records.

    Raises:
        LocalProtocolError: a value is out of its field's range.
    """
    body = encode_message(consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set)
    return b"".join((_U32X2.pack(4 + len(body) + len(section), len(body)), body, section))


def encode_payload_frame(
    command: c.Send | c.Message,
    entry: bytes,
    entry_checksum: int | None,
    broker_entry_metadata: bytes | None = None,
) -> bytes:
    """Frame a SEND or MESSAGE with its entry bytes (``metadata_size | metadata | payload``).

    Args:
        command: the SEND or MESSAGE command.
        entry: the checksummed part, replayed untouched.
        entry_checksum: CRC-32C of ``entry``; ``None`` writes no checksum section.
        broker_entry_metadata: serialized ``BrokerEntryMetadata`` to prepend (MESSAGE only).

    Raises:
        LocalProtocolError: the command cannot be encoded.
    """
    body = encode_command(command)
    parts = [b"", body]
    size = 4 + len(body) + len(entry)
    if broker_entry_metadata is not None:
        parts.append(MAGIC_BROKER_ENTRY_METADATA + _U32.pack(len(broker_entry_metadata)))
        parts.append(broker_entry_metadata)
        size += 6 + len(broker_entry_metadata)
    if entry_checksum is not None:
        parts.append(MAGIC_CHECKSUM + _U32.pack(entry_checksum))
        size += 6
    parts.append(entry)
    parts[0] = _U32X2.pack(size, len(body))
    return b"".join(parts)


def _parse_payload(rest: memoryview) -> Payload:
    pos = 0
    bem: bytes | None = None
    crc: int | None = None
    if rest[:2] == MAGIC_BROKER_ENTRY_METADATA:
        if len(rest) < 6:
            raise RemoteProtocolError("truncated broker entry metadata header")
        bem_size = _U32.unpack_from(rest, 2)[0]
        if bem_size > len(rest) - 6:
            raise RemoteProtocolError("broker entry metadata runs past the frame")
        bem = bytes(rest[6 : 6 + bem_size])
        pos = 6 + bem_size
    if rest[pos : pos + 2] == MAGIC_CHECKSUM:
        if len(rest) - pos < 6:
            raise RemoteProtocolError(
                "truncated checksum section", error_hint=ServerError.ChecksumError
            )
        crc = _U32.unpack_from(rest, pos + 2)[0]
        pos += 6
    entry = rest[pos:]
    if len(entry) < 4:
        raise RemoteProtocolError("payload frame without message metadata")
    metadata_size = _U32.unpack_from(entry, 0)[0]
    if metadata_size > len(entry) - 4:
        raise RemoteProtocolError("message metadata runs past the frame")
    return Payload(bytes(entry), crc, bem)


def decode_frame(frame: bytes | bytearray | memoryview) -> Frame:
    """Decode one frame given without its leading ``total_size`` field.

    Raises:
        RemoteProtocolError: the bytes are not a well-formed frame.
    """
    view = memoryview(frame)
    if len(view) < 4:
        raise RemoteProtocolError("frame shorter than its command-size field")
    cmd_size = _U32.unpack_from(view, 0)[0]
    if cmd_size > len(view) - 4:
        raise RemoteProtocolError(f"command size {cmd_size} exceeds the frame ({len(view) - 4})")
    command = decode_command(view[4 : 4 + cmd_size])
    rest = view[4 + cmd_size :]
    if isinstance(command, (c.Send, c.Message)):
        if not rest:
            raise RemoteProtocolError(f"{type(command).__name__} without a payload")
        return Frame(command, _parse_payload(rest))
    if rest:
        raise RemoteProtocolError(f"{type(command).__name__} with {len(rest)} unexpected bytes")
    return Frame(command)


class FrameDecoder:
    """Incremental splitter: ``feed()`` bytes, then call ``next_frame()`` until it returns None.

    Any chunking of a byte stream yields the same frames. A frame larger than ``max_frame_size``
    is refused before it is buffered, so a peer cannot make us hold more than one frame's worth.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the peer."""
        if self._pos and self._pos >= len(self._buf) // 2:
            # Compact lazily so that consuming many small frames stays linear.
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def next_frame(self) -> Frame | None:
        """The next complete frame, or None when more bytes are needed.

        Raises:
            RemoteProtocolError: the stream is malformed; the decoder must not be used again.
        """
        frame = self.next_raw_frame()
        return None if frame is None else decode_frame(frame)

    def next_raw_frame(self) -> memoryview | None:
        """The next complete frame's bytes (after ``total_size``), undecoded.

        Raises:
            RemoteProtocolError: ``total_size`` is out of bounds.
        """
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            return None
        total = _U32.unpack_from(buf, pos)[0]
        if total > self.max_frame_size:
            raise RemoteProtocolError(
                f"frame of {total} bytes exceeds the limit of {self.max_frame_size}"
            )
        if total < MIN_FRAME_SIZE:
            raise RemoteProtocolError(f"frame of {total} bytes is too small")
        end = pos + 4 + total
        if len(buf) < end:
            return None
        self._pos = end
        return memoryview(bytes(buf[pos + 4 : end]))
