"""A received message: `Message`, a view of one message of a `ReceivedEntry` (spec §7.2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from protocol import commands as c
from protocol.codec import decode_record
from protocol.ids import MessageId

if TYPE_CHECKING:
    from protocol.client.entry import ReceivedEntry

__all__ = ["Message"]


class Message(msgspec.Struct, eq=False, gc=False):
    """A received message.

    Attributes:
        payload: the message bytes.
        message_id: its id (partition set for partitions, batch index inside batches).
        topic: the topic (the partition's name for partitioned topics).
        redelivery_count: how many times the broker redelivered it.
    """

    # A struct, not a class with __init__: consumers make one per batched message, and a
    # struct is created several times faster. What the messages of an entry share lives in
    # their `ReceivedEntry`; the id, the batch header and the metadata record are made on first
    # use (the consumer's hot path only needs payload and index).
    # `gc=False`: the cyclic collector never tracks a message. Safe because nothing a message
    # holds can lead back to it: its entry reaches the consumer only through a weak reference,
    # and the rest is bytes, ints and id records. Tracked, the messages of a busy consumer
    # triggered a collection every few hundred received messages (~0.25 µs per message).
    payload: bytes
    _entry: ReceivedEntry
    _index: int = -1  # the batch index, -1 when not batched
    _single: c.SingleMessageMetadata | bytes | None = None  # else `_entry.header(_index)`
    _id: MessageId | None = None
    _chunk_ids: tuple[MessageId, ...] = ()

    def __repr__(self) -> str:
        return f"<Message {self.message_id} {len(self.payload)} bytes on {self.topic}>"

    @property
    def message_id(self) -> MessageId:
        """Its id (partition set for partitions, batch index inside batches)."""
        message_id = self._id
        if message_id is None:
            entry = self._entry
            if self._index < 0:
                message_id = MessageId(entry.ledger_id, entry.entry_id, entry.partition)
            else:
                message_id = MessageId(
                    entry.ledger_id, entry.entry_id, entry.partition, self._index, entry.batch_size
                )
            self._id = message_id
        return message_id

    @property
    def delivery(self) -> tuple[int, int, int, int]:
        """(ledger id, entry id, batch index, redelivery count) of this delivery.

        What `message_id` and `redelivery_count` say, without making the id: for applications
        that record every message they receive (loadgen's traces), at a fraction of the cost.
        """
        entry = self._entry
        return (entry.ledger_id, entry.entry_id, self._index, entry.redelivery_count)

    @property
    def topic(self) -> str:
        """The topic (partition) the message was received on."""
        return self._entry.topic

    @property
    def redelivery_count(self) -> int:
        """How often the broker redelivered the message (0 on the first delivery)."""
        return self._entry.redelivery_count

    @property
    def _consumer(self) -> Any:
        """The single-topic consumer it came from (acks, permits); None once it is gone."""
        return self._entry.consumer_ref()

    def _header(self) -> c.SingleMessageMetadata | None:
        single = self._single
        if single is None:
            if self._index < 0:
                return None
            single = self._entry.header(self._index)
        if isinstance(single, bytes):  # checked by `wire.scan_single_metadata`: decodes
            single = decode_record(c.SingleMessageMetadata, single)
        self._single = single
        return single

    @property
    def properties(self) -> dict[str, str]:
        """The message's string properties."""
        single = self._header()
        source = single if single is not None else self._entry.metadata
        return {kv.key: kv.value for kv in source.properties}

    @property
    def key(self) -> str | None:
        """The partition key, if any."""
        single = self._header()
        return single.partition_key if single is not None else self._entry.fields[4]

    @property
    def ordering_key(self) -> bytes | None:
        """The ordering key Key_Shared routes by, if the producer set one."""
        single = self._header()
        return single.ordering_key if single is not None else self._entry.fields[5]

    @property
    def event_time(self) -> int | None:
        """The application event time in ms, or None when unset."""
        single = self._header()
        source = single if single is not None else self._entry.metadata
        return source.event_time or None

    @property
    def publish_time(self) -> int:
        """When the producer published it, ms since the epoch."""
        return self._entry.fields[2]

    @property
    def producer_name(self) -> str:
        """The name of the producer that published the message."""
        return self._entry.fields[0]

    @property
    def sequence_id(self) -> int:
        """The producer's sequence id of the message (its own within a batch)."""
        single = self._header()
        if single is not None and single.sequence_id is not None:
            return single.sequence_id
        return self._entry.fields[1]

    @property
    def metadata(self) -> c.MessageMetadata:
        """The entry's full `MessageMetadata`."""
        return self._entry.metadata
