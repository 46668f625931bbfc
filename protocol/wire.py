"""The protobuf wire format by hand, for the per-message commands (SEND, ACK, metadata).

Why: on the broker's hot path (spec/wire-protocol.md §6.2, §6.4, §7.3) building and walking upb
message objects costs more than the broker's own work per message. The writers here produce
exactly the bytes protobuf writes; the readers parse exactly the shapes the official client
writes and give up, returning ``None``, on anything else: a field they do not model, a nested
message other than a message id, a varint in a non-canonical ten-byte form, a value protobuf
would store differently (an out-of-range enum or int32), a missing required field. The caller
(``protocol.codec``) then takes the generic protobuf path, which judges the bytes. So a fast
reader never accepts what protobuf refuses nor reads a value protobuf would read differently;
tests/protocol/test_wire.py compares both on generated, mutated and random input.

Nothing here touches protobuf objects: ``codec`` stays the only module that does (STYLE.md §2).
Readers take ``(buf, start, end)`` so that they parse in place inside a received chunk or a
stored entry, without slicing copies.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Final, NamedTuple

from protocol import commands as c
from protocol.ids import WholeEntryIds

__all__ = [
    "CLIENT_METADATA_TAGS",
    "CONTINUED_BYTES",
    "SMALL_VARINTS",
    "MetadataFields",
    "MetadataPeek",
    "OffTheFastLane",
    "int32_varint",
    "int64_varint",
    "parse_ack",
    "parse_flow",
    "parse_message",
    "parse_metadata",
    "parse_send",
    "parse_send_receipt",
    "read_varint",
    "uint32_varint",
    "uvarint",
]

U64: Final = (1 << 64) - 1
_I64_LIMIT: Final = 1 << 63
_I32_MAX: Final = (1 << 31) - 1
_I32_NEGATIVE_FLOOR: Final = (1 << 64) - (1 << 31)  # -2^31 as a ten-byte uint64 varint

SMALL_VARINTS: Final = tuple(bytes((i,)) for i in range(128))
"""The one-byte varints, 0..127: most ids, sizes and counts on the hot path."""

CONTINUED_BYTES: Final = tuple(bytes((i | 0x80,)) for i in range(128))
"""A varint's non-final bytes by their 7 value bits: ``uvarint(v)`` for ``v >= 128`` starts
with ``CONTINUED_BYTES[v & 0x7F]`` and goes on with ``uvarint(v >> 7)``."""

_VARINT_LENGTHS: Final = tuple(max(1, (bits + 6) // 7) for bits in range(65))  # by bit_length
_CONTINUATION_MARKS: Final = tuple(
    sum(0x80 << 8 * i for i in range(length - 1)) for length in range(9)
)  # the high bit of every byte but the last, for varints of 0..8 bytes
_SPREAD_LIMIT: Final = 1 << 56  # what `uvarint` spreads in one go: 8 groups of 7 bits


class OffTheFastLane(Exception):
    """A value or a shape the hand-written path does not handle: take the generic path."""


# ---- writers --------------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    """A ``uint64`` varint.

    Raises:
        OffTheFastLane: ``value`` is outside ``0 .. 2^64-1`` (protobuf refuses it).
    """
    # Ids, sequence ids and sizes below 2^21 (one to three bytes) are joined from per-byte
    # tables; longer values (publish times in ms take six bytes) have their 7-bit groups moved
    # to byte lanes with a few mask-and-shift steps, then are written with one to_bytes.
    if value < 0x80:
        if value >= 0:
            return SMALL_VARINTS[value]
        raise OffTheFastLane
    if value < 0x4000:
        return CONTINUED_BYTES[value & 0x7F] + SMALL_VARINTS[value >> 7]
    if value < 0x200000:
        return (
            CONTINUED_BYTES[value & 0x7F]
            + CONTINUED_BYTES[value >> 7 & 0x7F]
            + SMALL_VARINTS[value >> 14]
        )
    if value < _SPREAD_LIMIT:
        length = _VARINT_LENGTHS[value.bit_length()]
        # 56 bits -> two 28-bit groups in 32-bit lanes -> four 14-bit groups in 16-bit lanes ->
        # eight 7-bit groups in 8-bit lanes.
        value = (value & 0xFFFFFFF) | (value & 0xFFFFFFF0000000) << 4
        value = (value & 0x3FFF00003FFF) | (value & 0xFFFC0000FFFC000) << 2
        value = (value & 0x7F007F007F007F) | (value & 0x3F803F803F803F80) << 1
        return (value | _CONTINUATION_MARKS[length]).to_bytes(length, "little")
    if value > U64:
        raise OffTheFastLane
    spread = 0  # nine or ten bytes (negative int64s are ten): byte by byte
    shift = 0
    while value > 0x7F:
        spread |= ((value & 0x7F) | 0x80) << shift
        value >>= 7
        shift += 8
    return (spread | value << shift).to_bytes(shift // 8 + 1, "little")


def uint32_varint(value: int) -> bytes:
    """A ``uint32`` varint.

    Raises:
        OffTheFastLane: ``value`` is outside ``0 .. 2^32-1``.
    """
    if 0 <= value <= 0xFFFFFFFF:
        return uvarint(value)
    raise OffTheFastLane


def int32_varint(value: int) -> bytes:
    """An ``int32`` varint: negative values take ten bytes (two's complement over 64 bits).

    Raises:
        OffTheFastLane: ``value`` is outside the int32 range.
    """
    if 0 <= value <= _I32_MAX:
        return uvarint(value)
    if -(1 << 31) <= value < 0:
        return uvarint(value & U64)
    raise OffTheFastLane


def int64_varint(value: int) -> bytes:
    """An ``int64`` varint (negative values take ten bytes).

    Raises:
        OffTheFastLane: ``value`` is outside the int64 range.
    """
    if 0 <= value < _I64_LIMIT:
        return uvarint(value)
    if -_I64_LIMIT <= value < 0:
        return uvarint(value & U64)
    raise OffTheFastLane


# ---- readers --------------------------------------------------------------------------------


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` (not reading at or past ``end``) and the position after it.

    Raises:
        OffTheFastLane: truncated, or longer than ten bytes, or a tenth byte other than ``0x01``
            (the only tenth byte a canonical uint64 has; protobuf decides about the others).
    """
    if pos + 2 < end:  # up to three bytes unrolled: ids, sequence ids and sizes below 2^21
        b0 = buf[pos]
        if b0 < 0x80:
            return b0, pos + 1
        b1 = buf[pos + 1]
        if b1 < 0x80:
            return (b0 & 0x7F) | b1 << 7, pos + 2
        b2 = buf[pos + 2]
        if b2 < 0x80:
            return (b0 & 0x7F) | (b1 & 0x7F) << 7 | b2 << 14, pos + 3
        low = (b0 & 0x7F) | (b1 & 0x7F) << 7 | (b2 & 0x7F) << 14
        if pos + 5 < end:  # the next three unrolled too: publish times in ms take six bytes
            b3 = buf[pos + 3]
            if b3 < 0x80:
                return low | b3 << 21, pos + 4
            b4 = buf[pos + 4]
            if b4 < 0x80:
                return low | ((b3 & 0x7F) | b4 << 7) << 21, pos + 5
            b5 = buf[pos + 5]
            if b5 < 0x80:  # (the high part is put together as a small int, then shifted once)
                return low | ((b3 & 0x7F) | (b4 & 0x7F) << 7 | b5 << 14) << 21, pos + 6
        result = low  # the loop goes on from the fourth byte
        shift = 21
        pos += 3
    else:
        result = 0
        shift = 0
    while pos < end:
        byte = buf[pos]
        pos += 1
        if shift == 63:
            if byte != 1:
                break
            return result | _I64_LIMIT, pos
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
    raise OffTheFastLane


def _int32(value: int) -> int:
    """A varint read for an ``int32`` field, in the forms an encoder writes."""
    if value <= _I32_MAX:
        return value
    if value >= _I32_NEGATIVE_FLOOR:
        return value - (1 << 64)
    raise OffTheFastLane  # a truncating cast in protobuf: let it decide


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= _I64_LIMIT else value


# ---- SEND (spec §6.2) -----------------------------------------------------------------------

_SEND_PREFIX: Final = b"\x08\x06\x32"  # BaseCommand.type = SEND, then field 6 (send)


def parse_send(buf: bytes, start: int, end: int) -> c.Send | None:
    """``BaseCommand`` bytes ``buf[start:end]`` as a SEND, or None when off the fast lane."""
    if not buf.startswith(_SEND_PREFIX, start):
        return None
    if (
        8 <= end - start < 132
        and buf[start + 3] == end - start - 4
        and buf[start + 4] == 0x08
        and buf[start + 5] < 0x80
        and buf[start + 6] == 0x10
    ):
        # What the official client writes for an unbatched message: a one-byte size, then a
        # small producer_id and the sequence_id, nothing else.
        size = end - start - 7
        b0 = buf[start + 7]
        if size == 1 and b0 < 0x80:
            return c.Send(producer_id=buf[start + 5], sequence_id=b0)
        if size == 2 and b0 >= 0x80 and (b1 := buf[start + 8]) < 0x80:
            return c.Send(producer_id=buf[start + 5], sequence_id=(b0 & 0x7F) | b1 << 7)
        if size == 3 and b0 >= 0x80 and (b1 := buf[start + 8]) >= 0x80 and buf[end - 1] < 0x80:
            sequence_id = (b0 & 0x7F) | (b1 & 0x7F) << 7 | buf[end - 1] << 14
            return c.Send(producer_id=buf[start + 5], sequence_id=sequence_id)
        try:
            sequence_id, pos = read_varint(buf, start + 7, end)
        except OffTheFastLane:
            return None
        if pos == end:
            return c.Send(producer_id=buf[start + 5], sequence_id=sequence_id)
    try:
        size, pos = read_varint(buf, start + 3, end)
        if pos + size != end:
            return None
        producer_id = sequence_id = -1
        num_messages = 1
        highest_sequence_id = 0
        is_chunk = marker = False
        while pos < end:
            tag = buf[pos]
            pos += 1
            if pos < end and (value := buf[pos]) < 0x80:
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            if tag == 0x08:
                producer_id = value
            elif tag == 0x10:
                sequence_id = value
            elif tag == 0x18:
                num_messages = _int32(value)
            elif tag == 0x30:
                highest_sequence_id = value
            elif tag == 0x38 and value <= 1:
                is_chunk = value == 1
            elif tag == 0x40 and value <= 1:
                marker = value == 1
            else:
                return None  # txnid, message_id, other wire types, fields we do not know
    except OffTheFastLane:
        return None
    if producer_id < 0 or sequence_id < 0:
        return None  # a required field is missing: protobuf reports it
    return c.Send(
        producer_id=producer_id,
        sequence_id=sequence_id,
        num_messages=num_messages,
        highest_sequence_id=highest_sequence_id,
        is_chunk=is_chunk,
        marker=marker,
    )


# ---- ACK (spec §7.3) ------------------------------------------------------------------------

_ACK_PREFIX: Final = b"\x08\x0a\x52"  # BaseCommand.type = ACK, then field 10 (ack)
_ACK_TYPES: Final = (c.AckType.INDIVIDUAL, c.AckType.CUMULATIVE)
_VALIDATION_ERRORS: Final = 5  # CommandAck.ValidationError is a closed enum of 0..4


def _parse_message_id(buf: bytes, pos: int, end: int) -> c.MessageIdData | None:
    ledger_id = entry_id = -1
    partition = batch_index = -1
    batch_size: int | None = None
    ack_set: list[int] = []
    while pos < end:
        tag = buf[pos]
        pos += 1
        if pos < end and (value := buf[pos]) < 0x80:  # one-byte values: most small ids
            pos += 1
        else:
            value, pos = read_varint(buf, pos, end)
        if tag == 0x08:
            ledger_id = value
        elif tag == 0x10:
            entry_id = value
        elif tag == 0x18:
            partition = _int32(value)
        elif tag == 0x20:
            batch_index = _int32(value)
        elif tag == 0x28:
            ack_set.append(_signed64(value))
        elif tag == 0x30:
            batch_size = _int32(value)
        else:
            return None  # packed ack_set, first_chunk_message_id, unknown fields
    if ledger_id < 0 or entry_id < 0:
        return None
    # uint64 on the wire, signed in records (spec §1.3), inline: this runs once per acked id.
    if ledger_id >= _I64_LIMIT:
        ledger_id -= 1 << 64
    if entry_id >= _I64_LIMIT:
        entry_id -= 1 << 64
    if partition == -1 and batch_index == -1 and batch_size is None and not ack_set:
        return c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id)
    return c.MessageIdData(
        ledger_id=ledger_id,
        entry_id=entry_id,
        partition=partition,
        batch_index=batch_index,
        ack_set=tuple(ack_set),
        batch_size=batch_size,
    )


