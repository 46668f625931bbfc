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
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec

from protocol import commands as c
from protocol.checksum import crc32c
from protocol.codec import decode_command_at, encode_command, encode_message
from protocol.errors import RemoteProtocolError, ServerError
from protocol.runs import SendRun, read_send_run
from protocol.wire import (
    CONTINUED_BYTES,
    SMALL_VARINTS,
    U64,
    OffTheFastLane,
    int32_varint,
    int64_varint,
    parse_flow,
    parse_send,
    uint32_varint,
    uvarint,
)

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
_CHECKSUMMED = struct.Struct(">HII")  # checksum magic, crc32c, metadata_size
_MAGIC_CHECKSUM_U16 = 0x0E01
_MAGIC_AND_CRC = struct.Struct(">HI")  # 0x0e01 | crc32c


checksum: Final = crc32c
"""``checksum(entry) -> int``: CRC-32C (Castagnoli) of an entry, as written after ``0x0e01``.

The C function itself rather than a wrapper: it runs once per SEND on the publish hot path."""


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


def payload_sections(entries: Iterable[tuple[bytes, int | None, object]]) -> list[bytes]:
    """``payload_section`` of each ``(entry, checksum, ...)``: one call per run of SENDs."""
    head = _MAGIC_AND_CRC.pack
    return [
        entry if crc is None else head(_MAGIC_CHECKSUM_U16, crc) + entry
        for entry, crc, _ in entries
    ]


def decode_payload_section(section: bytes | memoryview) -> Payload:
    """Split a payload section (a stored entry, see ``payload_section``) into its parts.

    The one reader of stored sections: the managed ledger's recovery, compaction and the admin
    API's message reads all come through here, as received frames do.

    Raises:
        RemoteProtocolError: The bytes are not a payload section (sizes run past the end).
    """
    return _parse_payload(memoryview(section))


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


SHORT_RUN: Final = 4
"""Runs of MESSAGE heads shorter than this are written one frame at a time: the tables a run's
encoder builds first cost about as much as four frames written without them (receipts have
their own threshold, ``RECEIPT_TABLE_RUN``)."""


def encode_message_head(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: tuple[int, ...],
    section_size: int,
) -> bytes:
    """``encode_message_frame`` without its section: the bytes to write before the section.

    The dispatch hot path: a writer that joins its output anyway saves copying each entry once
    more, and the command is written with one formatting operation.

    Raises:
        LocalProtocolError: a value is out of its field's range.
    """
    if (
        partition == -1
        and not redelivery_count
        and not ack_set
        and 0 <= consumer_id < 128
        and 0 <= ledger_id < 128
        and 0 <= entry_id < 0x200000
    ):
        # What nearly every MESSAGE is: a first delivery on a non-partitioned topic, one-byte
        # consumer and ledger ids. CommandMessage: 08 consumer_id 12 len(MessageIdData)
        # 08 ledgerId 10 entryId (field order = number order).
        ev = SMALL_VARINTS[entry_id] if entry_id < 128 else uvarint(entry_id)
        mid_size = 3 + len(ev)
        return b"%b\x08\x09\x4a%c\x08%c\x12%c\x08%c\x10%b" % (
            _U32X2.pack(12 + mid_size + section_size, 8 + mid_size),
            4 + mid_size,
            consumer_id,
            mid_size,
            ledger_id,
            ev,
        )
    try:
        small = SMALL_VARINTS
        cv = small[consumer_id] if 0 <= consumer_id < 128 else uvarint(consumer_id)
        lv = small[ledger_id] if 0 <= ledger_id < 128 else uvarint(ledger_id & U64)
        ev = small[entry_id] if 0 <= entry_id < 128 else uvarint(entry_id & U64)
        # CommandMessage: 08 consumer_id 12 len(MessageIdData) 08 ledgerId 10 entryId
        # [18 partition] [18 redelivery_count] [20 ack_set]* (field order = number order).
        pt = b"" if partition == -1 else b"\x18" + int32_varint(partition)
        mid_size = 2 + len(lv) + len(ev) + len(pt)
        tail = b""
        if redelivery_count:
            tail = b"\x18" + uint32_varint(redelivery_count)
        for word in ack_set:
            tail += b"\x20" + int64_varint(word)
        body_size = 3 + len(cv) + mid_size + len(tail)
    except OffTheFastLane:
        body_size = 128  # the generic path below reports the value
    if body_size >= 128:  # a long ack set: a two-byte length, written the generic way
        body = encode_message(
            consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set
        )
        return _U32X2.pack(4 + len(body) + section_size, len(body)) + body
    return b"%b\x08\x09\x4a%c\x08%b\x12%c\x08%b\x10%b%b%b" % (
        _U32X2.pack(8 + body_size + section_size, 4 + body_size),
        body_size,
        cv,
        mid_size,
        lv,
        ev,
        pt,
        tail,
    )


