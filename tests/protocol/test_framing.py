"""protocol/framing.py: frames, payload sections and the incremental decoder (spec §2)."""

from __future__ import annotations

import struct
from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from protocol import codec, framing, wire
from protocol import commands as c
from protocol.codec import encode_command
from protocol.errors import LocalProtocolError, RemoteProtocolError, ServerError
from protocol.framing import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    RECEIPT_TABLE_RUN,
    Frame,
    FrameDecoder,
    Payload,
    build_entry,
    checksum,
    decode_frame,
    decode_payload_section,
    encode_frame,
    encode_message_frame,
    encode_message_head,
    encode_message_heads,
    encode_payload_frame,
    encode_section_frame,
    encode_send_frame,
    encode_send_receipt_frames,
    payload_section,
    payload_sections,
)
from tests.support.bytestreams import drain, feed_chunks, split
from tests.support.strategies import commands, conforms, cut_points, entries, frames

# ---- golden bytes ---------------------------------------------------------------------------
#
# Each row is a frame and its exact bytes, written piece by piece from spec §1-§2 (big-endian
# sizes, BaseCommand.type then the sub-message whose field number equals the type, proto2 varints).
# Zero values of required fields must be on the wire (spec §1.2) and -1 ids travel as 2^64-1
# (spec §1.3): the rows below pin both.

U64_MAX_VARINT = b"\xff" * 9 + b"\x01"  # 2^64-1: nine 0x7f groups with continuation, then 1

# metadata_size | MessageMetadata{producer_name="p", sequence_id=0, publish_time=1} | "hi"
ENTRY = (
    struct.pack(">I", 7)  # metadata_size = 7
    + b"\x0a\x01p"  # producer_name (1) = "p"
    + b"\x10\x00"  # sequence_id (2) = 0: required, written
    + b"\x18\x01"  # publish_time (3) = 1
    + b"hi"  # the payload
)
ENTRY_CRC = 0x7ED8DF46  # CRC-32C of ENTRY

_SEND = c.Send(producer_id=1, sequence_id=2)

# BrokerEntryMetadata{broker_timestamp = 1, index = 41}
BROKER_ENTRY_METADATA = b"\x08\x01" + b"\x10\x29"