_U64: Final = struct.Struct(">Q")


def _more_entry_ids(buf: bytes, pos: int, end: int, ledger_id: int, entry_ids: list[int]) -> int:
    """Read on the ids of whole entries of ``ledger_id`` from ``pos``; where the first other is.

    A grouped ACK names up to 1,000 consecutive entries, whose ids are ``1a 04 08 ledgerId 10
    e0`` to ``1a 06 08 ledgerId 10 e0 e1 e2`` (entry ids of one to three bytes, canonical or
    not): each is read as one u64 and checked with two comparisons.
    Anything else (another ledger, other lengths, the last id before ``end``) is left to the
    caller's loop.
    """
    one = 0x1A0408 << 16 | ledger_id << 8 | 0x10  # the id's first five bytes
    two = 0x1A0508 << 16 | ledger_id << 8 | 0x10
    three = 0x1A0608 << 16 | ledger_id << 8 | 0x10
    read = _U64.unpack_from
    append = entry_ids.append
    while pos + 8 <= end:
        word = read(buf, pos)[0]
        top = word >> 24
        if top == three and word & 0x808080 == 0x808000:
            append((word >> 16 & 0x7F) | (word >> 1 & 0x3F80) | (word & 0x7F) << 14)
            pos += 8
        elif top == two and word & 0x808000 == 0x800000:
            append((word >> 16 & 0x7F) | (word >> 1 & 0x3F80))
            pos += 7
        elif top == one and word & 0x800000 == 0:
            append(word >> 16 & 0x7F)
            pos += 6
        else:
            break
    return pos


