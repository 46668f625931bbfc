"""The SEND frames of a producer: single messages and batches (spec §2.2, §8.1).

Only `protocol.codec` turns records into protobuf bytes; this module decides which records to
build and frames them, with fast paths for the common plain message. A chunked message's frames
are `protocol.client.chunks`'s, a received message is `protocol.client.received.Message`.
"""

from __future__ import annotations

import struct

from protocol import commands as c
from protocol.client._util import FutureGroup, GroupMember
from protocol.codec import encode_record
from protocol.framing import MAGIC_CHECKSUM, checksum, encode_send_frame
from protocol.ids import MessageId
from protocol.wire import CONTINUED_BYTES, SMALL_VARINTS, U64, OffTheFastLane, uvarint

__all__ = [
    "BatchBuilder",
    "PlainSends",
    "build_single",
    "plain_single_metadata",
]

_U32 = struct.Struct(">I")
_U32X2 = struct.Struct(">II")


CHECKSUM_MIN_PROTOCOL = 6
"""The C++ client writes the CRC-32C section on SEND only to brokers announcing v6+ (spec §2.2)."""


# The common message has no key, properties or times: its headers are two or three varints after
# a prefix fixed per producer. `protocol.wire` writes the varints; field order and tags follow
# PulsarApi.proto, so the bytes equal `encode_record`'s (tests/protocol/client/test_messages.py,
# test_plain_sends.py, test_plain_runs.py).
_SEQUENCE_ID_TAG = b"\x10"  # MessageMetadata.sequence_id = 2, varint
_PUBLISH_TIME_TAG = b"\x18"  # MessageMetadata.publish_time = 3, varint
_PAYLOAD_SIZE_TAG = b"\x18"  # SingleMessageMetadata.payload_size = 3, varint
_SINGLE_SEQUENCE_ID_TAG = b"\x40"  # SingleMessageMetadata.sequence_id = 8, varint
_BATCH_SIZE_TAG = b"\x58"  # MessageMetadata.num_messages_in_batch = 11, varint


def name_prefix(producer_name: str) -> bytes:
    """The encoded `MessageMetadata.producer_name` (field 1), computed once per producer."""
    name = producer_name.encode()
    return b"\x0a" + uvarint(len(name)) + name


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


_PLAIN_HEADS: dict[int, tuple[bytes, ...]] = {}
_PLAIN_HEADS_CACHED = 1024  # distinct payload sizes remembered (producers repeat a few)


def _plain_heads(payload_size: int) -> tuple[bytes, ...]:
    """`plain_single_header` up to the sequence id's varint, indexed by that varint's length.

    Producers send runs of equal-sized payloads, so this is cached per size: a message's header
    is then a lookup plus its sequence id's varint.

    Raises:
        OffTheFastLane: `payload_size` is negative.
    """
    heads = _PLAIN_HEADS.get(payload_size)
    if heads is None:
        body = _PAYLOAD_SIZE_TAG + uvarint(payload_size) + _SINGLE_SEQUENCE_ID_TAG
        heads = tuple(_U32.pack(len(body) + n) + body for n in range(11))  # varints: 1-10 bytes
        if len(_PLAIN_HEADS) < _PLAIN_HEADS_CACHED:
            _PLAIN_HEADS[payload_size] = heads
    return heads


_PLAIN_RUN_HEADS: dict[tuple[int, int], tuple[bytes, ...]] = {}


def _plain_run_heads(payload_size: int, length: int) -> tuple[bytes, ...]:
    """`plain_single_header` up to the first byte of a `length`-byte sequence id varint.

    Indexed by the sequence id's low 7 bits (the byte that differs between consecutive ids);
    for one-byte varints these are whole headers. Cached per payload size and length.
    """
    key = (payload_size, length)
    heads = _PLAIN_RUN_HEADS.get(key)
    if heads is None:
        head = _plain_heads(payload_size)[length]
        heads = tuple(head + low for low in (SMALL_VARINTS if length == 1 else CONTINUED_BYTES))
        if len(_PLAIN_RUN_HEADS) < _PLAIN_HEADS_CACHED:
            _PLAIN_RUN_HEADS[key] = heads
    return heads


def plain_single_header(payload_size: int, sequence_id: int) -> bytes:
    """The `| size:u32 | SingleMessageMetadata |` of a plain batched message (spec §8.2)."""
    try:
        seq = uvarint(sequence_id)
        return _plain_heads(payload_size)[len(seq)] + seq
    except OffTheFastLane:
        header = plain_single_metadata(payload_size, sequence_id)
        return _U32.pack(len(header)) + header


