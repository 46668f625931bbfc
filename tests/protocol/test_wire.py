"""protocol/wire.py: the hand-written hot path agrees with protobuf (spec §1, §6.2, §6.4, §7.3).

Every reader is checked against the generic protobuf path on generated commands and metadata,
on mutations of them and on random bytes: where the fast reader answers, protobuf must accept
the bytes and read the same values; where it gives up, the generic path decides. Writers are
checked against an independent varint encoder and against protobuf itself.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import example, given
from hypothesis import strategies as st

from protocol import codec, wire
from protocol import commands as c
from protocol._pb import pulsar_pb2 as pb
from protocol.codec import decode_command, encode_command, encode_record, peek_metadata
from protocol.errors import RemoteProtocolError
from protocol.framing import build_entry
from protocol.ids import WholeEntryIds
from tests.support.bytestreams import base_command, lfield, varint, vfield
from tests.support.strategies import records

U64_MAX = 2**64 - 1

# ---- helpers ----------------------------------------------------------------------------------


def generic_command(data: bytes) -> c.Command | RemoteProtocolError:
    """What the protobuf path makes of ``data`` (the raw fast lanes switched off)."""
    with mock.patch.dict(codec._RAW_DECODERS, clear=True):
        try:
            return decode_command(data)
        except RemoteProtocolError as exc:
            return exc


def generic_peek(data: bytes) -> Any:
    """What the protobuf path makes of serialized metadata (the fast reader switched off)."""
    with mock.patch.object(wire, "parse_metadata", return_value=None):
        try:
            return tuple(peek_metadata(data))
        except RemoteProtocolError as exc:
            return exc


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[bytes]) -> bytes:
    """Valid bytes with a few bytes changed, cut off, or inserted."""
    data = bytearray(draw(valid))
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["set", "cut", "insert"]))
        where = draw(st.integers(0, len(data)))
        if action == "set" and where < len(data):
            data[where] = draw(st.integers(0, 255))
        elif action == "cut":
            del data[where:]
        else:
            data[where:where] = draw(st.binary(min_size=1, max_size=3))
    return bytes(data)


sends = records(c.Send).map(encode_command)
acks = records(c.Ack).map(encode_command)
metadata = records(c.MessageMetadata).map(encode_record)


# ---- writers ----------------------------------------------------------------------------------


@given(st.integers(0, U64_MAX))
@example(0)
@example(127)
@example(128)
@example(2**14 - 1)
@example(2**14)
@example(2**21 - 1)
@example(2**21)
@example(2**63)
@example(U64_MAX)
def test_uvarint_writes_base_128(value: int) -> None:
    assert wire.uvarint(value) == varint(value)
    assert wire.read_varint(wire.uvarint(value), 0, len(wire.uvarint(value))) == (
        value,
        len(varint(value)),
    )


@pytest.mark.parametrize(
    ("writer", "low", "high"),
    [
        (wire.uvarint, 0, U64_MAX),
        (wire.uint32_varint, 0, 2**32 - 1),
        (wire.int32_varint, -(2**31), 2**31 - 1),
        (wire.int64_varint, -(2**63), 2**63 - 1),
    ],
)
def test_writers_refuse_values_out_of_their_proto_range(writer: Any, low: int, high: int) -> None:
    # spec §1.3: negative int32/int64 take ten bytes (two's complement over 64 bits).
    assert writer(low) == varint(low)
    assert writer(high) == varint(high)
    for value in (low - 1, high + 1):
        with pytest.raises(wire.OffTheFastLane):
            writer(value)


# ---- read_varint ------------------------------------------------------------------------------


@given(st.integers(0, U64_MAX), st.binary(max_size=4))
def test_read_varint_reads_what_protobuf_writes_and_stops_there(value: int, tail: bytes) -> None:
    data = b"\xaa" + varint(value) + tail
    assert wire.read_varint(data, 1, len(data)) == (value, 1 + len(varint(value)))


@given(st.integers(128, U64_MAX))
def test_read_varint_never_reads_past_the_end_it_is_given(value: int) -> None:
    data = varint(value) + b"\x00"  # a terminator right after the allowed range
    for end in range(len(varint(value))):
        with pytest.raises(wire.OffTheFastLane):
            wire.read_varint(data, 0, end)


@pytest.mark.parametrize(
    "data",
    [
        b"\xff" * 9 + b"\x02",  # a tenth byte with bits beyond 64
        b"\x80" * 9 + b"\x00",  # a non-canonical tenth byte
        b"\x80" * 10 + b"\x01",  # eleven bytes
    ],
)
def test_read_varint_leaves_odd_long_forms_to_protobuf(data: bytes) -> None:
    with pytest.raises(wire.OffTheFastLane):
        wire.read_varint(data, 0, len(data))


# ---- SEND -------------------------------------------------------------------------------------


@given(records(c.Send))
def test_parse_send_reads_every_send_protobuf_reads(send: c.Send) -> None:
    data = encode_command(send)
    fast = wire.parse_send(data, 0, len(data))
    if send.num_messages >= 0:  # negative int32s take the generic path
        assert fast == send
    assert fast is None or fast == generic_command(data)


@pytest.mark.parametrize(
    "send",
    [
        c.Send(producer_id=0, sequence_id=0),
        c.Send(producer_id=1, sequence_id=30_000),
        c.Send(producer_id=127, sequence_id=U64_MAX),
        c.Send(producer_id=200, sequence_id=5, num_messages=100),
        c.Send(producer_id=3, sequence_id=7, is_chunk=True),
    ],
)
def test_parse_send_takes_what_the_official_client_writes(send: c.Send) -> None:
    # spec §6.2: producer_id, sequence_id, num_messages for batches, is_chunk for chunks.
    data = b"\x00\x00" + encode_command(send) + b"\xff"  # read in place, inside a buffer
    assert wire.parse_send(data, 2, len(data) - 1) == send


@given(st.one_of(mutated(sends), st.binary(max_size=40).map(lambda b: b"\x08\x06\x32" + b)))
def test_parse_send_never_accepts_what_protobuf_refuses_or_reads_otherwise(data: bytes) -> None:
    fast = wire.parse_send(data, 0, len(data))
    if fast is not None:
        assert fast == generic_command(data)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (vfield(2, 1), "no producer_id (required)"),
        (vfield(1, 1), "no sequence_id (required)"),
        (vfield(1, 1) + vfield(2, 1) + vfield(4, 9), "txnid, not modelled"),
        (vfield(1, 1) + vfield(2, 1) + lfield(9, vfield(1, 1) + vfield(2, 2)), "message_id"),
        (vfield(1, 1) + vfield(2, 1) + vfield(3, 2**31), "int32 out of range"),
        (vfield(1, 1) + vfield(2, 1) + vfield(7, 2), "bool other than 0/1"),
        (vfield(1, 1) + vfield(2, 1) + vfield(99, 1), "unknown field"),
    ],
)
def test_parse_send_leaves_unusual_sends_to_protobuf(body: bytes, why: str) -> None:
    data = base_command(6, body)
    assert wire.parse_send(data, 0, len(data)) is None, why


def test_decode_command_falls_back_when_the_raw_reader_gives_up() -> None:
    send = c.Send(producer_id=1, sequence_id=2)
    gives_up = mock.Mock(return_value=None)
    with mock.patch.dict(codec._RAW_DECODERS, {b"\x08\x06\x32": gives_up}):
        assert decode_command(encode_command(send)) == send  # the protobuf path answered
    gives_up.assert_called_once()


# ---- ACK --------------------------------------------------------------------------------------


@given(records(c.Ack))
def test_parse_ack_reads_every_ack_protobuf_reads(ack: c.Ack) -> None:
    data = encode_command(ack)
    fast = wire.parse_ack(data, 0, len(data))
    assert fast is None or fast == generic_command(data)
    plain = all(
        m.first_chunk_message_id is None and m.ack_set == () for m in ack.message_id
    ) and not (ack.properties)
    if plain and all(m.partition >= -1 and m.batch_index >= -1 for m in ack.message_id):
        assert fast == ack


def test_parse_ack_takes_a_grouped_ack_of_the_official_client() -> None:
    # spec §7.3: up to 1000 ids per ACK; -1 travels as 2^64-1 (§1.3).
    ids = tuple(c.MessageIdData(ledger_id=7, entry_id=e) for e in range(0, 40_000, 40))
    ack = c.Ack(consumer_id=3, ack_type=c.AckType.INDIVIDUAL, message_id=ids)
    data = encode_command(ack)
    assert wire.parse_ack(data, 0, len(data)) == ack
    odd = c.Ack(
        consumer_id=0,
        ack_type=c.AckType.CUMULATIVE,
        message_id=(c.MessageIdData(ledger_id=-1, entry_id=-1, partition=2, batch_index=0),),
        request_id=5,
    )
    data = encode_command(odd)
    assert wire.parse_ack(data, 0, len(data)) == odd


def _grouped_ack(*ids: tuple[int, int, bytes]) -> bytes:
    """An ACK of ``(ledgerId, entryId, extra MessageIdData fields)`` ids, written by hand."""
    message_ids = b"".join(
        lfield(3, vfield(1, ledger) + vfield(2, entry) + extra) for ledger, entry, extra in ids
    )
    return base_command(10, vfield(1, 3) + vfield(2, 0) + message_ids + vfield(8, 9))


@pytest.mark.parametrize(
    "ids",
    [
        # Consecutive entries of one ledger across the entry ids' lengths (1, 2, 3, 4 bytes).
        [(7, e, b"") for e in range(100, 200)],
        [(7, e, b"") for e in range(16_300, 16_500)],
        [(7, e, b"") for e in range(2**21 - 50, 2**21 + 50)],
        [(0, e, b"") for e in (5, 2**63 - 1, 2**64 - 1, 3)],  # ids read signed (-1)
        # Another ledger, or an id of another shape, in the middle of a run.
        [(7, 20_000, b""), (7, 20_001, b""), (8, 20_002, b""), (7, 20_003, b"")],
        [(7, 20_000, b""), (7, 20_001, b""), (7, 20_002, vfield(3, 1)), (7, 20_003, b"")],
        [(7, 20_000, vfield(5, 3)), (7, 20_001, b""), (7, 20_002, b"")],
        [(200, 20_000, b""), (200, 20_001, b"")],  # a two-byte ledger id
        [],
    ],
)
def test_parse_ack_of_whole_entries_reads_what_protobuf_reads(
    ids: list[tuple[int, int, bytes]],
) -> None:
    data = _grouped_ack(*ids)
    fast = wire.parse_ack(data, 0, len(data))
    assert fast is not None
    assert fast == generic_command(data)
    whole = len({ledger for ledger, _, _ in ids}) == 1 and ids[0][0] < 0x80
    whole = whole and all(extra == b"" for _, _, extra in ids)
    # Ids of whole entries of one small ledger stay entry ids; the rest become records.
    assert isinstance(fast.message_id, WholeEntryIds) == whole


@given(mutated(st.just(_grouped_ack(*((7, e, b"") for e in range(16_380, 16_390))))))
def test_parse_ack_of_mutated_whole_entries_never_reads_otherwise(data: bytes) -> None:
    fast = wire.parse_ack(data, 0, len(data))
    if fast is not None:
        assert fast == generic_command(data)


def test_whole_entry_ids_are_the_tuple_of_their_records() -> None:
    ids = WholeEntryIds(7, [1, 2, 3])
    records = tuple(c.MessageIdData(ledger_id=7, entry_id=e) for e in (1, 2, 3))
    assert ids == records
    assert records == ids
    assert hash(ids) == hash(records)
    assert (ids[1], ids[-1], ids[1:]) == (records[1], records[-1], records[1:])
    assert (list(ids), len(ids), repr(ids)) == (list(records), 3, repr(records))
    assert ids == WholeEntryIds(7, [1, 2, 3])
    assert ids != WholeEntryIds(8, [1, 2, 3])
    assert ids != records[:2]


@pytest.mark.parametrize(
    "entry_id",
    [
        *(b"\x00", b"\x7f", b"\x80\x01", b"\xff\x7f", b"\x80\x00", b"\x80\x80\x01"),
        *(b"\xff\xff\x7f", b"\x80\x80\x00", b"\x80\x80\x80\x01", b"\x7f\x7f", b"\x80\x7f\x7f"),
        b"\x80",
    ],
)
def test_parse_ack_reads_a_plain_id_as_protobuf_does(entry_id: bytes) -> None:
    # ledgerId then entryId of one to four bytes, canonical or not, or cut short: the ids an
    # individual ACK carries, read without the generic loop; any other shape is left to protobuf.
    mid = vfield(1, 7) + b"\x10" + entry_id
    data = base_command(10, vfield(1, 3) + vfield(2, 0) + lfield(3, mid))
    fast = wire.parse_ack(data, 0, len(data))
    assert fast is None or fast == generic_command(data)
    if entry_id[-1] < 0x80 and all(b >= 0x80 for b in entry_id[:-1]):
        assert fast == generic_command(data)


@given(st.one_of(mutated(acks), st.binary(max_size=60).map(lambda b: b"\x08\x0a\x52" + b)))
def test_parse_ack_never_accepts_what_protobuf_refuses_or_reads_otherwise(data: bytes) -> None:
    fast = wire.parse_ack(data, 0, len(data))
    if fast is not None:
        assert fast == generic_command(data)


# ---- MessageMetadata --------------------------------------------------------------------------


def test_metadata_tag_table_matches_the_proto() -> None:
    wire_types = {
        FieldDescriptor.TYPE_STRING: 2,
        FieldDescriptor.TYPE_BYTES: 2,
        FieldDescriptor.TYPE_MESSAGE: None,  # left to protobuf, which validates contents
    }
    expected = set()
    for fd in pb.MessageMetadata.DESCRIPTOR.fields:
        wire_type = wire_types.get(fd.type, 0)
        if wire_type is not None:
            expected.add(fd.number << 3 | wire_type)
    assert set(wire.METADATA_TAGS) == expected


@given(records(c.MessageMetadata))
def test_parse_metadata_reads_what_protobuf_reads(meta: c.MessageMetadata) -> None:
    data = encode_record(meta)
    fast = wire.parse_metadata(data, 0, len(data))
    assert fast is None or fast == generic_peek(data)
    if not meta.properties and not meta.encryption_keys:
        assert fast is not None, "plain metadata must take the fast lane"


@pytest.mark.parametrize(
    "meta",
    [
        c.MessageMetadata(producer_name="standalone-0-1", sequence_id=0, publish_time=0),
        c.MessageMetadata(
            producer_name="p",
            sequence_id=30_000,
            publish_time=1_763_770_000_000,
            uncompressed_size=100,
        ),
        c.MessageMetadata(
            producer_name="p",
            sequence_id=1,
            publish_time=2,
            num_messages_in_batch=450,
            partition_key="k\u00e9y",
            ordering_key=b"\x00o",
            deliver_at_time=-5,
            highest_sequence_id=9,
            uuid="u",
            chunk_id=3,
            null_value=True,
        ),
    ],
)
def test_parse_metadata_reads_a_client_entry_in_place(meta: c.MessageMetadata) -> None:
    data = encode_record(meta)
    entry = b"\x00" * 4 + data + b"payload"
    assert wire.parse_metadata(entry, 4, 4 + len(data)) == generic_peek(data)
    assert codec.peek_entry_metadata(build_entry(data, b"payload")) == generic_peek(data)


@given(st.one_of(mutated(metadata), st.binary(max_size=60)))
def test_parse_metadata_never_accepts_what_protobuf_refuses(data: bytes) -> None:
    fast = wire.parse_metadata(data, 0, len(data))
    if fast is not None:
        assert fast == generic_peek(data)


def test_metadata_with_bad_utf8_is_left_to_protobuf() -> None:
    data = lfield(1, b"\xff") + vfield(2, 1) + vfield(3, 1)
    assert wire.parse_metadata(data, 0, len(data)) is None
    assert isinstance(generic_peek(data), RemoteProtocolError)


# ---- FLOW -------------------------------------------------------------------------------------

flows = records(c.Flow).map(encode_command)


@given(records(c.Flow))
def test_parse_flow_reads_every_flow_protobuf_reads(flow: c.Flow) -> None:
    data = encode_command(flow)
    fast = wire.parse_flow(data, 0, len(data))
    assert fast == flow == generic_command(data)


def test_parse_flow_takes_what_the_official_client_writes() -> None:
    # consumer_id, then messagePermits (half the receiver queue): read in place in a chunk.
    body = vfield(1, 3) + vfield(2, 500)
    data = b"junk" + base_command(11, body) + b"more"
    fast = wire.parse_flow(data, 4, len(data) - 4)
    assert fast == c.Flow(consumer_id=3, message_permits=500)
    assert fast == generic_command(data[4:-4])


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (vfield(1, 3), "no messagePermits: protobuf reports the missing field"),
        (vfield(2, 5), "no consumer_id"),
        (vfield(1, 3) + varint(2 << 3) + varint(2**32), "permits past uint32: protobuf cuts"),
        (vfield(1, 3) + vfield(2, 5) + vfield(3, 1), "a field it does not model"),
    ],
)
def test_parse_flow_leaves_unusual_flows_to_protobuf(body: bytes, why: str) -> None:
    data = base_command(11, body)
    assert wire.parse_flow(data, 0, len(data)) is None, why


@given(st.one_of(mutated(flows), st.binary(max_size=30).map(lambda b: b"\x08\x0b\x5a" + b)))
def test_parse_flow_never_accepts_what_protobuf_refuses_or_reads_otherwise(data: bytes) -> None:
    fast = wire.parse_flow(data, 0, len(data))
    if fast is not None:
        assert fast == generic_command(data)