def _id_records(ledger_id: int, entry_ids: list[int]) -> list[c.MessageIdData]:
    return [c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id) for entry_id in entry_ids]


def parse_ack(buf: bytes, start: int, end: int) -> c.Ack | None:
    """``BaseCommand`` bytes ``buf[start:end]`` as an ACK, or None when off the fast lane."""
    if not buf.startswith(_ACK_PREFIX, start):
        return None
    try:
        size, pos = read_varint(buf, start + 3, end)
        if pos + size != end:
            return None
        consumer_id = ack_type = -1
        ids: list[c.MessageIdData] = []
        # Ids of whole entries of one small ledger, what clients group, are kept as entry ids
        # (``WholeEntryIds``) until an id of another shape or ledger turns them into records.
        entry_ids: list[int] | None = []
        run_ledger = -1
        validation_error: int | None = None
        request_id: int | None = None
        while pos < end:
            tag = buf[pos]
            pos += 1
            if pos < end and (value := buf[pos]) < 0x80:
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            if tag == 0x1A:  # message_id: value is its length
                stop = pos + value
                if stop > end:
                    return None
                if (
                    stop - pos > 3
                    and buf[pos] == 0x08
                    and buf[pos + 1] < 0x80
                    and buf[pos + 2] == 0x10
                    and buf[stop - 1] < 0x80
                ):
                    # What clients write for a whole entry: a small ledgerId, then entryId and
                    # nothing else (one id per acknowledged message: read without the loop, an
                    # entryId of up to three bytes without a call).
                    size = stop - pos - 3
                    b0 = buf[pos + 3]
                    if size == 1:
                        entry_id, after = b0, stop
                    elif size == 2 and b0 >= 0x80:
                        entry_id, after = (b0 & 0x7F) | buf[pos + 4] << 7, stop
                    elif size == 3 and b0 >= 0x80 and (b1 := buf[pos + 4]) >= 0x80:
                        entry_id = (b0 & 0x7F) | (b1 & 0x7F) << 7 | buf[pos + 5] << 14
                        after = stop
                    else:
                        entry_id, after = read_varint(buf, pos + 3, stop)
                    if after == stop:
                        if entry_id >= _I64_LIMIT:
                            entry_id -= 1 << 64
                        ledger_id = buf[pos + 1]
                        pos = stop
                        if entry_ids is not None:
                            if not entry_ids:
                                run_ledger = ledger_id
                            if ledger_id == run_ledger:
                                entry_ids.append(entry_id)
                                pos = _more_entry_ids(buf, pos, end, ledger_id, entry_ids)
                                continue
                            ids = _id_records(run_ledger, entry_ids)
                            entry_ids = None
                        ids.append(c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id))
                        continue
                mid = _parse_message_id(buf, pos, stop)
                if mid is None:
                    return None
                if entry_ids is not None:
                    ids = _id_records(run_ledger, entry_ids)
                    entry_ids = None
                ids.append(mid)
                pos = stop
            elif tag == 0x08:
                consumer_id = value
            elif tag == 0x10 and value <= 1:
                ack_type = value
            elif tag == 0x20 and value < _VALIDATION_ERRORS:
                validation_error = value
            elif tag == 0x40:
                request_id = value
            else:
                return None  # properties, txnid, enum values protobuf keeps as unknown, ...
    except OffTheFastLane:
        return None
    if consumer_id < 0 or ack_type < 0:
        return None
    return c.Ack(
        consumer_id=consumer_id,
        ack_type=_ACK_TYPES[ack_type],
        # A WholeEntryIds equals and hashes as the tuple of its records.
        message_id=WholeEntryIds(run_ledger, entry_ids) if entry_ids else tuple(ids),
        validation_error=validation_error,
        request_id=request_id,
    )


