"""What the broker reads from an entry's ``MessageMetadata``, once, when it is published.

The metadata itself is stored and replayed untouched (spec/wire-protocol.md §6.4); the broker only
needs the few fields below for permits, Key_Shared routing, delayed delivery, seek by time and
the last-message id.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import msgspec

from protocol.codec import peek_entry_metadata, peek_metadata
from protocol.errors import RemoteProtocolError
from protocol.wire import parse_metadata, uvarint

if TYPE_CHECKING:
    from protocol.runs import SendRun

__all__ = [
    "NONE_KEY",
    "EntryInfo",
    "RunInfos",
    "entry_info_from_entry",
    "entry_info_from_metadata",
]

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


class RunInfos:
    """The entry infos of one producer's runs of SENDs, read against its last entry's metadata.

    The publish hot path (``protocol.runs``): an unbatched producer's consecutive entries carry
    the same ``MessageMetadata`` but for the sequence id and, every millisecond or so, the
    publish time; the official client writes ``producer_name``, ``sequence_id`` and
    ``publish_time`` and nothing else. Once an entry of that shape was read the generic way
    (``entry_info_from_entry``), the next ones are recognised by comparing their bytes with the
    expected ``metadata_size | 0a len name | 10 sequence_id | 18 publish_time`` (the sequence id
    as the SEND wrote it), so the info costs one comparison and no parse. Any other entry is read
    the generic way, and teaches the template when it has that shape.
    """

    __slots__ = ("_heads", "_name", "_tail", "_time")

    def __init__(self) -> None:
        self._heads: tuple[bytes, ...] = ()  # by sequence varint length: size | 0a len name 10
        self._tail = b""  # 18 publish_time
        self._name = ""
        self._time = 0

    def read(self, run: SendRun) -> list[EntryInfo | None]:
        """The info of each entry of ``run``; None for one whose metadata is not valid."""
        infos: list[EntryInfo | None] = []
        append = infos.append
        heads, tail, name, time = self._heads, self._tail, self._name, self._time
        for sequence_id, varint, entry in zip(
            run.sequence_ids, run.sequence_varints, run.entries, strict=True
        ):
            if heads and entry.startswith(heads[len(varint)] + varint + tail):
                append(EntryInfo(1, False, time, None, None, name, sequence_id, len(entry)))
                continue
            try:
                info = entry_info_from_entry(entry)
            except RemoteProtocolError:
                append(None)  # the caller reads it again to report why
                continue
            append(info)
            if self._learn(info, varint, entry):
                heads, tail, name, time = self._heads, self._tail, self._name, self._time
        return infos

    def _learn(self, info: EntryInfo, varint: bytes, entry: bytes) -> bool:
        """Take ``entry``'s metadata as the template if it has the plain shape; True if so."""
        if info.batched or info.key is not None or info.deliver_at_time is not None:
            return False
        name = info.producer_name.encode()
        if len(name) >= 0x80:
            return False
        prefix = b"\x0a" + bytes((len(name),)) + name + b"\x10"
        tail = b"\x18" + uvarint(info.publish_time)
        metadata = prefix + varint + tail
        if not entry.startswith(len(metadata).to_bytes(4) + metadata):
            return False  # other fields, or the SEND's sequence id is not the metadata's
        self._heads = tuple(
            (len(prefix) + length + len(tail)).to_bytes(4) + prefix for length in range(4)
        )
        self._tail = tail
        self._name = info.producer_name
        self._time = info.publish_time
        return True