GOLDEN: list[Any] = [
    pytest.param(
        Frame(c.Ping()),
        struct.pack(">II", 9, 5)  # total_size = 4 + 5, command_size = 5
        + b"\x08\x12"  # type = PING (18)
        + b"\x92\x01\x00",  # field 18 (ping), length 0: the empty body is still sent (§2.4)
        id="PING",
    ),
    pytest.param(
        Frame(
            c.Connected(server_version="emubroker", protocol_version=20, max_message_size=5242880)
        ),
        struct.pack(">II", 26, 22)
        + b"\x08\x03"  # type = CONNECTED (3)
        + b"\x1a\x12"  # field 3 (connected), 18 bytes
        + b"\x0a\x09emubroker"  # server_version (1)
        + b"\x10\x14"  # protocol_version (2) = 20
        + b"\x18\x80\x80\xc0\x02",  # max_message_size (3) = 5 242 880 = 0x500000
        id="CONNECTED",
    ),
    pytest.param(
        Frame(c.Flow(consumer_id=0, message_permits=1000)),
        struct.pack(">II", 13, 9)
        + b"\x08\x0b"  # type = FLOW (11)
        + b"\x5a\x05"  # field 11 (flow), 5 bytes
        + b"\x08\x00"  # consumer_id (1) = 0: required, written
        + b"\x10\xe8\x07",  # messagePermits (2) = 1000
        id="FLOW",
    ),
    pytest.param(
        Frame(
            c.SendReceipt(
                producer_id=0, sequence_id=0, message_id=c.MessageIdData(ledger_id=5, entry_id=0)
            )
        ),
        struct.pack(">II", 18, 14)
        + b"\x08\x07"  # type = SEND_RECEIPT (7)
        + b"\x3a\x0a"  # field 7 (send_receipt), 10 bytes
        + b"\x08\x00"  # producer_id (1) = 0
        + b"\x10\x00"  # sequence_id (2) = 0
        + b"\x1a\x04"  # message_id (3), 4 bytes
        + b"\x08\x05"  # ledgerId (1) = 5
        + b"\x10\x00",  # entryId (2) = 0: required, written (spec §1.2)
        id="SEND_RECEIPT",
    ),
    pytest.param(
        Frame(
            c.SendReceipt(
                producer_id=1, sequence_id=7, message_id=c.MessageIdData(ledger_id=-1, entry_id=-1)
            )
        ),
        struct.pack(">II", 36, 32)
        + b"\x08\x07"  # type = SEND_RECEIPT (7)
        + b"\x3a\x1c"  # field 7, 28 bytes
        + b"\x08\x01"  # producer_id (1) = 1
        + b"\x10\x07"  # sequence_id (2) = 7
        + b"\x1a\x16"  # message_id (3), 22 bytes
        + b"\x08"
        + U64_MAX_VARINT  # ledgerId (1) = -1 as 2^64-1
        + b"\x10"
        + U64_MAX_VARINT,  # entryId (2) = -1 as 2^64-1
        id="SEND_RECEIPT-minus-one",
    ),
    pytest.param(
        Frame(
            c.Message(
                consumer_id=1, message_id=c.MessageIdData(ledger_id=7, entry_id=0, partition=2)
            ),
            Payload(ENTRY, ENTRY_CRC),
        ),
        struct.pack(">II", 37, 14)  # total = 4 + 14 (command) + 6 (checksum) + 13 (entry)
        + b"\x08\x09"  # type = MESSAGE (9)
        + b"\x4a\x0a"  # field 9 (message), 10 bytes
        + b"\x08\x01"  # consumer_id (1) = 1
        + b"\x12\x06"  # message_id (2), 6 bytes
        + b"\x08\x07"  # ledgerId = 7
        + b"\x10\x00"  # entryId = 0
        + b"\x18\x02"  # partition (3) = 2
        + b"\x0e\x01"  # checksum magic (spec §2.2)
        + struct.pack(">I", ENTRY_CRC)
        + ENTRY,
        id="MESSAGE",
    ),
    pytest.param(
        Frame(
            c.Message(
                consumer_id=2,
                message_id=c.MessageIdData(ledger_id=7, entry_id=1),
                redelivery_count=3,
                ack_set=(-(2**63),),
            ),
            Payload(ENTRY, ENTRY_CRC, BROKER_ENTRY_METADATA),
        ),
        struct.pack(">II", 58, 25)  # total = 4 + 25 + 10 (bem) + 6 (checksum) + 13 (entry)
        + b"\x08\x09"  # type = MESSAGE (9)
        + b"\x4a\x15"  # field 9 (message), 21 bytes
        + b"\x08\x02"  # consumer_id (1) = 2
        + b"\x12\x04\x08\x07\x10\x01"  # message_id (2) = {ledgerId 7, entryId 1}
        + b"\x18\x03"  # redelivery_count (3) = 3
        + b"\x20"
        + b"\x80" * 9
        + b"\x01"  # ack_set (4) = -2^63 (bit 63 only): int64, ten bytes
        + b"\x0e\x02"  # broker entry metadata magic, before the checksum (spec §2.2)
        + struct.pack(">I", 4)
        + BROKER_ENTRY_METADATA
        + b"\x0e\x01"
        + struct.pack(">I", ENTRY_CRC)
        + ENTRY,
        id="MESSAGE-broker-entry-metadata",
    ),
    pytest.param(
        Frame(c.Send(producer_id=0, sequence_id=0), Payload(ENTRY)),
        struct.pack(">II", 25, 8)  # no checksum: the entry follows the command directly
        + b"\x08\x06"  # type = SEND (6)
        + b"\x32\x04"  # field 6 (send), 4 bytes
        + b"\x08\x00"  # producer_id (1) = 0
        + b"\x10\x00"  # sequence_id (2) = 0
        + ENTRY,
        id="SEND-without-checksum",
    ),
    pytest.param(
        Frame(c.Error(request_id=0, error=ServerError.TopicNotFound, message="no such topic")),
        struct.pack(">II", 27, 23)
        + b"\x08\x0e"  # type = ERROR (14)
        + b"\x72\x13"  # field 14 (error), 19 bytes
        + b"\x08\x00"  # request_id (1) = 0: required, written
        + b"\x10\x0b"  # error (2) = TopicNotFound (11)
        + b"\x1a\x0dno such topic",  # message (3): required
        id="ERROR",
    ),
    pytest.param(
        Frame(
            c.LookupTopicResponse(
                request_id=0,
                broker_service_url="pulsar://127.0.0.1:6650",
                response=c.LookupType.CONNECT,
                authoritative=True,
            )
        ),
        struct.pack(">II", 40, 36)
        + b"\x08\x18"  # type = LOOKUP_RESPONSE (24)
        + b"\xc2\x01\x1f"  # field 24 (lookupTopicResponse): key 24<<3|2 = 194, 31 bytes
        + b"\x0a\x17pulsar://127.0.0.1:6650"  # brokerServiceUrl (1)
        + b"\x18\x01"  # response (3) = Connect
        + b"\x20\x00"  # request_id (4) = 0
        + b"\x28\x01",  # authoritative (5) = true
        id="LOOKUP_RESPONSE",
    ),
    pytest.param(
        Frame(
            c.LookupTopicResponse(
                request_id=1, broker_service_url="pulsar://b:6650", response=c.LookupType.REDIRECT
            )
        ),
        struct.pack(">II", 30, 26)
        + b"\x08\x18"  # type = LOOKUP_RESPONSE (24)
        + b"\xc2\x01\x15"  # field 24, 21 bytes
        + b"\x0a\x0fpulsar://b:6650"  # brokerServiceUrl (1)
        + b"\x18\x00"  # response (3) = Redirect (0): written, absent means failure (§4.2)
        + b"\x20\x01",  # request_id (4) = 1
        id="LOOKUP_RESPONSE-redirect",
    ),
    pytest.param(
        Frame(
            c.PartitionedTopicMetadataResponse(
                request_id=7, partitions=0, response=c.MetadataResult.SUCCESS
            )
        ),
        struct.pack(">II", 15, 11)
        + b"\x08\x16"  # type = PARTITIONED_METADATA_RESPONSE (22)
        + b"\xb2\x01\x06"  # field 22, 6 bytes
        + b"\x08\x00"  # partitions (1) = 0: a non-partitioned topic
        + b"\x10\x07"  # request_id (2) = 7
        + b"\x18\x00",  # response (3) = Success (0)
        id="PARTITIONED_METADATA_RESPONSE",
    ),
]