# ---- FLOW (spec §7.2) -----------------------------------------------------------------------

_FLOW_PREFIX: Final = b"\x08\x0b\x5a"  # BaseCommand.type = FLOW, then field 11 (flow)


def parse_flow(buf: bytes, start: int, end: int) -> c.Flow | None:
    """``BaseCommand`` bytes ``buf[start:end]`` as a FLOW, or None when off the fast lane.

    A consumer that keeps up sends one every half receiver queue (one per ~3 entries of a
    batched producer of 100 B messages); the generic path costs it a protobuf parse.
    """
    if not buf.startswith(_FLOW_PREFIX, start):
        return None
    try:
        size, pos = read_varint(buf, start + 3, end)
        if pos + size != end:
            return None
        consumer_id = permits = -1
        while pos < end:
            tag = buf[pos]
            value, pos = read_varint(buf, pos + 1, end)
            if tag == 0x08:
                consumer_id = value
            elif tag == 0x10 and value <= _U32_MAX:  # messagePermits: uint32
                permits = value
            else:
                return None
    except OffTheFastLane:
        return None
    if consumer_id < 0 or permits < 0:
        return None  # a required field is missing: protobuf says so
    return c.Flow(consumer_id=consumer_id, message_permits=permits)


# ---- SEND_RECEIPT (spec §6.2), for the client -------------------------------------------------

