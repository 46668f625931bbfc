"""protocol/wire.py, the consumer's readers: MESSAGE and the client's metadata lane (spec §7.2).

Like tests/protocol/test_wire.py: where ``parse_message`` answers, protobuf must accept the
bytes and read the same command; and where ``parse_metadata`` with ``CLIENT_METADATA_TAGS``
answers, ``decode_record`` (which the consumer runs later, lazily) must accept the metadata and
read the same fields, on generated, mutated and random input.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from protocol import codec, wire
from protocol import commands as c
from protocol.codec import decode_command, decode_record, encode_message, encode_record
from protocol.errors import RemoteProtocolError
from tests.protocol.test_wire import generic_command, mutated
from tests.support.bytestreams import base_command, lfield, varint, vfield
from tests.support.strategies import records

U64_MAX = 2**64 - 1
I64 = st.integers(-(2**63), 2**63 - 1)

messages = records(c.Message).map(codec.encode_command)


def parse(data: bytes) -> c.Message | None:
    return wire.parse_message(data, 0, len(data))


# ---- MESSAGE ----------------------------------------------------------------------------------


def test_parse_message_is_the_raw_decoder_of_message() -> None:
    assert codec._RAW_DECODERS[b"\x08\x09\x4a"] is wire.parse_message


@given(records(c.Message))
def test_parse_message_reads_every_message_protobuf_reads(message: c.Message) -> None:
    data = codec.encode_command(message)
    fast = parse(data)
    assert fast is None or fast == generic_command(data)
    if message.message_id.first_chunk_message_id is None:
        assert fast == message


@given(
    consumer_id=st.integers(0, U64_MAX),
    ledger_id=I64,
    entry_id=I64,
    partition=st.integers(-(2**31), 2**31 - 1),
    redelivery_count=st.integers(0, 2**32 - 1),
    ack_set=st.lists(I64, max_size=5).map(tuple),
)
@example(consumer_id=0, ledger_id=0, entry_id=0, partition=-1, redelivery_count=0, ack_set=())
@example(consumer_id=3, ledger_id=-1, entry_id=-1, partition=7, redelivery_count=2, ack_set=(-1,))
def test_parse_message_reads_what_the_broker_writes(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: tuple[int, ...],
) -> None:
    data = encode_message(consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set)
    expected = c.Message(
        consumer_id=consumer_id,
        message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id, partition=partition),
        redelivery_count=redelivery_count,
        ack_set=ack_set,
    )
    assert parse(data) == expected
    framed = b"\x00\x01" + data + b"\xff"  # read in place, inside a buffer
    assert wire.parse_message(framed, 2, len(framed) - 1) == expected
    assert decode_command(data) == expected


@given(st.one_of(mutated(messages), st.binary(max_size=60).map(lambda b: b"\x08\x09\x4a" + b)))
def test_parse_message_never_accepts_what_protobuf_refuses_or_reads_otherwise(data: bytes) -> None:
    fast = parse(data)
    if fast is not None:
        assert fast == generic_command(data)


# What our broker writes for a first delivery on a non-partitioned topic, the shape
# `wire._first_delivery` reads straight on (one-byte consumer and ledger ids).
first_deliveries = st.builds(
    lambda consumer_id, ledger_id, entry_id: encode_message(
        consumer_id, ledger_id, entry_id, -1, 0, ()
    ),
    st.integers(0, 127),
    st.integers(0, 127),
    I64,
)


@given(consumer_id=st.integers(0, 127), ledger_id=st.integers(0, 127), entry_id=I64)
@example(consumer_id=0, ledger_id=0, entry_id=0)
@example(consumer_id=127, ledger_id=127, entry_id=2**63 - 1)
@example(consumer_id=1, ledger_id=2, entry_id=16_383)
@example(consumer_id=1, ledger_id=2, entry_id=16_384)
def test_first_deliveries_take_their_lane(consumer_id: int, ledger_id: int, entry_id: int) -> None:
    data = encode_message(consumer_id, ledger_id, entry_id, -1, 0, ())
    fast = wire._first_delivery(data, 0, len(data))
    if entry_id < 0:
        assert fast is None  # ten bytes, read signed: the loop decides
    else:
        assert fast is not None
    expected = c.Message(
        consumer_id=consumer_id, message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id)
    )
    assert parse(data) == expected == generic_command(data)


@given(st.one_of(first_deliveries, mutated(first_deliveries)))
def test_first_delivery_lane_reads_what_protobuf_reads(data: bytes) -> None:
    framed = b"\x00" + data + b"\xff"  # read in place, inside a buffer
    fast = None
    if data.startswith(b"\x08\x09\x4a") and 12 <= len(data) < 132:
        fast = wire._first_delivery(framed, 1, len(framed) - 1)
    if fast is not None:
        assert fast == generic_command(data)
        assert parse(data) == fast


MID = lfield(2, vfield(1, 1) + vfield(2, 2))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (MID, "no consumer_id (required)"),
        (vfield(1, 1), "no message_id (required)"),
        (vfield(1, 1) + lfield(2, vfield(2, 2)), "message_id without ledgerId (required)"),
        (vfield(1, 1) + MID + MID, "a second message_id: protobuf merges them"),
        (vfield(1, 1) + MID + vfield(3, 2**32), "redelivery_count that uint32 truncates"),
        (vfield(1, 1) + MID + lfield(4, varint(1) + varint(2)), "packed ack_set"),
        (vfield(1, 1) + MID + vfield(9, 1), "unknown field"),
        (vfield(1, 1) + lfield(2, vfield(1, 1) + vfield(2, 2) + lfield(7, MID)), "chunk id"),
    ],
)
def test_parse_message_leaves_unusual_messages_to_protobuf(body: bytes, why: str) -> None:
    data = base_command(9, body)
    assert parse(data) is None, why


def test_parse_message_reads_a_consumer_epoch() -> None:
    message = c.Message(
        consumer_id=1, message_id=c.MessageIdData(ledger_id=2, entry_id=3), consumer_epoch=4
    )
    assert parse(codec.encode_command(message)) == message


# ---- MessageMetadata on the consumer's lane ---------------------------------------------------


def client_lane(data: bytes) -> Any:
    return wire.parse_metadata(data, 0, len(data), wire.CLIENT_METADATA_TAGS)


def fields_of(meta: c.MessageMetadata) -> tuple[Any, ...]:
    return (
        meta.producer_name,
        meta.sequence_id,
        meta.publish_time,
        meta.num_messages_in_batch,
        meta.partition_key,
        meta.ordering_key,
        meta.deliver_at_time,
    )


def check_client_lane(data: bytes) -> Any:
    """Where the client lane answers, the full decoding succeeds and reads the same fields."""
    fast = client_lane(data)
    if fast is not None:
        full = decode_record(c.MessageMetadata, data)  # must not raise
        assert fast == fields_of(full)
        assert full.compression is None
        assert full.num_chunks_from_msg is None
    return fast


def test_client_tags_are_a_subset_of_the_broker_tags() -> None:
    assert set(wire.CLIENT_METADATA_TAGS) < set(wire.METADATA_TAGS)
    assert all(wire.METADATA_TAGS[t] == a for t, a in wire.CLIENT_METADATA_TAGS.items())


@given(records(c.MessageMetadata))
def test_client_metadata_lane_reads_what_decode_record_reads(meta: c.MessageMetadata) -> None:
    fast = check_client_lane(encode_record(meta))
    unusual = (
        meta.properties,
        meta.encryption_keys,
        meta.compression is not None,
        meta.replicated_from is not None,
        meta.replicate_to,
        meta.encryption_algo is not None,
        meta.uuid is not None,
        meta.num_chunks_from_msg is not None,
        meta.total_chunk_msg_size is not None,
        meta.chunk_id is not None,
    )
    if not any(unusual):
        assert fast is not None, "plain metadata must take the fast lane"


@given(st.one_of(mutated(records(c.MessageMetadata).map(encode_record)), st.binary(max_size=60)))
def test_client_metadata_lane_never_accepts_what_decode_record_refuses(data: bytes) -> None:
    check_client_lane(data)


@pytest.mark.parametrize(
    "meta",
    [
        c.MessageMetadata(
            producer_name="p", sequence_id=1, publish_time=2, compression=c.CompressionType.NONE
        ),
        c.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2, num_chunks_from_msg=2),
        c.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2, uuid="u"),
        c.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2, replicated_from="r"),
    ],
)
def test_compressed_and_chunked_metadata_leave_the_client_lane(meta: c.MessageMetadata) -> None:
    assert client_lane(encode_record(meta)) is None


def test_bad_utf8_in_a_skipped_string_leaves_the_client_lane() -> None:
    data = lfield(1, b"p") + vfield(2, 1) + vfield(3, 1) + lfield(5, b"\xff")
    assert wire.parse_metadata(data, 0, len(data)) is not None  # the broker does not read it
    assert client_lane(data) is None
    with pytest.raises(RemoteProtocolError):
        decode_record(c.MessageMetadata, data)