def _encode(frame: Frame) -> bytes:
    if frame.payload is None:
        return encode_frame(frame.command)
    assert isinstance(frame.command, (c.Send, c.Message))
    p = frame.payload
    return encode_payload_frame(frame.command, p.entry, p.checksum, p.broker_entry_metadata)


@pytest.mark.parametrize(("frame", "expected"), GOLDEN)
def test_golden_encode(frame: Frame, expected: bytes) -> None:
    assert _encode(frame) == expected


@pytest.mark.parametrize(("frame", "expected"), GOLDEN)
def test_golden_decode(frame: Frame, expected: bytes) -> None:
    decoder = FrameDecoder()
    decoder.feed(expected)
    assert drain(decoder) == [frame]
    assert decoder.buffered == 0


def test_checksum_is_crc32c() -> None:
    # The standard CRC-32C check value (Castagnoli, reflected 0x82F63B78): spec §2.2.
    assert checksum(b"123456789") == 0xE3069283
    assert checksum(ENTRY) == ENTRY_CRC


# ---- building blocks ------------------------------------------------------------------------


def test_build_entry_prefixes_the_metadata_size() -> None:
    assert build_entry(b"meta", b"body") == b"\x00\x00\x00\x04metabody"


@given(entries(), st.one_of(st.none(), st.integers(0, 2**32 - 1)), commands((c.Send, c.Message)))
def test_section_frame_equals_payload_frame(entry: bytes, crc: int | None, command: Any) -> None:
    section = payload_section(entry, crc)
    assert encode_section_frame(command, section) == encode_payload_frame(command, entry, crc)