def encode_message_heads(
    consumer_id: int, ledger_id: int, entry_id: int, partition: int, section_sizes: Iterable[int]
) -> list[bytes]:
    """``encode_message_head`` of first deliveries of consecutive entries, from ``entry_id`` on.

    The dispatch hot path for a run of entries to one consumer: one call for the run, and on a
    non-partitioned topic with one-byte consumer and ledger ids (what nearly every MESSAGE is)
    each head is one formatting operation of parts made once per run.

    Raises:
        LocalProtocolError: a value is out of its field's range.
    """
    sizes = list(section_sizes)
    if (
        len(sizes) < SHORT_RUN
        or partition != -1
        or not 0 <= consumer_id < 128
        or not 0 <= ledger_id < 128
        or entry_id < 0
    ):
        # A short run (a batched producer's read holds one entry or two): the parts made once
        # per run below would cost more than they save.
        return [
            encode_message_head(consumer_id, ledger_id, entry_id + i, partition, 0, (), size)
            for i, size in enumerate(sizes)
        ]
    small = SMALL_VARINTS
    continued = CONTINUED_BYTES
    pack = _U32X2.pack
    # The command after its sizes, up to the entry id, for entry ids of one to three bytes:
    # 08 09 4a len | 08 consumer_id 12 len(MessageIdData) 08 ledgerId 10 (see above).
    middles = [
        b"\x08\x09\x4a%c\x08%c\x12%c\x08%c\x10" % (7 + n, consumer_id, 3 + n, ledger_id)
        for n in range(4)
    ]
    heads: list[bytes] = []
    append = heads.append
    for size in sizes:
        if entry_id < 0x80:
            append(b"%b%b%b" % (pack(16 + size, 12), middles[1], small[entry_id]))
        elif entry_id < 0x4000:
            append(
                b"%b%b%b%b"
                % (
                    pack(17 + size, 13),
                    middles[2],
                    continued[entry_id & 0x7F],
                    small[entry_id >> 7],
                )
            )
        elif entry_id < 0x200000:
            append(
                b"%b%b%b%b%b"
                % (
                    pack(18 + size, 14),
                    middles[3],
                    continued[entry_id & 0x7F],
                    continued[entry_id >> 7 & 0x7F],
                    small[entry_id >> 14],
                )
            )
        else:
            append(encode_message_head(consumer_id, ledger_id, entry_id, -1, 0, (), size))
        entry_id += 1
    return heads


RECEIPT_TABLE_RUN: Final = 24
"""Receipts left in a run, from a ledger's first one on, from which ``encode_send_receipt_frames``
builds that ledger's tables of frame parts; with fewer, each receipt is one formatting operation
of its own. Making the tables costs about what 20 receipts formatted whole do (measured: one
receipt 1.6 µs either way with the tables skipped, 14 µs with them; 30 receipts break even),
and most runs of a simulation or a slow producer are of one receipt."""


