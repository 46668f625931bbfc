"""Turning MESSAGE frames into application messages, for one consumer. Pure: no I/O.

Rules (spec §7.2, §8.2, §8.4; C++ `ConsumerImpl::messageReceived`):

1. A wrong CRC-32C, unparsable metadata, a compressed entry (no codecs here) or a malformed
   batch discards the entry; the consumer tells the broker with an ACK `validation_error`.
2. An entry is a batch iff its metadata has `num_messages_in_batch`; message *i* gets the id
   (ledger, entry, partition, i) with batch size N. Indexes cleared in `CommandMessage.ack_set`
   were acknowledged before a redelivery and are skipped.
3. Messages before the start id are skipped: same ledger and an earlier entry (same entry and an
   earlier batch index for batches), or equal unless the start is inclusive.
4. Entries already covered by a pending ack are skipped.
5. Chunks are collected until their message is complete; its id is the last chunk's.

Every message that is skipped, discarded or absorbed into a chunked message is reported in
`Decoded.skipped`, because its flow permit must be given back as if it had been consumed.
"""

from __future__ import annotations

import re
import struct
import weakref
from collections.abc import Callable
from itertools import repeat
from typing import Any

from protocol import commands as c
from protocol.batch import indexes_of
from protocol.client.acks import BatchTracker
from protocol.client.chunks import ChunkAssembler
from protocol.client.entry import BatchHeader, ReceivedEntry, split_batch
from protocol.client.received import Message
from protocol.codec import decode_record
from protocol.errors import RemoteProtocolError
from protocol.framing import Payload, checksum
from protocol.ids import MessageId
from protocol.wire import (
    CLIENT_METADATA_TAGS,
    MetadataFields,
    parse_metadata,
    scan_single_metadata,
    uvarint,
)

__all__ = ["Decoded", "Incoming", "ValidationError"]


class ValidationError:
    """`CommandAck.ValidationError` values (spec §7.3)."""

    DECOMPRESSION_ERROR = 1
    CHECKSUM_MISMATCH = 2
    BATCH_DESERIALIZE_ERROR = 3


Decoded = tuple[list[Message], int, int | None]
"""What one MESSAGE frame yields: `(messages, skipped, validation_error)`: the messages for the
application, the permits to give back, and the `ValidationError` when the entry was discarded
(rule 1), else None. A plain tuple: one is made per frame, and a named tuple costs several times
more to create."""


