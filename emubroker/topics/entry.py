"""What the broker reads from an entry's ``MessageMetadata``, once, when it is published.

The metadata itself is stored and replayed untouched (spec/wire-protocol.md §6.4); the broker only
needs the few fields below for permits, Key_Shared routing, delayed delivery, seek by time and
the last-message id.
"""

from __future__ import annotations

import sys

import msgspec

from protocol.codec import peek_entry_metadata, peek_metadata
from protocol.wire import parse_metadata

__all__ = ["NONE_KEY", "EntryInfo", "entry_info_from_entry", "entry_info_from_metadata"]

NONE_KEY = b"NONE_KEY"
"""The sticky key Pulsar gives entries that carry no key (``Commands.peekStickyKey``), so
key-less entries of a Key_Shared subscription all hash to one consumer."""


class EntryInfo(msgspec.Struct, frozen=True, gc=False):
    """The broker's view of one stored entry.

    One is kept per live entry (``ManagedLedger.infos``), so its size counts: it holds no
    container that could take part in a reference cycle, hence ``gc=False`` (no GC header, not
    scanned by the collector), and its producer name is interned (one string per producer, not
    one per entry).

    Attributes:
        num_messages: ``num_messages_in_batch`` if present, else 1; a batch of N takes N permits.
        batched: True iff ``num_messages_in_batch`` was present (spec §8.2: presence = batch).
        publish_time: Publish time in ms.
        key: ``ordering_key``, else ``partition_key`` in UTF-8, else None (Key_Shared routing).
        deliver_at_time: Wall-clock ms before which Shared/Key_Shared must not deliver, or None.
        producer_name: The producer that wrote the entry.
        sequence_id: Its sequence id (the first one of a batch).
        size: Length of the entry bytes (``metadata_size | metadata | payload``).
    """

    num_messages: int
    batched: bool
    publish_time: int
    key: bytes | None
    deliver_at_time: int | None
    producer_name: str
    sequence_id: int
    size: int


def entry_info_from_metadata(metadata: bytes | memoryview, *, size: int | None = None) -> EntryInfo:
    """Decode the fields the broker needs from a serialized ``MessageMetadata``.

    Args:
        metadata: The ``MessageMetadata`` bytes (``framing.Payload.metadata``).
        size: The length of the whole entry, when the caller has it; the metadata length
            otherwise (``Topic.publish`` counts bytes from the entry itself either way).

    Returns:
        The entry's :class:`EntryInfo`.

    Raises:
        RemoteProtocolError: The bytes are not a valid ``MessageMetadata``.
    """
    meta = peek_metadata(metadata)
    batch = meta.num_messages_in_batch
    key = meta.ordering_key
    if key is None and meta.partition_key is not None:
        key = meta.partition_key.encode()
    return EntryInfo(
        num_messages=1 if batch is None else max(batch, 1),
        batched=batch is not None,
        publish_time=meta.publish_time,
        key=key,
        deliver_at_time=meta.deliver_at_time,
        producer_name=meta.producer_name,
        sequence_id=meta.sequence_id,
        size=len(metadata) if size is None else size,
    )


def entry_info_from_entry(entry: bytes) -> EntryInfo:
    """``entry_info_from_metadata`` of the metadata inside an entry, read in place.

    The publish hot path: same result as ``entry_info_from_metadata(Payload(entry).metadata,
    size=len(entry))`` without a view or a copy of the metadata.

    Args:
        entry: ``metadata_size | MessageMetadata | payload`` as received.

    Raises:
        RemoteProtocolError: The entry does not hold a valid ``MessageMetadata``.
    """
    # protocol.wire reads what clients write; codec judges anything else (and raises).
    size = int.from_bytes(entry[:4])
    fields = parse_metadata(entry, 4, 4 + size) if size <= len(entry) - 4 else None
    if fields is None:
        fields = peek_entry_metadata(entry)
    name, sequence_id, publish_time, batch, partition_key, key, deliver_at = fields
    name = sys.intern(name)
    if key is None and partition_key is not None:
        key = partition_key.encode()
    if batch is None:
        return EntryInfo(1, False, publish_time, key, deliver_at, name, sequence_id, len(entry))
    return EntryInfo(
        max(batch, 1), True, publish_time, key, deliver_at, name, sequence_id, len(entry)
    )
