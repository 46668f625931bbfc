"""Messages on both sides of the wire: SEND frames (single, batched, chunked) and `Message`.

Only `protocol.codec` turns records into protobuf bytes; this module decides which records to
build and frames them (spec §2.2, §8.1, §8.4).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

import msgspec

from protocol import commands as c
from protocol.codec import decode_record, encode_record
from protocol.errors import MessageTooBigError
from protocol.framing import build_entry, checksum, encode_payload_frame
from protocol.ids import MessageId
from protocol.wire import OffTheFastLane, uvarint

if TYPE_CHECKING:
    from protocol.client._util import Future

__all__ = [
    "BatchBuilder",
    "Message",
    "build_chunks",
    "build_single",
    "plain_metadata",
    "plain_single_metadata",
]

_U32 = struct.Struct(">I")


CHECKSUM_MIN_PROTOCOL = 6
"""The C++ client writes the CRC-32C section on SEND only to brokers announcing v6+ (spec §2.2)."""


# The common message has no key, properties or times: its headers are two or three varints after
# a prefix fixed per producer. `protocol.wire` writes the varints; field order and tags follow
# PulsarApi.proto, so the bytes equal `encode_record`'s (tests/protocol/client/test_messages.py).
_SEQUENCE_ID_TAG = b"\x10"  # MessageMetadata.sequence_id = 2, varint
_PUBLISH_TIME_TAG = b"\x18"  # MessageMetadata.publish_time = 3, varint
_PAYLOAD_SIZE_TAG = b"\x18"  # SingleMessageMetadata.payload_size = 3, varint
_SINGLE_SEQUENCE_ID_TAG = b"\x40"  # SingleMessageMetadata.sequence_id = 8, varint


def name_prefix(producer_name: str) -> bytes:
    """The encoded `MessageMetadata.producer_name` (field 1), computed once per producer."""
    name = producer_name.encode()
    return b"\x0a" + uvarint(len(name)) + name


def plain_metadata(prefix: bytes, producer_name: str, sequence_id: int, publish_time: int) -> bytes:
    """`encode_record(MessageMetadata(producer_name, sequence_id, publish_time))`, fast."""
    try:
        return b"".join(
            (
                prefix,
                _SEQUENCE_ID_TAG,
                uvarint(sequence_id),
                _PUBLISH_TIME_TAG,
                uvarint(publish_time),
            )
        )
    except OffTheFastLane:  # out of range: let the codec report it
        return encode_record(
            c.MessageMetadata(
                producer_name=producer_name, sequence_id=sequence_id, publish_time=publish_time
            )
        )


def plain_single_metadata(payload_size: int, sequence_id: int) -> bytes:
    """`encode_record(SingleMessageMetadata(payload_size, sequence_id=...))`, fast."""
    try:
        return b"".join(
            (
                _PAYLOAD_SIZE_TAG,
                uvarint(payload_size),
                _SINGLE_SEQUENCE_ID_TAG,
                uvarint(sequence_id),
            )
        )
    except OffTheFastLane:
        return encode_record(
            c.SingleMessageMetadata(payload_size=payload_size, sequence_id=sequence_id)
        )


_PLAIN_PREFIXES: dict[int, bytes] = {}


def plain_single_header(payload_size: int, sequence_id: int) -> bytes:
    """The `| size:u32 | SingleMessageMetadata |` of a plain batched message (spec §8.2).

    Producers send runs of equal-sized payloads, so the part that depends on the size only is
    cached; the sequence id's varint is appended per message.
    """
    try:
        prefix = _PLAIN_PREFIXES.get(payload_size)
        if prefix is None:
            prefix = _PAYLOAD_SIZE_TAG + uvarint(payload_size) + _SINGLE_SEQUENCE_ID_TAG
            if len(_PLAIN_PREFIXES) < 1024:
                _PLAIN_PREFIXES[payload_size] = prefix
        seq = uvarint(sequence_id)
    except OffTheFastLane:
        header = plain_single_metadata(payload_size, sequence_id)
        return _U32.pack(len(header)) + header
    return _U32.pack(len(prefix) + len(seq)) + prefix + seq


def _frame(
    send: c.Send, metadata: bytes, payload: bytes | memoryview, with_checksum: bool
) -> bytes:
    entry = build_entry(metadata, payload)
    return encode_payload_frame(send, entry, checksum(entry) if with_checksum else None)


def build_single(
    send: c.Send,
    metadata: c.MessageMetadata | bytes,
    payload: bytes,
    max_message_size: int,
    with_checksum: bool = True,
) -> bytes | None:
    """The SEND frame of an unbatched message, or None if it exceeds `max_message_size`.

    `metadata` is a record or its encoding (`plain_metadata`). The limit applies to metadata
    plus payload, checked before sending (spec §2.3).
    """
    encoded = metadata if isinstance(metadata, bytes) else encode_record(metadata)
    if len(encoded) + len(payload) > max_message_size:
        return None
    return _frame(send, encoded, payload, with_checksum)


def build_chunks(
    send: c.Send,
    metadata: c.MessageMetadata,
    payload: bytes,
    max_message_size: int,
    with_checksum: bool = True,
) -> list[bytes]:
    """The SEND frames of a chunked message (spec §8.4).

    Every chunk carries the message's sequence id and `uuid = "<producer>-<sequence id>"` (as
    the C++ client does), `num_chunks_from_msg`, `total_chunk_msg_size` and its `chunk_id`;
    chunk payloads are `max_message_size - metadata size` bytes, so each frame stays within what
    the broker accepts.

    Raises:
        MessageTooBigError: the metadata alone does not fit.
    """
    total = len(payload)
    uuid = f"{metadata.producer_name}-{metadata.sequence_id}"
    # Measure with every chunk field at a value at least as wide as any real one.
    probe = msgspec.structs.replace(
        metadata, uuid=uuid, num_chunks_from_msg=total, total_chunk_msg_size=total, chunk_id=total
    )
    chunk_size = max_message_size - len(encode_record(probe))
    if chunk_size <= 0:
        raise MessageTooBigError("message metadata alone exceeds the max message size")
    count = max(1, -(-total // chunk_size))
    chunk_send = msgspec.structs.replace(send, is_chunk=True)
    view = memoryview(payload)
    frames = []
    for chunk_id in range(count):
        chunk_meta = msgspec.structs.replace(
            metadata,
            uuid=uuid,
            num_chunks_from_msg=count,
            total_chunk_msg_size=total,
            chunk_id=chunk_id,
        )
        piece = view[chunk_id * chunk_size : (chunk_id + 1) * chunk_size]
        frames.append(_frame(chunk_send, encode_record(chunk_meta), piece, with_checksum))
    return frames


class BatchBuilder:
    """The open batch of a producer: per-message headers and payloads, joined on `build`."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._futures: list[Future[MessageId]] = []
        self.count = 0
        self.size = 0
        self.started_at = 0.0
        self._first_seq = 0
        self._publish_time = 0
        self._key: str | None = None

    def start(self, sequence_id: int, publish_time: int, key: str | None, now: float) -> None:
        """Open a batch: its first message fixes the sequence id, publish time and key."""
        self._first_seq = sequence_id
        self._publish_time = publish_time
        self._key = key
        self.started_at = now

    def add(
        self,
        payload: bytes,
        sequence_id: int,
        key: str | None,
        properties: tuple[c.KeyValue, ...],
        event_time: int | None,
        future: Future[MessageId],
    ) -> None:
        """Append one message (after `start` for the first one)."""
        size = len(payload)
        if properties or key is not None or event_time is not None:
            header = encode_record(
                c.SingleMessageMetadata(
                    payload_size=size,
                    properties=properties,
                    partition_key=key,
                    event_time=event_time,
                    sequence_id=sequence_id,
                )
            )
            self._parts += (_U32.pack(len(header)), header, payload)
        else:
            self._parts += (plain_single_header(size, sequence_id), payload)
        self._futures.append(future)
        self.count += 1
        self.size += size

    def build(
        self, producer_id: int, producer_name: str, with_checksum: bool = True
    ) -> tuple[int, bytes, list[Future[MessageId]]]:
        """Close the batch: its first sequence id, its SEND frame and its futures (in order).

        spec §8.1: `num_messages_in_batch` (present even for one message) marks the entry as a
        batch; the entry metadata takes sequence id, publish time and key from the first message.
        """
        metadata = c.MessageMetadata(
            producer_name=producer_name,
            sequence_id=self._first_seq,
            publish_time=self._publish_time,
            partition_key=self._key,
            num_messages_in_batch=self.count,
        )
        send = c.Send(producer_id=producer_id, sequence_id=self._first_seq, num_messages=self.count)
        frame = _frame(send, encode_record(metadata), b"".join(self._parts), with_checksum)
        result = (self._first_seq, frame, self._futures)
        self._parts = []
        self._futures = []
        self.count = 0
        self.size = 0
        return result