@given(st.lists(st.tuples(entries(), st.one_of(st.none(), st.integers(0, 2**32 - 1)))))
def test_payload_sections_is_payload_section_of_each_entry(
    runs: list[tuple[bytes, int | None]],
) -> None:
    pending = [(entry, crc, None) for entry, crc in runs]
    assert payload_sections(pending) == [payload_section(entry, crc) for entry, crc in runs]


@given(
    st.binary(max_size=64), st.binary(max_size=300), st.one_of(st.none(), st.integers(0, 2**32 - 1))
)
def test_a_stored_section_splits_back_into_its_parts(
    metadata: bytes, body: bytes, crc: int | None
) -> None:
    entry = build_entry(metadata, body)
    stored = decode_payload_section(payload_section(entry, crc))
    assert stored == Payload(entry, crc)
    assert (bytes(stored.metadata), bytes(stored.body)) == (metadata, body)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (b"\x00\x00", "without message metadata"),
        (struct.pack(">I", 9) + b"meta", "message metadata runs past"),
        (b"\x0e\x01\x00", "truncated checksum section"),
    ],
)
def test_a_malformed_stored_section_is_refused(section: bytes, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message):
        decode_payload_section(section)


@given(st.binary(max_size=64), st.binary(max_size=300), st.booleans(), commands((c.Send,)))
def test_send_frame_equals_payload_frame_of_the_built_entry(
    metadata: bytes, payload: bytes, with_checksum: bool, command: Any
) -> None:
    entry = build_entry(metadata, payload)
    crc = checksum(entry) if with_checksum else None
    expected = encode_payload_frame(command, entry, crc)
    assert encode_send_frame(command, metadata, payload, with_checksum) == expected
    assert encode_send_frame(command, metadata, memoryview(payload), with_checksum) == expected


# ---- hot-path encoders agree with the generic ones -----------------------------------------

U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)


@given(
    U64,
    I64,
    I64,
    st.one_of(st.just(-1), I32),
    st.one_of(st.just(0), st.integers(0, 2**32 - 1)),
    st.lists(I64, max_size=20).map(tuple),
    st.binary(max_size=40),
)
@example(0, 1, 30_000, -1, 0, (), b"\x0e\x01")  # what every dispatch writes
@example(1, 1, 2, 3, 4, (-1,) * 12, b"")  # a long ack set: the body needs a two-byte length
def test_message_head_and_frame_equal_the_generic_message_frame(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    partition: int,
    redelivery_count: int,
    ack_set: tuple[int, ...],
    section: bytes,
) -> None:
    message = c.Message(
        consumer_id=consumer_id,
        message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id, partition=partition),
        redelivery_count=redelivery_count,
        ack_set=ack_set,
    )
    generic = encode_section_frame(message, section)
    args = (consumer_id, ledger_id, entry_id, partition, redelivery_count, ack_set)
    assert encode_message_head(*args, len(section)) + section == generic
    assert encode_message_frame(*args, section) == generic


@given(
    st.one_of(st.integers(0, 130), U64),
    st.one_of(st.integers(0, 130), U64),
    st.one_of(st.sampled_from([0, 120, 16_380, 2**21 - 3]), I64),
    st.one_of(st.just(-1), I32),
    st.lists(st.integers(0, 300), max_size=8),
)
@example(0, 0, 20_000, -1, [130] * 3)  # a short run (framing.SHORT_RUN): one head at a time
@example(0, 0, 20_000, -1, [130] * 6)  # what a dispatch run of unbatched entries writes
@example(0, 0, 126, -1, [1] * 5)  # entry ids of one, then two bytes
@example(0, 0, 2**21 - 3, -1, [1] * 5)  # three bytes, then four (the generic head)
@example(1, 1, 2**63 - 2, -1, [0, 0, 0])  # runs past the largest entry id: the generic error
def test_message_heads_of_a_run_equal_one_head_per_entry(
    consumer_id: int, ledger_id: int, entry_id: int, partition: int, sizes: list[int]
) -> None:
    def heads(encode: Any) -> list[bytes] | type[Exception]:
        try:
            return encode()
        except LocalProtocolError:
            return LocalProtocolError

    one_by_one = heads(
        lambda: [
            encode_message_head(consumer_id, ledger_id, entry_id + i, partition, 0, (), size)
            for i, size in enumerate(sizes)
        ]
    )
    run = heads(lambda: encode_message_heads(consumer_id, ledger_id, entry_id, partition, sizes))
    assert run == one_by_one