def encode_send_receipt_frames(
    producer_id: int, sequence_ids: Sequence[int], positions: Sequence[tuple[int, int]]
) -> bytes:
    """SEND_RECEIPT frames of one producer, joined (spec §6.2): the broker's publish hot path.

    Same bytes as ``encode_frame(SendReceipt(...))`` for each sequence id with the
    ``(ledger_id, entry_id)`` at the same place in ``positions``, without building records.

    Raises:
        LocalProtocolError: a value is out of its field's range.
    """
    small = SMALL_VARINTS
    continued = CONTINUED_BYTES
    pack = _U32X2.pack
    parts: list[bytes] = []
    append = parts.append
    last_ledger = None
    lv = b""
    mid_base = 0
    # Per ledger, for sequence and entry ids of one to three bytes (most receipts): the frame up
    # to the sequence id, heads[len(sv)][len(ev)], and from it to the entry id, mids[len(ev)].
    # Built only when RECEIPT_TABLE_RUN receipts or more are left (they pay for themselves).
    heads: list[list[bytes]] = []
    mids: list[bytes] = []
    tables = False
    count = len(sequence_ids)
    try:
        pv = small[producer_id] if 0 <= producer_id < 128 else uvarint(producer_id)
        head_size = 4 + len(pv)
        for index, (sequence_id, (ledger_id, entry_id)) in enumerate(
            zip(sequence_ids, positions, strict=True)
        ):
            if ledger_id != last_ledger:
                lv = small[ledger_id] if 0 <= ledger_id < 128 else uvarint(ledger_id & U64)
                mid_base = 2 + len(lv)
                last_ledger = ledger_id
                tables = count - index >= RECEIPT_TABLE_RUN
                if tables:
                    mids = [b"\x1a%c\x08%b\x10" % (mid_base + n, lv) for n in range(4)]
                    heads = [
                        [
                            b"%b\x08\x07\x3a%c\x08%b\x10" % (pack(8 + size, 4 + size), size, pv)
                            for size in (head_size + ns + mid_base + ne for ne in range(4))
                        ]
                        for ns in range(4)
                    ]
            if tables and 0 <= sequence_id < 0x200000 and 0 <= entry_id < 0x200000:
                # CommandSendReceipt: 08 producer_id 10 sequence_id 1a len(MessageIdData)
                # 08 ledgerId 10 entryId; the varints of up to three bytes from tables.
                if sequence_id < 0x80:
                    sv = small[sequence_id]
                elif sequence_id < 0x4000:
                    sv = continued[sequence_id & 0x7F] + small[sequence_id >> 7]
                else:
                    sv = (
                        continued[sequence_id & 0x7F]
                        + continued[sequence_id >> 7 & 0x7F]
                        + small[sequence_id >> 14]
                    )
                if entry_id < 0x80:
                    ev = small[entry_id]
                elif entry_id < 0x4000:
                    ev = continued[entry_id & 0x7F] + small[entry_id >> 7]
                else:
                    ev = (
                        continued[entry_id & 0x7F]
                        + continued[entry_id >> 7 & 0x7F]
                        + small[entry_id >> 14]
                    )
                parts += (heads[len(sv)][len(ev)], sv, mids[len(ev)], ev)
                continue
            sv = small[sequence_id] if 0 <= sequence_id < 128 else uvarint(sequence_id)
            ev = small[entry_id] if 0 <= entry_id < 128 else uvarint(entry_id & U64)
            # At most 46 bytes, so every length takes one byte.
            mid_size = mid_base + len(ev)
            body_size = head_size + len(sv) + mid_size
            append(
                b"%b\x08\x07\x3a%c\x08%b\x10%b\x1a%c\x08%b\x10%b"
                % (pack(8 + body_size, 4 + body_size), body_size, pv, sv, mid_size, lv, ev)
            )
    except OffTheFastLane:
        # Out-of-range values: the generic encoder reports them (LocalProtocolError).
        return b"".join(
            encode_frame(
                c.SendReceipt(
                    producer_id=producer_id,
                    sequence_id=sequence_id,
                    message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id),
                )
            )
            for sequence_id, (ledger_id, entry_id) in zip(sequence_ids, positions, strict=True)
        )
    return b"".join(parts)


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