def build_single(
    send: c.Send,
    metadata: c.MessageMetadata | bytes,
    payload: bytes,
    max_message_size: int,
    with_checksum: bool = True,
) -> bytes | None:
    """The SEND frame of an unbatched message, or None if it exceeds `max_message_size`.

    `metadata` is a record or its encoding. The limit applies to metadata
    plus payload, checked before sending (spec §2.3).
    """
    encoded = metadata if isinstance(metadata, bytes) else encode_record(metadata)
    if len(encoded) + len(payload) > max_message_size:
        return None
    return encode_send_frame(send, encoded, payload, with_checksum)


_SEND_TYPE = b"\x08\x06\x32"  # BaseCommand.type = SEND, then field 6 (send)
_CHECKSUM_SECTION = struct.Struct(">2sI")  # 0x0e01, CRC-32C (spec §2.2)


class PlainSends:
    """SEND frames of plain messages (no key, properties or times) for one producer attachment.

    Same bytes as `build_single(Send(producer_id, sequence_id), MessageMetadata(...), ...)`
    (tests/protocol/client/test_plain_sends.py), built from pieces fixed per producer: the SEND's
    producer id, the metadata's producer name, and the publish time's varint, which changes once
    a millisecond. The sequence id's varint is written once for both the SEND and the metadata.
    """

    __slots__ = ("_max_size", "_metadata_head", "_send_head", "_time", "_time_varint", "_with_crc")

    def __init__(
        self, producer_id: int, producer_name: str, max_message_size: int, with_checksum: bool
    ) -> None:
        # CommandSend: 08 producer_id 10 sequence_id; MessageMetadata: 0a name 10 sequence_id
        # 18 publish_time (field number order, as protobuf writes them).
        self._send_head = b"\x08" + uvarint(producer_id) + b"\x10"
        self._metadata_head = name_prefix(producer_name) + _SEQUENCE_ID_TAG
        self._max_size = max_message_size
        self._with_crc = with_checksum
        self._time = -1
        self._time_varint = b""

    def frame(self, sequence_id: int, publish_time: int, payload: bytes) -> bytes | None:
        """The SEND frame, or None: too large for one frame, or a value out of range.

        None sends the caller to the generic path (`build_single`), which judges both.
        """
        try:
            seq = uvarint(sequence_id)
            if publish_time != self._time:
                self._time_varint = _PUBLISH_TIME_TAG + uvarint(publish_time)
                self._time = publish_time
        except OffTheFastLane:
            return None
        metadata = b"".join((self._metadata_head, seq, self._time_varint))
        if len(metadata) + len(payload) > self._max_size:
            return None
        # The entry is its head (metadata size and metadata), then the payload.
        entry_head = _U32.pack(len(metadata)) + metadata
        return _send_frame(self._send_head + seq, entry_head, payload, self._with_crc)