_SEND_RECEIPT_PREFIX: Final = b"\x08\x07\x3a"  # BaseCommand.type = SEND_RECEIPT, then field 7


def parse_send_receipt(buf: bytes, start: int, end: int) -> c.SendReceipt | None:
    """``BaseCommand`` bytes ``buf[start:end]`` as a SEND_RECEIPT, or None when off the fast lane.

    Brokers write producer_id, sequence_id and a ``(ledgerId, entryId)`` message id
    (``codec.encode_send_receipt``); a repeated message id (protobuf merges the two) or anything
    unmodelled goes to protobuf.
    """
    if not buf.startswith(_SEND_RECEIPT_PREFIX, start):
        return None
    try:
        if (
            8 <= end - start < 132
            and buf[start + 3] == end - start - 4  # a one-byte length spanning the command
            and buf[start + 4] == 0x08
            and buf[start + 5] < 0x80
            and buf[start + 6] == 0x10
        ):
            # What the broker writes (`codec.encode_send_receipt`): a small producer_id, the
            # sequence_id, then the id's ledgerId and entryId, nothing else; read straight on.
            sequence_id, pos = read_varint(buf, start + 7, end)
            if (
                pos + 3 < end
                and buf[pos] == 0x1A
                and buf[pos + 1] == end - pos - 2
                and buf[pos + 2] == 0x08
            ):
                ledger_id, pos = read_varint(buf, pos + 3, end)
                if pos < end and buf[pos] == 0x10:
                    entry_id, pos = read_varint(buf, pos + 1, end)
                    if pos == end and ledger_id < _I64_LIMIT and entry_id < _I64_LIMIT:
                        return c.SendReceipt(  # (negative ids: read signed by the loop below)
                            producer_id=buf[start + 5],
                            sequence_id=sequence_id,
                            message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id),
                        )
        size, pos = read_varint(buf, start + 3, end)
        if pos + size != end:
            return None
        producer_id = sequence_id = -1
        highest_sequence_id = 0
        message_id: c.MessageIdData | None = None
        while pos < end:
            tag = buf[pos]
            pos += 1
            if pos < end and (value := buf[pos]) < 0x80:
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            if tag == 0x08:
                producer_id = value
            elif tag == 0x10:
                sequence_id = value
            elif tag == 0x1A and message_id is None:  # value is its length
                stop = pos + value
                if stop > end:
                    return None
                message_id = _parse_message_id(buf, pos, stop)
                if message_id is None:
                    return None
                pos = stop
            elif tag == 0x20:
                highest_sequence_id = value
            else:
                return None  # a second message id, other wire types, fields we do not know
    except OffTheFastLane:
        return None
    if producer_id < 0 or sequence_id < 0:
        return None  # a required field is missing: protobuf reports it
    return c.SendReceipt(
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=message_id,
        highest_sequence_id=highest_sequence_id,
    )


