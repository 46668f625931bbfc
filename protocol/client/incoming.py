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

from collections.abc import Callable
from typing import Any, NamedTuple

from protocol import commands as c
from protocol.batch import indexes_of
from protocol.client.acks import BatchTracker
from protocol.client.chunks import ChunkAssembler
from protocol.client.messages import Message
from protocol.codec import decode_record
from protocol.errors import RemoteProtocolError
from protocol.framing import Payload
from protocol.ids import MessageId
from protocol.wire import scan_single_metadata

__all__ = ["Decoded", "Incoming", "ValidationError"]


class ValidationError:
    """`CommandAck.ValidationError` values (spec §7.3)."""

    DECOMPRESSION_ERROR = 1
    CHECKSUM_MISMATCH = 2
    BATCH_DESERIALIZE_ERROR = 3


class Decoded(NamedTuple):
    """What one MESSAGE frame yields."""

    messages: list[Message]
    skipped: int  # permits to give back
    validation_error: int | None = None  # rule 1: the entry was discarded


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
        self.batches = batches
        self.chunks = chunks
        self.already_acked = already_acked
        self.start_id: MessageId | None = None
        self.inclusive = False

    def decode(self, message: c.Message, payload: Payload) -> Decoded:
        data = message.message_id
        ledger_id, entry_id = data.ledger_id, data.entry_id
        if not payload.checksum_ok():
            return Decoded([], 1, ValidationError.CHECKSUM_MISMATCH)
        try:
            metadata = decode_record(c.MessageMetadata, payload.metadata)
        except RemoteProtocolError:
            return Decoded([], 1, ValidationError.DECOMPRESSION_ERROR)
        count = metadata.num_messages_in_batch
        if metadata.compression:
            return Decoded([], count or 1, ValidationError.DECOMPRESSION_ERROR)
        if self.already_acked(ledger_id, entry_id):
            return Decoded([], count or 1)
        if count is not None:
            return self._batch(message, payload, metadata, count)
        if self._entry_is_prior(ledger_id, entry_id):
            return Decoded([], 1)
        message_id = MessageId(ledger_id, entry_id, self.partition)
        body = bytes(payload.body)
        chunk_ids: tuple[MessageId, ...] = ()
        if metadata.num_chunks_from_msg is not None and metadata.num_chunks_from_msg > 1:
            assembled = self.chunks.add(metadata, body, message_id)
            if assembled is None:
                return Decoded([], 1)  # an incomplete chunk never reaches the application
            body, chunk_ids = assembled
            message_id = chunk_ids[-1]
        return Decoded(
            [
                Message(
                    body,
                    message_id,
                    self.topic,
                    message.redelivery_count,
                    metadata,
                    None,
                    self.owner,
                    chunk_ids,
                )
            ],
            0,
        )

    def _batch(
        self, message: c.Message, payload: Payload, metadata: c.MessageMetadata, count: int
    ) -> Decoded:
        data = message.message_id
        ledger_id, entry_id = data.ledger_id, data.entry_id
        parts = _split_batch(bytes(payload.body), count)
        if parts is None:
            return Decoded([], count, ValidationError.BATCH_DESERIALIZE_ERROR)
        keep = indexes_of(message.ack_set, count) if message.ack_set else None
        start = self.start_id
        start_index = (
            start.batch_index
            if start is not None and start.ledger_id == ledger_id and start.entry_id == entry_id
            else None
        )
        partition, topic, owner = self.partition, self.topic, self.owner
        redelivery_count = message.redelivery_count
        out: list[Message] = []
        if keep is None and start_index is None and not parts[2]:
            # The common case: every message goes to the application.
            out = [
                Message(
                    body,
                    MessageId(ledger_id, entry_id, partition, i, count),
                    topic,
                    redelivery_count,
                    metadata,
                    header,
                    owner,
                )
                for i, (header, body) in enumerate(zip(parts[0], parts[1], strict=True))
            ]
            self.batches.received(ledger_id, entry_id, set(range(count)), count)
            return Decoded(out, 0)
        compacted = parts[2]
        delivered: set[int] = set()
        for i, (header, body) in enumerate(zip(parts[0], parts[1], strict=True)):
            if keep is not None and i not in keep:
                continue
            if start_index is not None and self._prior(i, start_index):
                continue
            if i in compacted:
                continue
            delivered.add(i)
            out.append(
                Message(
                    body,
                    MessageId(ledger_id, entry_id, partition, i, count),
                    topic,
                    redelivery_count,
                    metadata,
                    header,
                    owner,
                )
            )
        if out:
            self.batches.received(ledger_id, entry_id, delivered, count)
        return Decoded(out, count - len(out))

    def _prior(self, index: int, start_index: int) -> bool:
        return index < start_index if self.inclusive else index <= start_index

    def _entry_is_prior(self, ledger_id: int, entry_id: int) -> bool:
        start = self.start_id
        return (
            start is not None
            and start.ledger_id == ledger_id
            and self._prior(entry_id, start.entry_id)
        )


_Header = c.SingleMessageMetadata | bytes


def _split_batch(buf: bytes, count: int) -> tuple[list[_Header], list[bytes], set[int]] | None:
    """Split a batch payload (spec §8.2) into headers, bodies and the compacted-out indexes.

    A header made of varint fields only (`wire.scan_single_metadata`) stays bytes, decoded
    when the application asks for it; others are decoded now, so a malformed one discards the
    entry as before. None: the payload does not hold `count` well-formed messages (rule 1).
    """
    headers: list[_Header] = []
    bodies: list[bytes] = []
    compacted: set[int] = set()
    size = len(buf)
    pos = 0
    for i in range(count):
        start = pos + 4
        if start > size:
            return None
        stop = start + int.from_bytes(buf[pos:start], "big")
        if stop > size:
            return None
        scanned = scan_single_metadata(buf, start, stop)
        header: _Header
        if scanned is None:
            try:
                header = decode_record(c.SingleMessageMetadata, buf[start:stop])
            except RemoteProtocolError:
                return None
            body_size, compacted_out = header.payload_size, header.compacted_out
        else:
            header = buf[start:stop]
            body_size, compacted_out = scanned
        pos = stop + body_size
        if body_size < 0 or pos > size:
            return None
        headers.append(header)
        bodies.append(buf[stop:pos])
        if compacted_out:
            compacted.add(i)
    return headers, bodies, compacted
