"""One received entry: what the messages of a MESSAGE frame share, and splitting its batch.

`Incoming` makes one `ReceivedEntry` per MESSAGE frame; every `Message` of the entry keeps a
reference to it and decodes the full metadata record or its batch header only when the
application asks (`ReceivedEntry.metadata`, `ReceivedEntry.header`). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from protocol import commands as c
from protocol.codec import decode_record
from protocol.errors import RemoteProtocolError
from protocol.wire import MetadataFields, scan_single_metadata

__all__ = ["BatchHeader", "ReceivedEntry", "split_batch"]


BatchHeader = c.SingleMessageMetadata | bytes
"""A batch message's header: decoded, or its bytes when made of plain varint fields only."""


class ReceivedEntry(msgspec.Struct, eq=False):
    """What the messages of one received entry share: position, metadata, topic and consumer.

    Made once per MESSAGE (`of`), so that a message stores only its payload and batch index. The
    full `MessageMetadata` record and the batch headers are decoded when an application first
    asks: on the fast lane (`wire.parse_metadata` with `CLIENT_METADATA_TAGS`) the entry was
    checked to decode with `decode_record`, and its plain headers with
    `wire.scan_single_metadata`. So the entry's bytes (a batch's; only the metadata otherwise)
    live as long as its messages. A struct: created several times faster than a class.

    Attributes:
        key: `(ledger_id, entry_id)`, the key of the acknowledgement trackers.
        batch_size: `num_messages_in_batch` of a batch (0 when not a batch).
        fields: the `wire.MetadataPeek` fields of the metadata.
        consumer_ref: a weak reference to the single-topic consumer the messages came from
            (acks, permits). Weak so that no reference cycle runs through a `Message`: messages
            are then left out of the cyclic garbage collector (see `Message`).
    """

    ledger_id: int
    entry_id: int
    key: tuple[int, int]
    partition: int
    redelivery_count: int
    topic: str
    consumer_ref: Callable[[], Any]
    fields: MetadataFields
    batch_size: int
    _entry: bytes
    _body_start: int
    _metadata: c.MessageMetadata | None = None
    _headers: list[BatchHeader] | None = None

    @classmethod
    def of(
        cls,
        message: c.Message,
        partition: int,
        topic: str,
        consumer_ref: Callable[[], Any],
        fields: MetadataFields,
        metadata: c.MessageMetadata | None,
        entry: bytes,
        body_start: int,
    ) -> ReceivedEntry:
        """The entry of `message`, whose entry bytes (or a prefix, see above) are `entry`."""
        data = message.message_id
        ledger_id, entry_id = data.ledger_id, data.entry_id
        return cls(  # positional: about half the cost of keywords, once per frame
            ledger_id,
            entry_id,
            (ledger_id, entry_id),
            partition,
            message.redelivery_count,
            topic,
            consumer_ref,
            fields,
            fields[3] or 0,
            entry,
            body_start,
            metadata,
        )

    @property
    def metadata(self) -> c.MessageMetadata:
        """The full `MessageMetadata` record."""
        if self._metadata is None:
            view = memoryview(self._entry)[4 : self._body_start]
            self._metadata = decode_record(c.MessageMetadata, view)
        return self._metadata

    def header(self, index: int) -> c.SingleMessageMetadata | bytes:
        """The header of batch message `index`, for messages split without keeping it."""
        if self._headers is None:
            parts = split_batch(self._entry, self.batch_size, self._body_start)
            assert parts is not None  # it was split once already
            self._headers = parts[0]
        return self._headers[index]


def split_batch(
    buf: bytes, count: int, pos: int = 0
) -> tuple[list[BatchHeader], list[bytes], set[int]] | None:
    """Split the batch payload at `buf[pos:]` (spec §8.2): headers, bodies, compacted indexes.

    A header made of varint fields only (`wire.scan_single_metadata`) stays bytes, decoded
    when the application asks for it; others are decoded now, so a malformed one discards the
    entry as before. None: the payload does not hold `count` well-formed messages (rule 1).
    """
    headers: list[BatchHeader] = []
    bodies: list[bytes] = []
    compacted: set[int] = set()
    size = len(buf)
    for i in range(count):
        start = pos + 4
        if start > size:
            return None
        stop = start + int.from_bytes(buf[pos:start], "big")
        if stop > size:
            return None
        scanned = scan_single_metadata(buf, start, stop)
        header: BatchHeader
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