# ---- MessageMetadata (spec §6.4) ------------------------------------------------------------


MetadataFields = tuple[str, int, int, "int | None", "str | None", "bytes | None", "int | None"]
"""``MetadataPeek``'s fields as a plain tuple: what the hot path builds (a named tuple costs
several times more to create)."""


class MetadataPeek(NamedTuple):
    """The ``MessageMetadata`` fields a broker reads from each published entry (spec §6.4)."""

    producer_name: str
    sequence_id: int
    publish_time: int
    num_messages_in_batch: int | None  # None = not a batch (presence is what counts, §8.2)
    partition_key: str | None
    ordering_key: bytes | None
    deliver_at_time: int | None


# Full tag (field number << 3 | wire type) -> what to do with the value. Wire types follow
# protocol/pulsar.proto (a test checks this table against the descriptor). Message-typed fields
# (properties 4, encryption_keys 13) are absent on purpose: protobuf validates their contents,
# so an entry that has them takes the generic path.
_SKIP, _NAME, _SEQ, _TIME, _BATCH, _PKEY, _OKEY, _DELIVER = range(8)
_VARINT_FIELDS: Final = {2: _SEQ, 3: _TIME, 8: _SKIP, 9: _SKIP, 11: _BATCH, 12: _SKIP, 17: _SKIP}
_VARINT_FIELDS.update({19: _DELIVER, 20: _SKIP, 22: _SKIP, 23: _SKIP, 24: _SKIP, 25: _SKIP})
_VARINT_FIELDS.update({27: _SKIP, 28: _SKIP, 29: _SKIP, 30: _SKIP})
_BYTES_FIELDS: Final = {1: _NAME, 5: _SKIP, 6: _PKEY, 7: _SKIP, 14: _SKIP, 15: _SKIP}
_BYTES_FIELDS.update({16: _SKIP, 18: _OKEY, 26: _SKIP})
METADATA_TAGS: Final = {number << 3: action for number, action in _VARINT_FIELDS.items()} | {
    number << 3 | 2: action for number, action in _BYTES_FIELDS.items()
}