@given(U64, st.lists(st.tuples(U64, I64, I64), max_size=2 * RECEIPT_TABLE_RUN))
@example(1, [(0, 1, 0), (1, 1, 1), (200, 1, 20_000), (2**64 - 1, -1, -1)])
@example(0, [(127, 1, 16_384), (2**21, 1, 128)])  # a short run: one receipt at a time
@example(  # the ids' lengths around the table-built varints (one to three bytes), two ledgers
    0, [(v, 1, v) for v in (127, 128, 16_383, 16_384, 2**21 - 1, 2**21)] + [(5, 300, 6)]
)
@example(  # the same in a run long enough for the tables (RECEIPT_TABLE_RUN)
    0, [(v, 1, v) for v in (127, 128, 16_383, 16_384, 2**21 - 1, 2**21)] * 5 + [(5, 300, 6)]
)
def test_receipt_frames_equal_one_generic_frame_per_receipt(
    producer_id: int, receipts: list[tuple[int, int, int]]
) -> None:
    # spec §6.2: one SEND_RECEIPT per SEND, in order; (-1, -1) for a deduplicated SEND.
    expected = b"".join(
        encode_frame(
            c.SendReceipt(
                producer_id=producer_id,
                sequence_id=sequence_id,
                message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id),
            )
        )
        for sequence_id, ledger_id, entry_id in receipts
    )
    sequence_ids = [sequence_id for sequence_id, _, _ in receipts]
    positions = [(ledger_id, entry_id) for _, ledger_id, entry_id in receipts]
    assert encode_send_receipt_frames(producer_id, sequence_ids, positions) == expected


def test_hot_encoders_report_out_of_range_values() -> None:
    with pytest.raises(LocalProtocolError):
        encode_send_receipt_frames(1, [2**64], [(1, 1)])
    with pytest.raises(LocalProtocolError):
        encode_message_head(-1, 1, 1, -1, 0, (), 0)
    with pytest.raises(LocalProtocolError):
        encode_message_head(1, 1, 1, 2**31, 0, (), 0)


@st.composite
def client_frames(draw: st.DrawFn) -> bytes:
    """SEND, ACK and FLOW frames shaped as the official client writes them (the fast lanes')."""
    kind = draw(st.sampled_from(["send", "ack", "flow"]))
    if kind == "flow":
        return encode_frame(
            c.Flow(
                consumer_id=draw(st.integers(0, 2**64 - 1)),
                message_permits=draw(st.integers(0, 2**32 - 1)),
            )
        )
    if kind == "send":
        entry = draw(entries())
        send = c.Send(
            producer_id=draw(st.integers(0, 127)),
            sequence_id=draw(st.integers(0, 2**21)),
            num_messages=draw(st.sampled_from([1, 2, 1000])),
        )
        return encode_payload_frame(send, entry, draw(st.sampled_from([None, checksum(entry)])))
    ids = draw(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 2**21)), max_size=5))
    return encode_frame(
        c.Ack(
            consumer_id=draw(st.integers(0, 127)),
            ack_type=draw(st.sampled_from(c.AckType)),
            message_id=tuple(c.MessageIdData(ledger_id=lid, entry_id=eid) for lid, eid in ids),
        )
    )