def encode_send_frame(
    command: c.Send, metadata: bytes, payload: bytes | memoryview, with_checksum: bool
) -> bytes:
    """``encode_payload_frame(command, build_entry(metadata, payload), crc)``, with one copy.

    A producer's batch is megabytes a second: its payload is copied once, into the frame, and
    the CRC-32C is continued from the entry's head over the payload instead of over a joined
    entry. ``with_checksum`` False writes no checksum section.

    Raises:
        LocalProtocolError: the command cannot be encoded.
    """
    body = encode_command(command)
    head = _U32.pack(len(metadata)) + metadata
    size = 4 + len(body) + len(head) + len(payload)
    section = b""
    if with_checksum:
        section = MAGIC_CHECKSUM + _U32.pack(checksum(payload, checksum(head)))
        size += 6
    return b"".join((_U32X2.pack(size, len(body)), body, section, head, payload))


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
    data = frame if type(frame) is bytes else bytes(frame)
    return _decode_at(data, 0, len(data))


CommandReader = Callable[[bytes, int, int], "c.Command | None"]
"""A hand-written reader of one command (``protocol.wire``): the command in ``buf[start:end]``,
or None when it is another command or off the reader's fast lane."""


def _decode_at(buf: bytes, start: int, end: int, first: CommandReader = parse_send) -> Frame:
    """Decode the frame in ``buf[start:end]`` (after its ``total_size``), copying only the entry.

    Commands are read in place (``codec.decode_command_at``), trying ``first`` before anything
    else: the command a side receives most (SEND on a broker, MESSAGE on a client). A payload
    section without broker entry metadata, what every client and our broker write, is split here
    directly.
    """
    if end - start < 4:
        raise RemoteProtocolError("frame shorter than its command-size field")
    cmd_start = start + 4
    cmd_end = cmd_start + _U32.unpack_from(buf, start)[0]
    if cmd_end > end:
        raise RemoteProtocolError(
            f"command size {cmd_end - cmd_start} exceeds the frame ({end - cmd_start})"
        )
    command = first(buf, cmd_start, cmd_end)  # None unless that command on its fast lane
    if command is None:
        # Then FLOW, a broker's next most frequent command after SEND and ACK (which codec
        # reads by hand too): the protobuf path cost each one more than its handling.
        command = parse_flow(buf, cmd_start, cmd_end)
        if command is None:
            command = decode_command_at(buf, cmd_start, cmd_end)
    kind = type(command)
    if kind is c.Send or kind is c.Message:
        if end - cmd_end >= 10:
            # What clients write: 0x0e01 | crc | metadata_size, no broker entry metadata.
            magic, crc, metadata_size = _CHECKSUMMED.unpack_from(buf, cmd_end)
            if magic == _MAGIC_CHECKSUM_U16:
                if metadata_size > end - cmd_end - 10:
                    raise RemoteProtocolError("message metadata runs past the frame")
                return Frame(command, Payload(buf[cmd_end + 6 : end], crc))
        elif cmd_end == end:
            raise RemoteProtocolError(f"{kind.__name__} without a payload")
        return Frame(command, _parse_payload(memoryview(buf)[cmd_end:end]))
    if cmd_end != end:
        raise RemoteProtocolError(f"{kind.__name__} with {end - cmd_end} unexpected bytes")
    return Frame(command)


