"""protocol/batch.py: batched entries and batch-index ack bitmaps (spec §7.2, §7.3, §8)."""

from __future__ import annotations

import struct
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.batch import ack_set_of, build_batch, indexes_of, parse_batch
from protocol.codec import decode_command, encode_command, encode_record
from protocol.errors import RemoteProtocolError
from tests.support.strategies import conforms, records

I64_MIN, I64_MAX = -(2**63), 2**63 - 1

# ---- ack sets -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("indexes", "size", "words"),
    [
        ([], 0, ()),
        ([], 1, (0,)),
        ([0], 1, (1,)),
        ([1, 2], 8, (0b110,)),
        ([63], 64, (-(2**63),)),  # bit 63 is the sign bit of an int64 word
        (range(64), 64, (-1,)),
        ([0, 64], 65, (1, 1)),  # spec §7.2: index i is word i // 64, bit i % 64
        ([65], 100, (0, 2)),
        ([127, 128], 129, (0, -(2**63), 1)),  # three words for 129 bits
        ([5, 70, 300], 64, (1 << 5,)),  # indexes at or beyond size are dropped
    ],
)
def test_ack_set_words(indexes: Any, size: int, words: tuple[int, ...]) -> None:
    assert ack_set_of(indexes, size) == words


@given(
    st.integers(0, 300).flatmap(
        lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1) if n else st.nothing()))
    )
)
def test_ack_set_round_trip(case: tuple[int, set[int]]) -> None:
    size, indexes = case
    words = ack_set_of(indexes, size)
    assert len(words) == (size + 63) // 64
    assert all(I64_MIN <= w <= I64_MAX for w in words)  # fits MessageIdData.ack_set (int64)
    assert indexes_of(words, size) == indexes


@given(st.lists(st.integers(I64_MIN, I64_MAX), max_size=4), st.integers(0, 300))
def test_indexes_below_size_only(words: list[int], size: int) -> None:
    indexes = indexes_of(words, size)
    assert all(0 <= i < size for i in indexes)
    assert indexes_of(ack_set_of(indexes, size), size) == indexes


def test_indexes_of_reads_negative_words() -> None:
    assert indexes_of((-1,), 64) == frozenset(range(64))
    assert indexes_of((-(2**63), 1), 65) == {63, 64}
    assert indexes_of((-1,), 3) == {0, 1, 2}


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_ack_sets_survive_the_wire(case: tuple[int, set[int]]) -> None:
    # MESSAGE.ack_set (redelivery remainder) and MessageIdData.ack_set (ACK) are int64 words.
    size, indexes = case
    words = ack_set_of(indexes, size)
    mid = c.MessageIdData(ledger_id=1, entry_id=2, ack_set=words)
    message = c.Message(consumer_id=1, message_id=mid, ack_set=words)
    ack = c.Ack(consumer_id=1, ack_type=c.AckType.INDIVIDUAL, message_id=(mid,))
    for command in (message, ack):
        assert decode_command(encode_command(command)) == command
    assert indexes_of(words, size) == indexes


# ---- batches --------------------------------------------------------------------------------


@st.composite
def batch_messages(
    draw: st.DrawFn, max_size: int = 5
) -> list[tuple[c.SingleMessageMetadata, bytes]]:
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        payload = draw(st.binary(max_size=32))
        meta = draw(records(c.SingleMessageMetadata))
        out.append((msgspec.structs.replace(meta, payload_size=len(payload)), payload))
    return out


def test_batch_layout() -> None:
    # spec §8.1: per message, | u32 size | SingleMessageMetadata | payload_size bytes |.
    meta = c.SingleMessageMetadata(payload_size=2)
    header = encode_record(meta)
    assert header == b"\x18\x02"  # payload_size (3) = 2
    assert build_batch([(meta, b"hi"), (meta, b"yo")]) == (
        struct.pack(">I", 2) + header + b"hi" + struct.pack(">I", 2) + header + b"yo"
    )


@given(batch_messages())
def test_batch_round_trip(messages: list[tuple[c.SingleMessageMetadata, bytes]]) -> None:
    assert parse_batch(build_batch(messages), len(messages)) == messages


@given(batch_messages().filter(bool), st.data())
def test_truncated_batch_raises_remote_protocol_error(
    messages: list[tuple[c.SingleMessageMetadata, bytes]], data: st.DataObject
) -> None:
    payload = build_batch(messages)
    cut = data.draw(st.integers(0, len(payload) - 1))
    with pytest.raises(RemoteProtocolError, match="batch"):
        parse_batch(payload[:cut], len(messages))


def test_batch_with_fewer_messages_than_announced_raises() -> None:
    payload = build_batch([(c.SingleMessageMetadata(payload_size=1), b"x")])
    with pytest.raises(RemoteProtocolError, match="truncated before a message header"):
        parse_batch(payload, 2)


@pytest.mark.parametrize("payload_size", [-1, 2])
def test_payload_size_outside_the_batch_raises(payload_size: int) -> None:
    header = encode_record(c.SingleMessageMetadata(payload_size=payload_size))
    payload = struct.pack(">I", len(header)) + header + b"x"
    with pytest.raises(RemoteProtocolError, match="body runs past the payload"):
        parse_batch(payload, 1)


def test_header_size_past_the_batch_raises() -> None:
    with pytest.raises(RemoteProtocolError, match="header runs past the payload"):
        parse_batch(struct.pack(">I", 10) + b"\x18\x00", 1)


@given(st.binary(max_size=64), st.integers(0, 4))
def test_garbage_batch_raises_only_remote_protocol_error(payload: bytes, count: int) -> None:
    try:
        messages = parse_batch(payload, count)
    except RemoteProtocolError:
        return
    assert len(messages) == count
    assert all(conforms(meta) and len(body) == meta.payload_size for meta, body in messages)