@given(
    st.lists(
        st.one_of(frames().map(lambda pair: pair[1]), client_frames()), min_size=1, max_size=4
    ),
    st.data(),
)
def test_fast_decoding_equals_the_generic_decoding(
    stream_frames: list[bytes], data: st.DataObject
) -> None:
    """SEND/ACK/FLOW read in place and the checksummed payload split agree with the generic path."""
    stream = bytearray(b"".join(stream_frames))
    if data.draw(st.booleans()):  # and so does their handling of damaged bytes
        where = data.draw(st.integers(0, len(stream) - 1))
        stream[where] = data.draw(st.integers(0, 255))

    def decode_all() -> list[Frame] | str:
        decoder = FrameDecoder()
        decoder.feed(bytes(stream))
        try:
            return drain(decoder)
        except RemoteProtocolError as exc:
            return str(exc)

    fast = decode_all()
    with (
        mock.patch.dict(codec._RAW_DECODERS, clear=True),
        mock.patch.object(framing, "parse_send", return_value=None),
        mock.patch.object(framing, "parse_flow", return_value=None),
        # A magic that never matches: every payload section goes through _parse_payload.
        mock.patch.object(framing, "_MAGIC_CHECKSUM_U16", -1),
    ):
        generic = decode_all()
    assert fast == generic


def test_a_frame_spanning_many_reads_is_decoded_once_whole() -> None:
    entry = build_entry(b"m", bytes(1_000_000))
    big = encode_payload_frame(c.Send(producer_id=1, sequence_id=1), entry, checksum(entry))
    ping = encode_frame(c.Ping())
    stream = ping + big + ping
    decoder = FrameDecoder()
    out: list[Frame] = []
    fed = 0
    for start in range(0, len(stream), 65_536):
        chunk = stream[start : start + 65_536]
        decoder.feed(chunk)
        fed += len(chunk)
        out.extend(drain(decoder))
        if fed < len(ping) + len(big):
            assert out == [Frame(c.Ping())]  # the big frame waits for its last byte
    assert out == [
        Frame(c.Ping()),
        Frame(c.Send(producer_id=1, sequence_id=1), Payload(entry, checksum(entry))),
        Frame(c.Ping()),
    ]
    assert decoder.buffered == 0


def test_payload_views_split_metadata_and_body() -> None:
    payload = Payload(ENTRY, ENTRY_CRC)
    assert bytes(payload.metadata) == ENTRY[4:11]
    assert bytes(payload.body) == b"hi"


def test_checksum_ok_detects_a_mismatch() -> None:
    assert Payload(ENTRY, ENTRY_CRC).checksum_ok()
    assert Payload(ENTRY, None).checksum_ok()  # no checksum section: nothing to check
    assert not Payload(ENTRY, ENTRY_CRC ^ 1).checksum_ok()
    assert not Payload(ENTRY[:-1] + b"j", ENTRY_CRC).checksum_ok()


@pytest.mark.parametrize("crc", [0, 0xFFFFFFFF])
def test_extreme_checksum_values_are_kept(crc: int) -> None:
    # A CRC of 0 is a value like any other, not "no checksum section".
    frame = decode_frame(encode_payload_frame(_SEND, ENTRY, crc)[4:])
    assert frame.payload == Payload(ENTRY, crc)


@given(entries(), st.integers(0, 10_000), st.integers(1, 255))
def test_any_corrupted_byte_fails_the_checksum(entry: bytes, where: int, flip: int) -> None:
    corrupted = bytearray(entry)
    corrupted[4 + where % (len(entry) - 4)] ^= flip  # any byte after metadata_size
    frame = encode_payload_frame(
        c.Send(producer_id=1, sequence_id=1), bytes(corrupted), checksum(entry)
    )
    decoded = decode_frame(frame[4:])
    assert decoded.payload is not None
    assert not decoded.payload.checksum_ok()


# ---- chunking invariance --------------------------------------------------------------------


@given(st.lists(frames(), min_size=1, max_size=5), st.data())
def test_any_split_of_a_stream_yields_the_same_frames(
    pairs: list[tuple[Frame, bytes]], data: st.DataObject
) -> None:
    stream = b"".join(raw for _frame, raw in pairs)
    cuts = data.draw(cut_points(stream))
    decoder = FrameDecoder()
    assert feed_chunks(decoder, split(stream, cuts)) == [frame for frame, _raw in pairs]
    assert decoder.buffered == 0


