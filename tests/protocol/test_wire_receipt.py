"""protocol/wire.py `parse_send_receipt` agrees with protobuf (spec §6.2).

Like the SEND and ACK readers (tests/protocol/test_wire.py): where the fast reader answers, the
protobuf path must accept the bytes and read the same record, on generated receipts, on the
broker's own encoders' output, on mutations of them and on random bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import codec, wire
from protocol import commands as c
from protocol.codec import encode_command, encode_send_receipt
from protocol.framing import FrameDecoder, encode_send_receipt_frames
from tests.protocol.test_wire import generic_command, mutated
from tests.support.bytestreams import base_command, lfield, vfield
from tests.support.strategies import records

U64_MAX = 2**64 - 1
I64 = st.integers(-(2**63), 2**63 - 1)
U64 = st.integers(0, U64_MAX)

receipts = records(c.SendReceipt).map(encode_command)
broker_receipts = st.builds(encode_send_receipt, U64, U64, I64, I64)


def parse(data: bytes) -> c.SendReceipt | None:
    return wire.parse_send_receipt(data, 0, len(data))


def test_registered_for_send_receipts() -> None:
    assert codec._RAW_DECODERS[b"\x08\x07\x3a"] is wire.parse_send_receipt


@given(records(c.SendReceipt))
def test_reads_every_receipt_protobuf_reads(receipt: c.SendReceipt) -> None:
    data = encode_command(receipt)
    fast = parse(data)
    assert fast is None or fast == generic_command(data)
    mid = receipt.message_id
    if mid is None or (
        mid.first_chunk_message_id is None and mid.partition >= -1 and mid.batch_index >= -1
    ):
        assert fast == receipt


@given(U64, U64, I64, I64)
def test_takes_every_receipt_the_broker_writes(
    producer_id: int, sequence_id: int, ledger_id: int, entry_id: int
) -> None:
    expected = c.SendReceipt(
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id),
    )
    data = encode_send_receipt(producer_id, sequence_id, ledger_id, entry_id)
    assert parse(data) == expected == generic_command(data)
    inside = b"\xff\x00" + data + b"\x01"  # read in place, inside a received chunk
    assert wire.parse_send_receipt(inside, 2, len(inside) - 1) == expected


@given(st.lists(st.tuples(U64, st.tuples(I64, I64)), min_size=1, max_size=5), U64)
def test_takes_the_brokers_joined_receipt_frames(
    receipts: list[tuple[int, tuple[int, int]]], producer_id: int
) -> None:
    sequence_ids = [s for s, _ in receipts]
    positions = [p for _, p in receipts]
    decoder = FrameDecoder()
    decoder.feed(encode_send_receipt_frames(producer_id, sequence_ids, positions))
    for sequence_id, (ledger_id, entry_id) in receipts:
        frame = decoder.next_frame()
        assert frame is not None
        assert frame.command == c.SendReceipt(
            producer_id=producer_id,
            sequence_id=sequence_id,
            message_id=c.MessageIdData(ledger_id=ledger_id, entry_id=entry_id),
        )
    assert decoder.next_frame() is None


@given(
    st.one_of(
        mutated(receipts),
        mutated(broker_receipts),
        st.binary(max_size=50).map(lambda b: b"\x08\x07\x3a" + b),
    )
)
def test_never_accepts_what_protobuf_refuses_or_reads_otherwise(data: bytes) -> None:
    fast = parse(data)
    if fast is not None:
        assert fast == generic_command(data)


MID = lfield(3, vfield(1, 7) + vfield(2, 9))


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (vfield(2, 1) + MID, "no producer_id (required)"),
        (vfield(1, 1) + MID, "no sequence_id (required)"),
        (vfield(1, 1) + vfield(2, 1) + MID + MID, "two message ids: protobuf merges them"),
        (vfield(1, 1) + vfield(2, 1) + lfield(3, vfield(1, 7)), "message id without entryId"),
        (vfield(1, 1) + vfield(2, 1) + lfield(3, MID[2:] + lfield(7, MID[2:])), "chunk id"),
        (vfield(1, 1) + vfield(2, 1) + vfield(99, 1), "unknown field"),
        (vfield(1, 1) + lfield(2, b"\x01"), "wrong wire type"),
    ],
)
def test_leaves_unusual_receipts_to_protobuf(body: bytes, why: str) -> None:
    data = base_command(7, body)
    assert parse(data) is None, why


def test_reads_the_optional_fields() -> None:
    data = base_command(7, vfield(1, 300) + vfield(2, 2**40) + vfield(4, 5))
    assert parse(data) == c.SendReceipt(producer_id=300, sequence_id=2**40, highest_sequence_id=5)