class Incoming:
    """The decoding state of one consumer: start position, chunks, batches in flight.

    Args:
        topic: stamped on every message.
        partition: the partition index for message ids (-1 when not partitioned).
        owner: the consumer stamped on every message (acks and permits go back to it).
        batches: where delivered batch indexes are recorded for acknowledgement.
        chunks: where chunks are collected.
        already_acked: `(ledger, entry) -> bool`, rule 4.
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        owner: Any,
        batches: BatchTracker,
        chunks: ChunkAssembler,
        already_acked: Callable[[int, int], bool],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.owner = owner
        self._owner_ref = weakref.ref(owner)
        self.batches = batches
        self.chunks = chunks
        self.already_acked = already_acked
        self.start_id: MessageId | None = None
        self.inclusive = False

    def decode(self, message: c.Message, payload: Payload) -> Decoded:
        """Split one MESSAGE into the messages to deliver, checking its checksum and batch."""
        data = message.message_id
        ledger_id, entry_id = data.ledger_id, data.entry_id
        entry = payload.entry
        crc = payload.checksum  # `payload.checksum_ok()`, inline: once per frame
        if crc is not None and checksum(entry) != crc:
            return [], 1, ValidationError.CHECKSUM_MISMATCH
        body_start = 4 + int.from_bytes(entry[:4])
        fields = None
        if body_start <= len(entry):
            fields = parse_metadata(entry, 4, body_start, CLIENT_METADATA_TAGS)
        metadata = None
        if fields is None:
            # Off the fast lane (compression, chunks, properties, ...): decode it all now.
            try:
                metadata = decode_record(c.MessageMetadata, payload.metadata)
            except RemoteProtocolError:
                return [], 1, ValidationError.DECOMPRESSION_ERROR
            if metadata.compression:
                count = metadata.num_messages_in_batch
                return [], count or 1, ValidationError.DECOMPRESSION_ERROR
            fields = _fields_of(metadata)
        count = fields[3]
        if self.already_acked(ledger_id, entry_id):
            return [], count or 1, None
        # A batch keeps its entry for its headers; other messages keep only the metadata, so
        # that a large payload is not held twice (its body is copied out).
        kept = entry if count is not None else entry[:body_start]
        received = ReceivedEntry.of(
            message, self.partition, self.topic, self._owner_ref, fields, metadata, kept, body_start
        )
        if count is not None:
            return self._batch(received, message.ack_set, count)
        if self.start_id is not None and self._entry_is_prior(ledger_id, entry_id):
            return [], 1, None
        body = entry[body_start:]
        if metadata is not None and (metadata.num_chunks_from_msg or 0) > 1:
            message_id = MessageId(ledger_id, entry_id, self.partition)
            assembled = self.chunks.add(metadata, body, message_id)
            if assembled is None:
                return [], 1, None  # an incomplete chunk never reaches the application
            body, chunk_ids = assembled
            return [Message(body, received, -1, None, chunk_ids[-1], chunk_ids)], 0, None
        return [Message(body, received)], 0, None

    def _batch(self, received: ReceivedEntry, ack_set: tuple[int, ...], count: int) -> Decoded:
        ledger_id, entry_id = received.key
        buf, body_start = received._entry, received._body_start
        start = self.start_id
        start_index = (
            start.batch_index
            if start is not None and start.ledger_id == ledger_id and start.entry_id == entry_id
            else None
        )
        out = None
        if not ack_set and start_index is None:
            out = _plain_batch(buf, body_start, count, received)
        if out is None:
            parts = split_batch(buf, count, body_start)
            if parts is None:
                return [], count, ValidationError.BATCH_DESERIALIZE_ERROR
            headers, bodies, compacted = parts
            if ack_set or start_index is not None or compacted:
                return self._filtered(received, ack_set, start_index, parts)
            out = [
                Message(body, received, i, header)
                for i, (header, body) in enumerate(zip(headers, bodies, strict=True))
            ]
        # The common case: every message goes to the application.
        self.batches.received(ledger_id, entry_id, set(range(count)), count)
        return out, 0, None

    def _filtered(
        self,
        received: ReceivedEntry,
        ack_set: tuple[int, ...],
        start_index: int | None,
        parts: tuple[list[BatchHeader], list[bytes], set[int]],
    ) -> Decoded:
        """Rule 2 and 3 for a batch: the messages neither acked, before the start nor compacted."""
        count = received.batch_size
        headers, bodies, compacted = parts
        keep = indexes_of(ack_set, count) if ack_set else None
        delivered: set[int] = set()
        out = []
        for i, (header, body) in enumerate(zip(headers, bodies, strict=True)):
            if keep is not None and i not in keep:
                continue
            if start_index is not None and self._prior(i, start_index):
                continue
            if i in compacted:
                continue
            delivered.add(i)
            out.append(Message(body, received, i, header))
        if out:
            self.batches.received(received.ledger_id, received.entry_id, delivered, count)
        return out, count - len(out), None

    def _prior(self, index: int, start_index: int) -> bool:
        return index < start_index if self.inclusive else index <= start_index

    def _entry_is_prior(self, ledger_id: int, entry_id: int) -> bool:
        start = self.start_id
        return (
            start is not None
            and start.ledger_id == ledger_id
            and self._prior(entry_id, start.entry_id)
        )


def _fields_of(metadata: c.MessageMetadata) -> MetadataFields:
    """What `wire.parse_metadata` reads, from a decoded record."""
    return (
        metadata.producer_name,
        metadata.sequence_id,
        metadata.publish_time,
        metadata.num_messages_in_batch,
        metadata.partition_key,
        metadata.ordering_key,
        metadata.deliver_at_time,
    )


# | header size:u32 | the first 8 header bytes |, unpacked in one call: indexing bytes one at a
# time costs about as much per byte as this whole unpacking.
_PLAIN_PREFIX = struct.Struct(">I8B")


def _plain_batch(buf: bytes, pos: int, count: int, received: ReceivedEntry) -> list[Message] | None:
    """The messages of the batch at `buf[pos:]` if every header is plain, else None.

    Plain: varint fields only (`wire.scan_single_metadata`), not compacted out; what producers
    write for messages without key or properties. The headers are not kept: a message asks its
    `ReceivedEntry` for its header if the application wants one. None also when the payload is
    malformed: `split_batch` then decides (rule 1).
    """
    if count >= _RUN_MIN_COUNT:
        run = _equal_size_run(buf, pos, count, received)
        if run is not None:
            return run
    out: list[Message] = []
    append = out.append
    end = len(buf)
    unpack = _PLAIN_PREFIX.unpack_from
    for index in range(count):
        # What `plain_single_header` writes, read inline: | 18 payload_size 40 sequence_id |
        # with a payload size of one or two bytes and a sequence id of up to four (below 2^28),
        # its varint ending exactly at the header's end.
        stop = size = 0
        if pos + 12 <= end:
            n, b0, b1, b2, b3, b4, b5, b6, b7 = unpack(buf, pos)  # n: the header's size
            if b0 == 0x18 and b2 == 0x40 and b1 < 128:  # | 18 size 40 | sequence id |
                size = b1
                seq = 1 if b3 < 128 else 2 if b4 < 128 else 3 if b5 < 128 else 4 if b6 < 128 else 0
                if seq and n == 3 + seq:
                    stop = pos + 4 + n
            elif b0 == 0x18 and b3 == 0x40 and b2 < 128 <= b1:  # | 18 size size 40 | ... |
                size = (b1 & 0x7F) | b2 << 7
                seq = 1 if b4 < 128 else 2 if b5 < 128 else 3 if b6 < 128 else 4 if b7 < 128 else 0
                if seq and n == 4 + seq:
                    stop = pos + 4 + n
        if not stop or stop > end:
            # Any other header, or one near the end of the payload.
            start = pos + 4
            if start > end:
                return None
            stop = start + int.from_bytes(buf[pos:start])
            scanned = scan_single_metadata(buf, start, stop) if stop <= end else None
            if scanned is None or scanned[1] or scanned[0] < 0:
                return None  # not plain, compacted out, or malformed
            size = scanned[0]
        pos = stop + size
        if pos > end:
            return None
        append(Message(buf[stop:pos], received, index))
    return out


# Batches of equal-sized plain messages (what a producer of fixed-size payloads writes) are split
# by a regular expression per payload size: the C matcher checks every header and slices every
# body, which costs a fraction of reading them one by one in Python. Compiling one takes about a
# millisecond, so only batches of several messages use them, and only so many sizes are kept.
_RUN_MIN_COUNT = 16
_RUN_SIZES_CACHED = 64
_MAX_SEQUENCE_VARINT = 9  # bytes; a tenth byte has rules of its own (`wire.read_varint`)
_RUN_PATTERNS: dict[int, tuple[re.Pattern[bytes], re.Pattern[bytes]]] = {}


def _run_patterns(payload_size: int) -> tuple[re.Pattern[bytes], re.Pattern[bytes]] | None:
    """`(one, all)`: one plain message of `payload_size` bytes, capturing its body; a run of them.

    A plain header is | size:u32 | 18 payload_size 40 sequence_id | (`plain_single_header`),
    here with the payload size's canonical varint and a sequence id varint of 1-9 bytes whose
    last byte ends the header: exactly the headers `wire.scan_single_metadata` reads as
    `(payload_size, False)` in this field order. None: not cached and the cache is full.
    """
    patterns = _RUN_PATTERNS.get(payload_size)
    if patterns is None and len(_RUN_PATTERNS) < _RUN_SIZES_CACHED:
        size = uvarint(payload_size)
        heads = b"|".join(
            re.escape(bytes((2 + len(size) + n, 0x18)) + size + b"\x40")
            + b"[\x80-\xff]{%d}[\x00-\x7f]" % (n - 1)
            for n in range(1, _MAX_SEQUENCE_VARINT + 1)
        )
        one = b"\x00\x00\x00(?:%b)" % heads
        patterns = (
            re.compile(one + b"(.{%d})" % payload_size, re.DOTALL),
            re.compile(b"(?:%b.{%d})*" % (one, payload_size), re.DOTALL),
        )
        _RUN_PATTERNS[payload_size] = patterns
    return patterns


def _equal_size_run(
    buf: bytes, pos: int, count: int, received: ReceivedEntry
) -> list[Message] | None:
    """`_plain_batch` of a batch whose messages are all plain and of one size, else None."""
    start = pos + 4
    stop = start + int.from_bytes(buf[pos:start])
    first = scan_single_metadata(buf, start, stop) if stop <= len(buf) else None
    if first is None or not 0 <= first[0] <= len(buf) - stop:
        return None
    patterns = _run_patterns(first[0])
    # The run must fill the rest of the payload (`fullmatch`), so that `findall` finds exactly
    # its messages, in order; a count other than the batch's is left to the generic loop.
    if patterns is None or patterns[1].fullmatch(buf, pos) is None:
        return None
    bodies = patterns[0].findall(buf, pos)
    if len(bodies) != count:
        return None
    return list(map(Message, bodies, repeat(received), range(count)))