class Message:
    """A received message.

    Attributes:
        payload: the message bytes.
        message_id: its id (partition set for partitions, batch index inside batches).
        topic: the topic (the partition's name for partitioned topics).
        redelivery_count: how many times the broker redelivered it.
    """

    __slots__ = (
        "_chunk_ids",
        "_consumer",
        "_metadata",
        "_single",
        "message_id",
        "payload",
        "redelivery_count",
        "topic",
    )

    def __init__(
        self,
        payload: bytes,
        message_id: MessageId,
        topic: str,
        redelivery_count: int,
        metadata: c.MessageMetadata,
        single: c.SingleMessageMetadata | bytes | None = None,
        consumer: Any = None,
        chunk_ids: tuple[MessageId, ...] = (),
    ) -> None:
        self.payload = payload
        self.message_id = message_id
        self.topic = topic
        self.redelivery_count = redelivery_count
        self._metadata = metadata
        # A batched message's header, decoded on first use: the consumer's hot path only needs
        # payload and id, so the header stays bytes until a property asks for it.
        self._single = single
        self._consumer = consumer  # the single-topic consumer it came from (acks, permits)
        self._chunk_ids = chunk_ids

    def __repr__(self) -> str:
        return f"<Message {self.message_id} {len(self.payload)} bytes on {self.topic}>"

    def _header(self) -> c.SingleMessageMetadata | None:
        single = self._single
        if isinstance(single, bytes):  # checked by `wire.scan_single_metadata`: decodes
            single = self._single = decode_record(c.SingleMessageMetadata, single)
        return single

    @property
    def properties(self) -> dict[str, str]:
        """The message's string properties."""
        single = self._header()
        source = single if single is not None else self._metadata
        return {kv.key: kv.value for kv in source.properties}

    @property
    def key(self) -> str | None:
        """The partition key, if any."""
        single = self._header()
        source = single if single is not None else self._metadata
        return source.partition_key

    @property
    def ordering_key(self) -> bytes | None:
        single = self._header()
        source = single if single is not None else self._metadata
        return source.ordering_key

    @property
    def event_time(self) -> int | None:
        """The application event time in ms, or None when unset."""
        single = self._header()
        source = single if single is not None else self._metadata
        return source.event_time or None

    @property
    def publish_time(self) -> int:
        """When the producer published it, ms since the epoch."""
        return self._metadata.publish_time

    @property
    def producer_name(self) -> str:
        return self._metadata.producer_name

    @property
    def sequence_id(self) -> int:
        single = self._header()
        if single is not None and single.sequence_id is not None:
            return single.sequence_id
        return self._metadata.sequence_id

    @property
    def metadata(self) -> c.MessageMetadata:
        """The entry's full `MessageMetadata`."""
        return self._metadata