class BatchBuilder:
    """The open batch of a producer: per-message headers and payloads, joined on `build`.

    The futures of a batch's messages are members of one `FutureGroup`, which its receipt
    completes at once.
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._group: FutureGroup[MessageId] = FutureGroup()
        self.count = 0
        self.size = 0
        self.started_at = 0.0
        self._first_seq = 0
        self._publish_time = 0
        self._key: str | None = None
        # `add_plain`'s current run: payloads of `_run_size` bytes with sequence ids whose
        # varints end in `_run_tail` (ids that agree but for their low 7 bits).
        self._run_size = -1
        self._run_high = 0
        self._run_heads: tuple[bytes, ...] = ()
        self._run_tail = b""
        self._other_size = -1  # the last payload size seen outside the run
        # `_plain_frame`'s SEND head and producer name field, for the producer they were made for
        self._heads_of: tuple[int, str] | None = None
        self._heads: tuple[bytes, bytes] = (b"", b"")

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
    ) -> GroupMember[MessageId]:
        """Append one message (after `start` for the first one) and return its future."""
        if not properties and key is None and event_time is None:
            return self.add_plain(payload, sequence_id)
        size = len(payload)
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
        future = GroupMember(self._group, self.count)
        self.count += 1
        self.size += size
        return future

    def add_plain(self, payload: bytes, sequence_id: int) -> GroupMember[MessageId]:
        """`add` for a message without key, properties or event time: the hot path.

        Its header is a cached head picked by the sequence id's low 7 bits, then the varint's
        other bytes, shared by a run of 128 ids of one payload size: a producer sending runs of
        equal-sized payloads writes no varint per message.
        """
        size = len(payload)
        if size == self._run_size and sequence_id >> 7 == self._run_high:
            self._parts += (self._run_heads[sequence_id & 0x7F], self._run_tail, payload)
        else:
            self._add_off_run(payload, size, sequence_id)
        future = GroupMember(self._group, self.count)
        self.count += 1
        self.size += size
        return future

    def _add_off_run(self, payload: bytes, size: int, sequence_id: int) -> None:
        """`add_plain` outside the current run: a new block of ids, or another payload size.

        A new run starts at the run's size or at a size seen twice in a row; payloads whose size
        changes every message keep the per-message header (a run's heads cost ~128 headers).
        """
        if size == self._run_size or size == self._other_size:
            if self._start_run(size, sequence_id):
                self._parts += (self._run_heads[sequence_id & 0x7F], self._run_tail, payload)
                return
        else:
            self._other_size = size
        self._parts += (plain_single_header(size, sequence_id), payload)  # (off lane: the codec)

    def _start_run(self, size: int, sequence_id: int) -> bool:
        """Make `sequence_id` (with `size`-byte payloads) the current run; False if off the lane."""
        if not 0 <= sequence_id <= U64:
            return False
        high = sequence_id >> 7
        tail = uvarint(high) if high else b""
        self._run_heads = _plain_run_heads(size, 1 + len(tail))
        self._run_tail = tail
        self._run_size = size
        self._run_high = high
        return True

    def build(
        self, producer_id: int, producer_name: str, with_checksum: bool = True
    ) -> tuple[int, bytes, FutureGroup[MessageId], int]:
        """Close the batch: its first sequence id, SEND frame, futures' group and message count.

        spec §8.1: `num_messages_in_batch` (present even for one message) marks the entry as a
        batch; the entry metadata takes sequence id, publish time and key from the first message.
        """
        entries = b"".join(self._parts)
        frame = None
        if self._key is None:
            frame = self._plain_frame(producer_id, producer_name, entries, with_checksum)
        if frame is None:
            metadata = c.MessageMetadata(
                producer_name=producer_name,
                sequence_id=self._first_seq,
                publish_time=self._publish_time,
                partition_key=self._key,
                num_messages_in_batch=self.count,
            )
            send = c.Send(
                producer_id=producer_id, sequence_id=self._first_seq, num_messages=self.count
            )
            frame = encode_send_frame(send, encode_record(metadata), entries, with_checksum)
        result = (self._first_seq, frame, self._group, self.count)
        self._parts = []
        self._group = FutureGroup()
        self.count = 0
        self.size = 0
        return result

    def _plain_frame(
        self, producer_id: int, producer_name: str, entries: bytes, with_checksum: bool
    ) -> bytes | None:
        """`build`'s SEND frame for a batch without key, written as `PlainSends` writes one.

        Same bytes as the records' encoding (tests/protocol/client/test_plain_sends.py): the
        metadata is the producer name, sequence id, publish time and `num_messages_in_batch`
        (field 11, present even for one message); the SEND's `num_messages` (field 3) is left
        out when it is 1, its default, as protobuf leaves it. None (a value off the varints'
        range) sends `build` to the records.
        """
        if self._heads_of != (producer_id, producer_name):
            self._heads = (b"\x08" + uvarint(producer_id) + b"\x10", name_prefix(producer_name))
            self._heads_of = (producer_id, producer_name)
        send_head, name = self._heads
        count = self.count
        try:
            seq = uvarint(self._first_seq)
            publish_time = uvarint(self._publish_time)
            messages = uvarint(count)
        except OffTheFastLane:
            return None
        metadata = b"".join(
            (
                name,
                _SEQUENCE_ID_TAG,
                seq,
                _PUBLISH_TIME_TAG,
                publish_time,
                _BATCH_SIZE_TAG,
                messages,
            )
        )
        send = send_head + seq if count == 1 else b"".join((send_head, seq, b"\x18", messages))
        return _send_frame(send, _U32.pack(len(metadata)) + metadata, entries, with_checksum)


def _send_frame(send: bytes, entry_head: bytes, payload: bytes, with_checksum: bool) -> bytes:
    """A SEND frame (spec §2.2) from its encoded `CommandSend` and its entry's two pieces.

    `entry_head` is the metadata's size and the metadata, `payload` what follows them.
    """
    send_size = len(send)  # at most 34 bytes: a one-byte length
    size = 8 + send_size + len(entry_head) + len(payload)
    if with_checksum:
        # The CRC covers the entry: continued over its two pieces rather than joining them.
        crc = checksum(payload, checksum(entry_head))
        section = _CHECKSUM_SECTION.pack(MAGIC_CHECKSUM, crc)
        size += 6
    else:
        section = b""
    return b"".join(
        (
            _U32X2.pack(size, send_size + 4),
            _SEND_TYPE,
            SMALL_VARINTS[send_size],
            send,
            section,
            entry_head,
            payload,
        )
    )
