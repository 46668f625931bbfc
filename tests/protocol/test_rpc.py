"""Tests for ``protocol.rpc``: length-prefixed msgpack frames of tagged Structs."""

from __future__ import annotations

import contextlib
import struct

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import RemoteProtocolError
from protocol.rpc import LENGTH_PREFIX_SIZE, MAX_RPC_FRAME_SIZE, RpcDecoder, encode, encode_into


class Put(msgspec.Struct, frozen=True, array_like=True, tag=1):
    rid: int
    key: str
    value: bytes


class Get(msgspec.Struct, frozen=True, array_like=True, tag=2):
    rid: int
    key: str


Message = Put | Get


def decoder() -> RpcDecoder[Message]:
    return RpcDecoder[Message](Message)


def drain(dec: RpcDecoder[Message]) -> list[Message]:
    out = []
    while (message := dec.next_message()) is not None:
        out.append(message)
    return out


messages = st.one_of(
    st.builds(Put, st.integers(0, 2**63 - 1), st.text(max_size=20), st.binary(max_size=300)),
    st.builds(Get, st.integers(0, 2**63 - 1), st.text(max_size=20)),
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # Get(7, "k"): fixarray(3) [tag 2, rid 7, fixstr "k"]
        (Get(7, "k"), struct.pack(">I", 5) + b"\x93\x02\x07\xa1k"),
        # Put(1, "", b"\xff"): fixarray(4) [tag 1, rid 1, fixstr "", bin8 len 1 0xff]
        (Put(1, "", b"\xff"), struct.pack(">I", 7) + b"\x94\x01\x01\xa0\xc4\x01\xff"),
    ],
    ids=["get", "put"],
)
def test_encode_golden_bytes(message: Message, expected: bytes) -> None:
    assert encode(message) == expected
    dec = decoder()
    dec.feed(expected)
    assert drain(dec) == [message]


def test_encode_into_appends_frames_to_a_buffer() -> None:
    buffer = bytearray(b"prefix")
    encode_into(Get(1, "a"), buffer)
    encode_into(Get(2, "b"), buffer)
    assert bytes(buffer) == b"prefix" + encode(Get(1, "a")) + encode(Get(2, "b"))


@given(st.lists(messages, max_size=20))
def test_round_trip(batch: list[Message]) -> None:
    dec = decoder()
    dec.feed(b"".join(encode(message) for message in batch))
    assert drain(dec) == batch
    assert dec.buffered == 0


@given(st.lists(messages, min_size=1, max_size=10), st.data())
def test_any_split_of_the_stream_yields_the_same_messages(
    batch: list[Message], data: st.DataObject
) -> None:
    stream = b"".join(encode(message) for message in batch)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    dec = decoder()
    got: list[Message] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        if start < end:  # feeding b"" would mean end of stream
            dec.feed(stream[start:end])
        got.extend(drain(dec))
    assert got == batch


def test_incomplete_frame_waits_for_more_bytes() -> None:
    frame = encode(Put(1, "key", b"value"))
    dec = decoder()
    dec.feed(frame[:3])
    assert dec.next_message() is None
    dec.feed(frame[3:-1])
    assert dec.next_message() is None
    dec.feed(frame[-1:])
    assert dec.next_message() == Put(1, "key", b"value")


def test_oversized_length_prefix_is_rejected_before_buffering() -> None:
    dec = RpcDecoder[Message](Message, max_frame_size=16)
    dec.feed(struct.pack(">I", 17))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit of 16 bytes"):
        dec.next_message()


def test_default_bound_is_the_named_constant() -> None:
    dec = decoder()
    dec.feed(struct.pack(">I", MAX_RPC_FRAME_SIZE + 1))
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        dec.next_message()


def test_unknown_tag_is_a_remote_protocol_error() -> None:
    body = msgspec.msgpack.encode([99, 1, "k"])
    dec = decoder()
    dec.feed(struct.pack(">I", len(body)) + body)
    with pytest.raises(RemoteProtocolError, match="malformed RPC message"):
        dec.next_message()


def test_eof_inside_a_frame_is_a_remote_protocol_error() -> None:
    dec = decoder()
    dec.feed(encode(Get(1, "k"))[:-2])
    dec.feed(b"")
    with pytest.raises(RemoteProtocolError, match="ended inside a frame"):
        dec.next_message()


def test_eof_between_frames_is_clean() -> None:
    dec = decoder()
    dec.feed(encode(Get(1, "k")))
    dec.feed(b"")
    assert drain(dec) == [Get(1, "k")]
    assert dec.next_message() is None


def test_many_small_frames_compact_the_buffer() -> None:
    frame = encode(Get(1, "k" * 100))
    count = 2000  # more than the compaction threshold of consumed bytes
    dec = decoder()
    dec.feed(frame * count + frame[: LENGTH_PREFIX_SIZE + 1])
    assert len(drain(dec)) == count
    assert dec.buffered == LENGTH_PREFIX_SIZE + 1


@given(st.binary(max_size=200))
def test_garbage_raises_only_remote_protocol_error(garbage: bytes) -> None:
    dec = decoder()
    dec.feed(garbage)
    dec.feed(b"")
    with contextlib.suppress(RemoteProtocolError):  # anything else fails the test
        drain(dec)