def parse_metadata(
    buf: bytes, start: int, end: int, tags: Mapping[int, int] = METADATA_TAGS
) -> MetadataFields | None:
    """The ``MessageMetadata`` in ``buf[start:end]`` as ``MetadataPeek`` fields, or None.

    ``tags`` are the fields allowed on the fast lane (a subset of ``METADATA_TAGS``); any other
    field gives None. The client passes ``CLIENT_METADATA_TAGS``.
    """
    name: str | None = None
    sequence_id = publish_time = -1
    batch: int | None = None
    partition_key: str | None = None
    ordering_key: bytes | None = None
    deliver_at: int | None = None
    pos = start
    try:
        # What every client writes first (field number order): producer_name, sequence_id and
        # publish_time, read without the table; whatever follows goes through the loop.
        if end - pos > 2 and buf[pos] == 0x0A and (size := buf[pos + 1]) < 0x80:
            pos += 2 + size
            if pos > end:
                return None
            name = buf[pos - size : pos].decode()
            if pos < end and buf[pos] == 0x10:
                sequence_id, pos = read_varint(buf, pos + 1, end)
                if pos < end and buf[pos] == 0x18:
                    publish_time, pos = read_varint(buf, pos + 1, end)
        while pos < end:
            tag = buf[pos]
            if tag < 0x80:
                pos += 1
            else:
                tag, pos = read_varint(buf, pos, end)
            action = tags.get(tag)
            if action is None:
                return None
            if pos < end and (value := buf[pos]) < 0x80:
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            if tag & 7:  # length-delimited: value is the length
                stop = pos + value
                if stop > end:
                    return None
                if action == _NAME:
                    name = buf[pos:stop].decode()
                elif action == _PKEY:
                    partition_key = buf[pos:stop].decode()
                elif action == _OKEY:
                    ordering_key = buf[pos:stop]
                pos = stop
            elif action == _SEQ:
                sequence_id = value
            elif action == _TIME:
                publish_time = value
            elif action == _BATCH:
                batch = _int32(value)
            elif action == _DELIVER:
                deliver_at = _signed64(value)
    except (OffTheFastLane, UnicodeDecodeError):
        return None
    if name is None or sequence_id < 0 or publish_time < 0:
        return None  # required fields missing: protobuf reports it
    return name, sequence_id, publish_time, batch, partition_key, ordering_key, deliver_at


# ---- SingleMessageMetadata, for the client's batch splitting (spec §8.2) ----------------------

# The varint fields of SingleMessageMetadata (protocol/pulsar.proto): payload_size 3,
# compacted_out 4, event_time 5, partition_key_b64_encoded 6, sequence_id 8, null_value 9,
# null_partition_key 10. Length-delimited fields (properties, partition_key, ordering_key) are
# left to protobuf, which validates them; so is anything unknown.
_SINGLE_VARINT_TAGS: Final = frozenset(number << 3 for number in (3, 4, 5, 6, 8, 9, 10))
_SINGLE_PAYLOAD_SIZE_TAG: Final = 3 << 3
_SINGLE_COMPACTED_OUT_TAG: Final = 4 << 3


def scan_single_metadata(buf: bytes, start: int, end: int) -> tuple[int, bool] | None:
    """``(payload_size, compacted_out)`` of the ``SingleMessageMetadata`` in ``buf[start:end]``.

    Only headers made of varint fields are read (what a producer writes for a message without
    key or properties); anything else, or a value protobuf would read differently, gives None
    and the caller decodes the header with ``protocol.codec``. When this returns a value,
    ``decode_record`` accepts the same bytes and reads the same two fields
    (tests/protocol/test_wire_client.py).
    """
    tags = _SINGLE_VARINT_TAGS
    payload_size: int | None = None
    compacted_out = False
    pos = start
    try:
        while pos < end:
            tag = buf[pos]
            if tag not in tags:  # also every multi-byte tag (none of ours needs two bytes)
                return None
            pos += 1
            if pos < end and (value := buf[pos]) < 0x80:
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            if tag == _SINGLE_PAYLOAD_SIZE_TAG:
                payload_size = _int32(value)
            elif tag == _SINGLE_COMPACTED_OUT_TAG:
                compacted_out = value != 0
    except OffTheFastLane:
        return None
    if payload_size is None:
        return None  # required field missing: protobuf reports it
    return payload_size, compacted_out


# ---- MESSAGE and its metadata, for the client (spec §7.2) -------------------------------------

_MESSAGE_PREFIX: Final = b"\x08\x09\x4a"  # BaseCommand.type = MESSAGE, then field 9 (message)
_U32_MAX: Final = 0xFFFFFFFF