@given(st.lists(frames(), min_size=1, max_size=5), st.data())
def test_a_client_decoder_yields_the_same_frames(
    pairs: list[tuple[Frame, bytes]], data: st.DataObject
) -> None:
    # A client's decoder tries MESSAGE first instead of SEND (`protocol.connection`).
    stream = b"".join(raw for _frame, raw in pairs)
    cuts = data.draw(cut_points(stream))
    decoder = FrameDecoder(first=wire.parse_message)
    assert feed_chunks(decoder, split(stream, cuts)) == [frame for frame, _raw in pairs]


@given(st.lists(frames(), min_size=1, max_size=3))
def test_byte_at_a_time_yields_the_same_frames(pairs: list[tuple[Frame, bytes]]) -> None:
    stream = b"".join(raw for _frame, raw in pairs)
    decoder = FrameDecoder()
    chunks = [stream[i : i + 1] for i in range(len(stream))]
    assert feed_chunks(decoder, chunks) == [frame for frame, _raw in pairs]


def test_many_small_feeds_keep_frames_intact() -> None:
    # Exercises the decoder's lazy compaction: consumed bytes are dropped between feeds.
    ping = encode_frame(c.Ping())
    flow = encode_frame(c.Flow(consumer_id=3, message_permits=7))
    decoder = FrameDecoder()
    out: list[Frame] = []
    for _ in range(500):
        decoder.feed(ping + flow[:5])
        out.extend(drain(decoder))
        decoder.feed(flow[5:])
        out.extend(drain(decoder))
        assert decoder.buffered == 0
    assert out == [Frame(c.Ping()), Frame(c.Flow(consumer_id=3, message_permits=7))] * 500


def test_partial_frame_waits_for_more_bytes() -> None:
    decoder = FrameDecoder()
    frame = encode_frame(c.Ping())
    decoder.feed(frame[:-1])
    assert decoder.next_frame() is None
    assert decoder.buffered == len(frame) - 1
    decoder.feed(frame[-1:])
    assert decoder.next_frame() == Frame(c.Ping())


# ---- size limits (spec §2.3) ----------------------------------------------------------------


def test_oversized_frame_is_refused_from_its_header() -> None:
    decoder = FrameDecoder(max_frame_size=1000)
    decoder.feed(struct.pack(">I", 1001))  # just the total_size: nothing else is buffered
    with pytest.raises(RemoteProtocolError, match="1001 bytes exceeds the limit of 1000"):
        decoder.next_frame()


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    entry = build_entry(b"", b"x" * 100)
    frame = encode_payload_frame(c.Send(producer_id=1, sequence_id=1), entry, None)
    decoder = FrameDecoder(max_frame_size=len(frame) - 4)
    decoder.feed(frame)
    assert drain(decoder) == [Frame(c.Send(producer_id=1, sequence_id=1), Payload(entry))]


def test_default_limit_is_max_message_size_plus_padding() -> None:
    # A real broker accepts maxMessageSize + 10 KiB (spec §2.3), so chunked sends fit.
    limit = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING
    assert limit == 5 * 1024 * 1024 + 10 * 1024
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">I", limit))
    assert decoder.next_frame() is None  # waits for the body
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">I", limit + 1))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        decoder.next_frame()


@pytest.mark.parametrize("total", [0, 1, 2, 3])
def test_total_size_below_four_is_refused(total: int) -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">I", total) + b"\x00" * 8)
    with pytest.raises(RemoteProtocolError, match="too small"):
        decoder.next_frame()


def test_empty_command_is_refused() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">II", 4, 0))
    with pytest.raises(RemoteProtocolError, match="without a type"):
        decoder.next_frame()


def test_command_size_past_the_frame_is_refused() -> None:
    command = encode_command(c.Ping())
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">II", 4 + len(command), len(command) + 1) + command)
    with pytest.raises(RemoteProtocolError, match="command size 6 exceeds the frame"):
        decoder.next_frame()