class FrameDecoder:
    """Incremental splitter: ``feed()`` bytes, then call ``next_frame()`` until it returns None.

    Any chunking of a byte stream yields the same frames. A frame larger than ``max_frame_size``
    is refused from its header, so a peer cannot make us hold more than one frame's worth.

    Frames are decoded in place in the chunk they arrived in: a chunk fed while nothing is
    buffered becomes the working buffer as it is, later chunks wait in a queue, and only a frame
    that spans chunks is copied, once, when its last byte has arrived (so neither a chunk of many
    small frames nor a large frame that arrives in many reads is copied as a whole).
    """

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING,
        first: CommandReader = parse_send,
    ) -> None:
        """``first``: the reader tried before any other (see ``_decode_at``)."""
        self.max_frame_size = max_frame_size
        self._first = first
        self._buf = b""
        self._pos = 0
        self._more: deque[bytes] = deque()  # chunks received after _buf, not yet reached
        self._more_size = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the peer."""
        if not data:
            return
        if self._pos == len(self._buf) and not self._more:
            self._buf = data if type(data) is bytes else bytes(data)
            self._pos = 0
        else:
            self._more.append(bytes(data))
            self._more_size += len(data)

    def clear(self) -> None:
        """Drop every byte buffered (the stream is done with: release them now)."""
        self._buf = b""
        self._pos = 0
        self._more.clear()
        self._more_size = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos + self._more_size

    def _head(self) -> bytes:
        """The first four buffered bytes, when they span chunks (the caller checked they exist)."""
        head = self._buf[self._pos :]
        for chunk in self._more:
            head += chunk[: 4 - len(head)]
            if len(head) == 4:
                break
        return head

    def _take(self, size: int) -> bytes:
        """Consume ``size`` bytes that span chunks (the caller checked they have arrived)."""
        parts: list[bytes | memoryview] = [memoryview(self._buf)[self._pos :]]
        missing = size - (len(self._buf) - self._pos)
        self._buf = b""
        self._pos = 0
        while missing:
            chunk = self._more.popleft()
            self._more_size -= len(chunk)
            if len(chunk) <= missing:
                parts.append(chunk)
                missing -= len(chunk)
            else:
                parts.append(memoryview(chunk)[:missing])
                self._buf = chunk  # the rest of this chunk is the new working buffer
                self._pos = missing
                missing = 0
        return b"".join(parts)

    def _next_span(self) -> tuple[bytes, int, int] | None:
        """The next complete frame as ``(buffer, start, end)``, after its ``total_size``."""
        buf = self._buf
        pos = self._pos
        available = len(buf) - pos
        if available >= 4:
            total = _U32.unpack_from(buf, pos)[0]
        elif available + self._more_size >= 4:
            total = _U32.unpack(self._head())[0]
        else:
            return None
        if total > self.max_frame_size:
            raise RemoteProtocolError(
                f"frame of {total} bytes exceeds the limit of {self.max_frame_size}"
            )
        if total < MIN_FRAME_SIZE:
            raise RemoteProtocolError(f"frame of {total} bytes is too small")
        if available >= 4 + total:
            end = pos + 4 + total
            self._pos = end
            return buf, pos + 4, end
        if available + self._more_size < 4 + total:
            return None
        frame = self._take(4 + total)
        return frame, 4, len(frame)

    def next_send_run(self) -> SendRun | None:
        """The SEND frames of one producer next in the buffer as one run, or None.

        None when the next frame is not a fast-lane SEND (``protocol.runs``) or spans chunks:
        ``next_frame`` then decodes it.
        """
        found = read_send_run(self._buf, self._pos, self.max_frame_size)
        if found is None:
            return None
        run, self._pos = found
        return run

    def next_frame(self) -> Frame | None:
        """The next complete frame, or None when more bytes are needed.

        Raises:
            RemoteProtocolError: the stream is malformed; the decoder must not be used again.
        """
        buf = self._buf
        pos = self._pos
        if len(buf) - pos >= 4:  # _next_span's common case, inline: a whole frame in this chunk
            total = _U32.unpack_from(buf, pos)[0]
            end = pos + 4 + total
            if end <= len(buf) and MIN_FRAME_SIZE <= total <= self.max_frame_size:
                self._pos = end
                return _decode_at(buf, pos + 4, end, self._first)
        span = self._next_span()
        return None if span is None else _decode_at(*span, self._first)
