"""protocol/codec.py: records <-> BaseCommand bytes (spec/wire-protocol.md §1, §2.4)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from protocol import codec
from protocol import commands as c
from protocol._pb import pulsar_pb2 as pb
from protocol.codec import (
    command_type,
    decode_command,
    decode_record,
    encode_command,
    encode_record,
)
from protocol.errors import LocalProtocolError, RemoteProtocolError, ServerError
from protocol.framing import build_entry
from tests.support.bytestreams import base_command, lfield, vfield
from tests.support.strategies import (
    RECORD_TYPES,
    commands,
    conforms,
    proto_field,
    record_fields,
    records,
    sample,
)

U64_MAX = 2**64 - 1
HOT_COMMAND_TYPES = (c.Send, c.Message, c.SendReceipt, c.Flow, c.Ack)


def _name(t: type) -> str:
    return t.__name__


# ---- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize("command_cls", c.COMMAND_TYPES, ids=_name)
@given(data=st.data())
def test_every_command_round_trips(command_cls: type[c.Record], data: st.DataObject) -> None:
    command = data.draw(records(command_cls))
    decoded = decode_command(encode_command(command))
    assert decoded == command
    assert type(decoded) is command_cls
    assert conforms(decoded)


@pytest.mark.parametrize("record_cls", RECORD_TYPES, ids=_name)
@given(data=st.data())
def test_every_record_round_trips(record_cls: type[c.Record], data: st.DataObject) -> None:
    record = data.draw(records(record_cls))
    assert decode_record(record_cls, encode_record(record)) == record


@pytest.mark.parametrize(
    "message_id",
    [
        c.MessageIdData(ledger_id=-1, entry_id=-1),  # earliest (spec §1.3)
        c.MessageIdData(ledger_id=2**63 - 1, entry_id=2**63 - 1),  # latest
        c.MessageIdData(ledger_id=-(2**63), entry_id=0),
        c.MessageIdData(ledger_id=0, entry_id=0, partition=0, batch_index=0, batch_size=0),
        c.MessageIdData(ledger_id=1, entry_id=2, ack_set=(-1, -(2**63), 2**63 - 1, 0)),
    ],
)
def test_message_id_extremes_round_trip_in_every_hot_command(message_id: c.MessageIdData) -> None:
    for command in (
        c.Message(consumer_id=0, message_id=message_id),
        c.SendReceipt(producer_id=0, sequence_id=0, message_id=message_id),
        c.Ack(consumer_id=0, ack_type=c.AckType.CUMULATIVE, message_id=(message_id, message_id)),
        c.Seek(consumer_id=0, request_id=0, message_id=message_id),
    ):
        assert decode_command(encode_command(command)) == command


def test_minus_one_ids_travel_as_u64_max() -> None:
    # spec §1.3: ledgerId/entryId are uint64 on the wire; -1 is 2^64-1 (ten varint bytes).
    wire = encode_record(c.MessageIdData(ledger_id=-1, entry_id=-1))
    assert wire == vfield(1, U64_MAX) + vfield(2, U64_MAX)
    # ... and a uint64 at or above 2^63 reads back as the client's signed view.
    assert decode_record(c.MessageIdData, vfield(1, 2**63) + vfield(2, U64_MAX)) == (
        c.MessageIdData(ledger_id=-(2**63), entry_id=-1)
    )


# ---- the fast lanes agree with protobuf -----------------------------------------------------


@pytest.mark.parametrize("command_cls", HOT_COMMAND_TYPES, ids=_name)
@given(data=st.data())
def test_fast_lanes_write_and_read_what_protobuf_does(
    command_cls: type[c.Record], data: st.DataObject
) -> None:
    command = data.draw(records(command_cls))
    fast = encode_command(command)
    with (
        mock.patch.dict(codec._FAST_ENCODERS, clear=True),
        mock.patch.dict(codec._FAST_DECODERS, clear=True),
    ):
        generic = encode_command(command)
        generic_decoded = decode_command(fast)
    assert fast == generic  # byte for byte: same fields, same order, same varints
    assert decode_command(fast) == generic_decoded == command


@given(
    st.integers(0, U64_MAX),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.one_of(st.just(-1), st.integers(-(2**31), 2**31 - 1)),
    st.one_of(st.just(0), st.integers(0, 2**32 - 1)),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3).map(tuple),
)
def test_record_free_message_encoder_writes_what_the_record_encoder_does(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: tuple[int, ...],
) -> None:
    message = c.Message(
        consumer_id=consumer_id,
        message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id, partition=partition),
        redelivery_count=redelivery_count,
        ack_set=ack_set,
    )
    fast = codec.encode_message(
        consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set
    )
    assert fast == encode_command(message)


@given(
    st.integers(0, U64_MAX),
    st.integers(0, U64_MAX),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
)
@example(1, 0, 1, 0)
@example(0, U64_MAX, -1, -1)  # spec §1.3: -1 is 2^64-1 on the wire
def test_record_free_receipt_encoder_writes_what_the_record_encoder_does(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int
) -> None:
    receipt = c.SendReceipt(
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id),
    )
    fast = codec.encode_send_receipt(producer_id, sequence_id, ledger_id, entry_id)
    assert fast == encode_command(receipt)


def test_record_free_encoders_report_out_of_range_values() -> None:
    with pytest.raises(LocalProtocolError):
        codec.encode_send_receipt(-1, 0, 1, 1)
    with pytest.raises(LocalProtocolError):
        codec.encode_message(0, 1, 1, -1, 2**32, ())


@given(records(c.MessageMetadata))
def test_peek_reads_the_metadata_fields_the_full_decode_reads(meta: c.MessageMetadata) -> None:
    # spec §6.4: the broker's fields, on the fast lane or not.
    data = encode_record(meta)
    expected = (
        meta.producer_name,
        meta.sequence_id,
        meta.publish_time,
        meta.num_messages_in_batch,
        meta.partition_key,
        meta.ordering_key,
        meta.deliver_at_time,
    )
    assert tuple(codec.peek_metadata(data)) == expected
    assert codec.peek_entry_metadata(build_entry(data, b"payload")) == expected


def test_peek_entry_metadata_refuses_an_entry_shorter_than_its_metadata() -> None:
    with pytest.raises(RemoteProtocolError, match="runs past the entry"):
        codec.peek_entry_metadata(b"\x00\x00\x00\x09abc")
    with pytest.raises(RemoteProtocolError, match="runs past the entry"):
        codec.peek_entry_metadata(b"\x00\x00")


# ---- defaults and presence (spec §1.1, §1.2) ------------------------------------------------


def _wire_message(command: c.Command) -> Any:
    base = pb.BaseCommand.FromString(encode_command(command))
    return getattr(base, base.DESCRIPTOR.fields_by_number[base.type].name)


@given(commands())
def test_set_fields_without_a_shared_default_are_on_the_wire(command: Any) -> None:
    """A value may be left out only when record and proto agree on the default.

    Otherwise the official client reads the proto default instead of what we meant
    (a LOOKUP_RESPONSE without `response` is "Empty response", spec §4.2).
    """
    msg = _wire_message(command)
    for info, _hint in record_fields(type(command)):
        value = getattr(command, info.name)
        fd = proto_field(type(command), info.name)
        if fd.is_repeated or value is None:
            continue
        if value == info.default and info.default == fd.default_value:
            continue  # may be omitted: both readers assume it
        assert msg.HasField(fd.name), f"{type(command).__name__}.{info.name}={value!r} not written"


@pytest.mark.parametrize(
    ("command", "field"),
    [
        # spec §4.2: always set `response`, even Success/Redirect (= 0).
        (
            c.PartitionedTopicMetadataResponse(request_id=0, response=c.MetadataResult.SUCCESS),
            "response",
        ),
        (c.PartitionedTopicMetadataResponse(request_id=0, partitions=0), "partitions"),
        (c.LookupTopicResponse(request_id=0, response=c.LookupType.REDIRECT), "response"),
        # spec §7.3: a request_id (even 0) asks for an ACK_RESPONSE.
        (c.Ack(consumer_id=0, ack_type=c.AckType.INDIVIDUAL, request_id=0), "request_id"),
        (c.AckResponse(consumer_id=0, error=ServerError.UnknownError), "error"),
        # spec §1.2: required zeros are written.
        (c.Flow(consumer_id=0, message_permits=0), "consumer_id"),
        (c.Flow(consumer_id=0, message_permits=0), "messagePermits"),
        (c.Success(request_id=0), "request_id"),
    ],
)
def test_zero_values_with_meaning_are_written(command: c.Command, field: str) -> None:
    assert _wire_message(command).HasField(field)
    assert decode_command(encode_command(command)) == command


def test_num_messages_in_batch_of_one_marks_a_batch() -> None:
    # spec §8.2: presence, not value, makes an entry a batch; 1 is also the proto default.
    meta = c.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=0, num_messages_in_batch=1
    )
    wire = encode_record(meta)
    assert pb.MessageMetadata.FromString(wire).HasField("num_messages_in_batch")
    assert decode_record(c.MessageMetadata, wire).num_messages_in_batch == 1


def test_shared_defaults_are_not_written() -> None:
    send = c.Send(producer_id=3, sequence_id=0)  # num_messages=1, highest_sequence_id=0, ...
    assert encode_command(send) == base_command(6, vfield(1, 3) + vfield(2, 0))


# ---- encoding errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        c.Flow(consumer_id=0, message_permits=2**32),  # uint32
        c.Flow(consumer_id=-1, message_permits=1),  # uint64
        c.Send(producer_id=0, sequence_id=-1),
        c.Send(producer_id=2**64, sequence_id=0),
        c.Send(producer_id=0, sequence_id=0, num_messages=2**31),  # int32
        c.SendReceipt(producer_id=0, sequence_id=2**64),
        c.Message(
            consumer_id=0, message_id=c.MessageIdData(ledger_id=1, entry_id=1), redelivery_count=-1
        ),
        c.Message(
            consumer_id=0, message_id=c.MessageIdData(ledger_id=1, entry_id=1, partition=2**31)
        ),
        c.Message(
            consumer_id=0, message_id=c.MessageIdData(ledger_id=1, entry_id=1), ack_set=(2**63,)
        ),
        c.Ack(consumer_id=-5, ack_type=c.AckType.INDIVIDUAL),
        c.Ack(consumer_id=0, ack_type=c.AckType.INDIVIDUAL, request_id=-1),
        c.Ack(consumer_id=0, ack_type=c.AckType.INDIVIDUAL, validation_error=5),  # closed enum
        c.Error(request_id=-1, error=ServerError.UnknownError, message=""),
        c.Subscribe(
            topic="t",
            subscription="s",
            sub_type=c.SubType.SHARED,
            consumer_id=0,
            request_id=0,
            priority_level=2**31,
        ),
    ],
    ids=lambda cmd: type(cmd).__name__,
)
def test_out_of_range_values_raise_local_protocol_error(command: c.Command) -> None:
    with pytest.raises(LocalProtocolError, match=f"cannot encode {type(command).__name__}"):
        encode_command(command)


@pytest.mark.parametrize(
    "command",
    [
        c.Error(request_id=None, error=ServerError.UnknownError, message="x"),  # type: ignore[arg-type]
        c.Send(producer_id=None, sequence_id=0),  # type: ignore[arg-type]
        c.Flow(consumer_id=0, message_permits=None),  # type: ignore[arg-type]
        c.Message(consumer_id=0, message_id=None),  # type: ignore[arg-type]
        c.Ack(consumer_id=None, ack_type=c.AckType.INDIVIDUAL),  # type: ignore[arg-type]
    ],
    ids=lambda cmd: type(cmd).__name__,
)
def test_missing_required_field_raises_local_protocol_error(command: c.Command) -> None:
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        encode_command(command)


def test_record_missing_required_field_raises_local_protocol_error() -> None:
    meta = c.SingleMessageMetadata(payload_size=None)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError, match="cannot encode SingleMessageMetadata"):
        encode_record(meta)


# ---- decoding errors ------------------------------------------------------------------------


def test_unparsable_bytes_raise_remote_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError, match="unparsable command"):
        decode_command(b"\x08\x80")  # a varint cut short


def test_missing_required_field_raises_remote_protocol_error() -> None:
    # CommandError without its required `message` (spec §4.2: message is req).
    data = base_command(14, vfield(1, 7) + vfield(2, ServerError.TopicNotFound))
    with pytest.raises(RemoteProtocolError, match="Error is missing required fields: message"):
        decode_command(data)


def test_missing_required_nested_field_raises_remote_protocol_error() -> None:
    # MESSAGE whose message_id lacks entryId.
    data = base_command(9, vfield(1, 1) + lfield(2, vfield(1, 5)))
    with pytest.raises(RemoteProtocolError, match="missing required fields"):
        decode_command(data)


@pytest.mark.parametrize(
    "type_number",
    [
        51,  # NEW_TXN_RESPONSE: a coordinator's answer, not in our proto's enum
        63,  # TC_CLIENT_CONNECT_RESPONSE
        64,  # WATCH_TOPIC_LIST
    ],
)
def test_unsupported_command_type_hints_unsupported_version(type_number: int) -> None:
    data = vfield(1, type_number) + lfield(type_number, b"")
    with pytest.raises(
        RemoteProtocolError, match=f"unsupported command type {type_number}"
    ) as info:
        decode_command(data)
    assert info.value.error_hint is ServerError.UnsupportedVersionError


def test_command_without_type_raises_remote_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError, match="without a type"):
        decode_command(lfield(18, b""))  # a PING body but no BaseCommand.type


def test_command_type_without_its_body_raises_remote_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError, match="without its ping body"):
        decode_command(vfield(1, 18))


@pytest.mark.parametrize(
    "data",
    [
        # CommandError.message with invalid UTF-8
        base_command(14, vfield(1, 1) + vfield(2, 0) + lfield(3, b"\xff\xfe")),
        # CommandLookupTopic.topic
        base_command(23, lfield(1, b"persistent://t/n/\xc3") + vfield(2, 0)),
        # repeated string: CommandGetTopicsOfNamespaceResponse.topics
        base_command(33, vfield(1, 0) + lfield(2, b"ok") + lfield(2, b"\x80")),
        # a string inside a nested record: KeyValue.key in CommandProducer.metadata
        base_command(
            5,
            lfield(1, b"t")
            + vfield(2, 0)
            + vfield(3, 0)
            + lfield(6, lfield(1, b"\xed\xa0\x80") + lfield(2, b"")),
        ),
    ],
)
def test_invalid_utf8_in_a_string_raises_remote_protocol_error(data: bytes) -> None:
    # proto2 parsing does not check UTF-8 (upb hands back bytes); a str field must not hold bytes.
    with pytest.raises(RemoteProtocolError, match="not valid UTF-8"):
        decode_command(data)


def test_invalid_utf8_in_a_record_raises_remote_protocol_error() -> None:
    data = vfield(3, 1) + lfield(2, b"\xff")  # SingleMessageMetadata.partition_key
    with pytest.raises(RemoteProtocolError, match="not valid UTF-8"):
        decode_record(c.SingleMessageMetadata, data)


def test_unknown_fields_are_ignored() -> None:
    # A SEND carrying txnid bits (fields 4 and 5, not in our record) and an unknown field 99.
    body = vfield(1, 1) + vfield(2, 2) + vfield(4, 7) + vfield(5, 8) + vfield(99, 1)
    assert decode_command(base_command(6, body)) == c.Send(producer_id=1, sequence_id=2)


@given(st.binary(max_size=64))
@example(b"")
@example(b"\x08\x09J\x00")
def test_garbage_decodes_to_a_valid_record_or_raises_remote_protocol_error(data: bytes) -> None:
    try:
        decoded = decode_command(data)
    except RemoteProtocolError:
        return
    assert conforms(decoded)


@given(commands(), st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1))
def test_mutated_commands_decode_validly_or_raise_remote_protocol_error(
    command: Any, edits: list[tuple[int, int]]
) -> None:
    data = bytearray(encode_command(command))
    for position, byte in edits:
        data[position % len(data)] = byte
    try:
        decoded = decode_command(data)
    except RemoteProtocolError:
        return
    assert conforms(decoded)


@pytest.mark.parametrize("record_cls", RECORD_TYPES, ids=_name)
@given(data=st.binary(max_size=48))
def test_garbage_records_decode_validly_or_raise_remote_protocol_error(
    record_cls: type[c.Record], data: bytes
) -> None:
    try:
        decoded = decode_record(record_cls, data)
    except RemoteProtocolError:
        return
    assert conforms(decoded)


# ---- type numbers (spec §2.4) ---------------------------------------------------------------

SPEC_TYPE_NUMBERS: dict[type[c.Record], int] = {
    c.Connect: 2,
    c.Connected: 3,
    c.Subscribe: 4,
    c.Producer: 5,
    c.Send: 6,
    c.SendReceipt: 7,
    c.SendError: 8,
    c.Message: 9,
    c.Ack: 10,
    c.Flow: 11,
    c.Unsubscribe: 12,
    c.Success: 13,
    c.Error: 14,
    c.CloseProducer: 15,
    c.CloseConsumer: 16,
    c.ProducerSuccess: 17,
    c.Ping: 18,
    c.Pong: 19,
    c.RedeliverUnacknowledgedMessages: 20,
    c.PartitionedTopicMetadata: 21,
    c.PartitionedTopicMetadataResponse: 22,
    c.LookupTopic: 23,
    c.LookupTopicResponse: 24,
    c.ConsumerStats: 25,
    c.ConsumerStatsResponse: 26,
    c.Seek: 28,
    c.GetLastMessageId: 29,
    c.GetLastMessageIdResponse: 30,
    c.ActiveConsumerChange: 31,
    c.GetTopicsOfNamespace: 32,
    c.GetTopicsOfNamespaceResponse: 33,
    c.GetSchema: 34,
    c.GetSchemaResponse: 35,
    c.AckResponse: 38,
    c.GetOrCreateSchema: 39,
    c.GetOrCreateSchemaResponse: 40,
    c.AuthChallenge: 36,
    c.AuthResponse: 37,
    c.ReachedEndOfTopic: 27,
    c.NewTxn: 50,
    c.AddPartitionToTxn: 52,
    c.AddSubscriptionToTxn: 54,
    c.EndTxn: 56,
    c.TcClientConnectRequest: 62,
}


def test_every_command_type_is_in_the_spec_table() -> None:
    assert set(SPEC_TYPE_NUMBERS) == set(c.COMMAND_TYPES)


@pytest.mark.parametrize(
    ("command_cls", "number"),
    SPEC_TYPE_NUMBERS.items(),
    ids=[t.__name__ for t in SPEC_TYPE_NUMBERS],
)
def test_command_type_numbers_follow_the_spec(command_cls: type[c.Record], number: int) -> None:
    command = sample(command_cls)
    assert command_type(command) == number
    base = pb.BaseCommand.FromString(encode_command(command))
    assert base.type == number
    assert base.HasField(base.DESCRIPTOR.fields_by_number[number].name)