# ---- malformed payload sections -------------------------------------------------------------


def _with_rest(command: c.Command, rest: bytes) -> bytes:
    body = encode_command(command)
    return struct.pack(">II", 4 + len(body) + len(rest), len(body)) + body + rest


@pytest.mark.parametrize(
    ("rest", "message"),
    [
        (b"", "Send without a payload"),
        (b"\x00\x00\x00", "payload frame without message metadata"),
        (struct.pack(">I", 50) + b"short", "message metadata runs past the frame"),
        (b"\x0e\x01\x00\x00", "truncated checksum section"),
        (b"\x0e\x01" + struct.pack(">I", 1), "payload frame without message metadata"),
        (b"\x0e\x02\x00\x00", "truncated broker entry metadata header"),
        (b"\x0e\x02" + struct.pack(">I", 9) + b"abc", "broker entry metadata runs past the frame"),
    ],
    ids=[
        "no-payload",
        "short-metadata-size",
        "metadata-past-frame",
        "truncated-checksum",
        "checksum-without-entry",
        "truncated-bem-header",
        "bem-past-frame",
    ],
)
def test_malformed_payload_section_is_refused(rest: bytes, message: str) -> None:
    decoder = FrameDecoder()
    decoder.feed(_with_rest(_SEND, rest))
    with pytest.raises(RemoteProtocolError, match=message):
        decoder.next_frame()


def test_truncated_checksum_hints_checksum_error() -> None:
    with pytest.raises(RemoteProtocolError) as info:
        decode_frame(_with_rest(_SEND, b"\x0e\x01\x00")[4:])
    assert info.value.error_hint is ServerError.ChecksumError


def test_message_without_payload_is_refused() -> None:
    message = c.Message(consumer_id=1, message_id=c.MessageIdData(ledger_id=1, entry_id=1))
    with pytest.raises(RemoteProtocolError, match="Message without a payload"):
        decode_frame(encode_frame(message)[4:])


@pytest.mark.parametrize("command", [c.Ping(), c.Flow(consumer_id=1, message_permits=1)], ids=str)
def test_simple_command_with_trailing_bytes_is_refused(command: c.Command) -> None:
    decoder = FrameDecoder()
    decoder.feed(_with_rest(command, ENTRY))
    with pytest.raises(RemoteProtocolError, match=f"{type(command).__name__} with 13 unexpected"):
        decoder.next_frame()


# ---- garbage in -----------------------------------------------------------------------------


def _only_remote_errors(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=4096)
    decoder.feed(data)
    try:
        decoded = drain(decoder)  # asserts that it stops
    except RemoteProtocolError:
        return
    assert all(conforms(frame.command) for frame in decoded)


@given(st.binary(max_size=256))
@example(b"\x00\x00\x00\x04\x00\x00\x00\x00")
@example(b"\x00\x00\x00\x06\x00\x00\x00\x02\x08\x12")  # type PING, no body
def test_garbage_raises_only_remote_protocol_error(data: bytes) -> None:
    _only_remote_errors(data)


@given(
    st.lists(frames(), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 10_000),
)
def test_mutated_streams_raise_only_remote_protocol_error(
    pairs: list[tuple[Frame, bytes]], edits: list[tuple[int, int]], cut: int
) -> None:
    stream = bytearray(b"".join(raw for _frame, raw in pairs))
    for where, byte in edits:
        stream[where % len(stream)] = byte
    _only_remote_errors(bytes(stream[: cut % (len(stream) + 1)]))


def test_a_flow_is_read_without_protobuf() -> None:
    # A consumer that keeps up sends a FLOW every half receiver queue: read by hand, in place.
    decoder = FrameDecoder()
    decoder.feed(b"".join([encode_frame(c.Flow(consumer_id=3, message_permits=500))] * 2))
    with mock.patch.object(codec, "_decode_protobuf", side_effect=AssertionError("protobuf")):
        assert drain(decoder) == [Frame(c.Flow(consumer_id=3, message_permits=500))] * 2