def parse_message(buf: bytes, start: int, end: int) -> c.Message | None:
    """``BaseCommand`` bytes ``buf[start:end]`` as a MESSAGE, or None when off the fast lane.

    Brokers write consumer_id, a ``(ledgerId, entryId[, partition])`` message id, then
    redelivery_count and unpacked ack_set words when there are any (``codec.encode_message``).
    A repeated message id (protobuf merges the two), a redelivery count protobuf would truncate,
    a packed ack_set or anything unmodelled goes to protobuf.
    """
    if not buf.startswith(_MESSAGE_PREFIX, start):
        return None
    if 12 <= end - start < 132:
        first = _first_delivery(buf, start, end)
        if first is not None:
            return first
    try:
        size, pos = read_varint(buf, start + 3, end)
        if pos + size != end:
            return None
        consumer_id = -1
        message_id: c.MessageIdData | None = None
        redelivery_count = 0
        ack_set: list[int] = []
        consumer_epoch: int | None = None
        while pos < end:
            tag = buf[pos]
            pos += 1
            if pos < end and (value := buf[pos]) < 0x80:
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            if tag == 0x12 and message_id is None:  # value is its length
                stop = pos + value
                if stop > end:
                    return None
                message_id = _parse_message_id(buf, pos, stop)
                if message_id is None:
                    return None
                pos = stop
            elif tag == 0x08:
                consumer_id = value
            elif tag == 0x18 and value <= _U32_MAX:
                redelivery_count = value
            elif tag == 0x20:
                ack_set.append(_signed64(value))
            elif tag == 0x28:
                consumer_epoch = value
            else:
                return None  # a second message id, packed ack_set, fields we do not know
    except OffTheFastLane:
        return None
    if consumer_id < 0 or message_id is None:
        return None  # a required field is missing: protobuf reports it
    return c.Message(
        consumer_id=consumer_id,
        message_id=message_id,
        redelivery_count=redelivery_count,
        ack_set=tuple(ack_set),
        consumer_epoch=consumer_epoch,
    )


# | length | 08 consumer_id | 12 length | 08 ledgerId | 10 |: a MESSAGE command after its prefix,
# up to its entry id, read as one u64 and checked with one comparison: the tags and lengths must
# be these and the consumer and ledger ids below 0x80 (one-byte varints).
_FIRST_DELIVERY_HEAD: Final = struct.Struct(">Q")
_FIRST_DELIVERY_MASK: Final = 0xFF_FF_80_FF_FF_FF_80_FF
_FIRST_DELIVERY_TAGS: Final = 0x00_08_00_12_00_08_00_10


def _first_delivery(buf: bytes, start: int, end: int) -> c.Message | None:
    """``parse_message`` of our broker's first delivery on a non-partitioned topic, or None.

    The shape ``framing.encode_message_head`` writes for it: one-byte length, consumer id and
    ledger id, then the entry id ending the command. The caller checked 12 <= end - start < 132.
    """
    head = _FIRST_DELIVERY_HEAD.unpack_from(buf, start + 3)[0]
    size = end - start
    if head & _FIRST_DELIVERY_MASK != (size - 4) << 56 | (size - 8) << 24 | _FIRST_DELIVERY_TAGS:
        return None
    consumer_id = head >> 40 & 0x7F
    ledger_id = head >> 8 & 0x7F
    pos = start + 11
    entry_id = buf[pos]  # varints of one and two bytes inline, as `parse_send` does
    if entry_id < 0x80:
        pos += 1
    elif pos + 1 < end and (b1 := buf[pos + 1]) < 0x80:
        entry_id = (entry_id & 0x7F) | b1 << 7
        pos += 2
    else:
        try:
            entry_id, pos = read_varint(buf, pos, end)
        except OffTheFastLane:
            return None
    if pos != end or entry_id >= _I64_LIMIT:
        return None  # more fields, or an id read signed: the loop decides
    return c.Message(
        consumer_id=consumer_id, message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id)
    )


# The MessageMetadata fields a consumer may meet on its fast lane (``parse_metadata(...,
# CLIENT_METADATA_TAGS)``): those of ``METADATA_TAGS`` without compression (8), whose entries
# the consumer refuses, the chunk fields (uuid 26, num_chunks_from_msg 27, total_chunk_msg_size
# 28, chunk_id 29), which chunk assembly reads from the full record, and the skipped string
# fields (replicated_from 5, replicate_to 7, encryption_algo 14), whose UTF-8 ``decode_record``
# checks. So an entry this accepts decodes with ``decode_record`` later, when a message's
# application asks for the full record (tests/protocol/test_wire_message.py).
_CLIENT_OFF_LANE: Final = {8 << 3, 27 << 3, 28 << 3, 29 << 3} | {
    number << 3 | 2 for number in (5, 7, 14, 26)
}
CLIENT_METADATA_TAGS: Final = {
    tag: action for tag, action in METADATA_TAGS.items() if tag not in _CLIENT_OFF_LANE
}
