"""The producer's fast SEND writers equal the generic, record-built bytes (spec §2.2, §8.1, §8.2).

`PlainSends.frame` against `build_single` with `Send` and `MessageMetadata` records, and
`BatchBuilder.add_plain` against a batch built from `SingleMessageMetadata` records; both on
generated values, including the ones that must leave the fast path.
"""

from __future__ import annotations

import functools
import struct

from hypothesis import example, given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.client.messages import BatchBuilder, PlainSends, build_single
from protocol.codec import encode_record
from protocol.framing import checksum, decode_frame, encode_payload_frame
from protocol.ids import MessageId

U64_MAX = 2**64 - 1
U64 = st.integers(0, U64_MAX)


def generic(
    producer_id: int,
    name: str,
    sequence_id: int,
    publish_time: int,
    payload: bytes,
    max_size: int,
    with_checksum: bool,
) -> bytes | None:
    send = c.Send(producer_id=producer_id, sequence_id=sequence_id)
    metadata = c.MessageMetadata(
        producer_name=name, sequence_id=sequence_id, publish_time=publish_time
    )
    return build_single(send, metadata, payload, max_size, with_checksum)


@given(
    producer_id=U64,
    name=st.text(max_size=40),
    sends=st.lists(st.tuples(U64, U64, st.binary(max_size=64)), min_size=1, max_size=4),
    max_size=st.integers(0, 200),
    with_checksum=st.booleans(),
)
@example(producer_id=0, name="", sends=[(0, 0, b"")], max_size=5, with_checksum=True)
def test_frames_equal_the_generic_path(
    producer_id: int,
    name: str,
    sends: list[tuple[int, int, bytes]],
    max_size: int,
    with_checksum: bool,
) -> None:
    plain = PlainSends(producer_id, name, max_size, with_checksum)
    for sequence_id, publish_time, payload in sends:  # one writer: its time cache is exercised
        expected = generic(
            producer_id, name, sequence_id, publish_time, payload, max_size, with_checksum
        )
        assert plain.frame(sequence_id, publish_time, payload) == expected


@given(sequence_id=U64, payload=st.binary(max_size=32))
def test_repeated_publish_times_reuse_their_varint(sequence_id: int, payload: bytes) -> None:
    plain = PlainSends(7, "p", 1 << 20, True)
    for time in (1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_001, 5, 5):
        assert plain.frame(sequence_id, time, payload) == generic(
            7, "p", sequence_id, time, payload, 1 << 20, True
        )


def test_frames_decode_as_the_send_they_stand_for() -> None:
    frame = PlainSends(3, "standalone-0-1", 1 << 20, True).frame(300, 1_700_000_000_000, b"abc")
    assert frame is not None
    decoded = decode_frame(frame[4:])
    assert decoded.command == c.Send(producer_id=3, sequence_id=300)
    assert decoded.payload is not None
    assert decoded.payload.checksum_ok()
    assert bytes(decoded.payload.body) == b"abc"


def test_out_of_range_or_too_large_leaves_the_fast_path() -> None:
    plain = PlainSends(1, "p", 10, True)
    assert plain.frame(-1, 0, b"x") is None  # the generic path reports it
    assert plain.frame(U64_MAX + 1, 0, b"x") is None
    assert plain.frame(1, -5, b"x") is None
    assert plain.frame(1, 0, b"x" * 10) is None  # metadata + payload > 10: chunk or refuse
    assert plain.frame(1, 0, b"x") is not None  # the cached time survived the failures


# ---- batches ----------------------------------------------------------------------------------


def generic_batch(
    producer_id: int,
    name: str,
    publish_time: int,
    key: str | None,
    messages: list[tuple[bytes, int]],
    with_checksum: bool,
) -> bytes:
    """A batch SEND as the records describe it (spec §8.1, §8.2)."""
    parts: list[bytes] = []
    for payload, sequence_id in messages:
        header = encode_record(
            c.SingleMessageMetadata(payload_size=len(payload), sequence_id=sequence_id)
        )
        parts += (struct.pack(">I", len(header)), header, payload)
    first = messages[0][1]
    metadata = encode_record(
        c.MessageMetadata(
            producer_name=name,
            sequence_id=first,
            publish_time=publish_time,
            partition_key=key,
            num_messages_in_batch=len(messages),
        )
    )
    entry = struct.pack(">I", len(metadata)) + metadata + b"".join(parts)
    send = c.Send(producer_id=producer_id, sequence_id=first, num_messages=len(messages))
    return encode_payload_frame(send, entry, checksum(entry) if with_checksum else None)


@given(
    producer_id=U64,
    name=st.text(max_size=40),
    publish_time=U64,
    key=st.none() | st.text(max_size=5),
    messages=st.lists(st.tuples(st.binary(max_size=300), U64), min_size=1, max_size=6),
    with_checksum=st.booleans(),
)
@example(
    producer_id=300, name="p", publish_time=0, key=None, messages=[(b"x", 0)], with_checksum=True
)
def test_plain_batches_equal_the_generic_path(
    producer_id: int,
    name: str,
    publish_time: int,
    key: str | None,
    messages: list[tuple[bytes, int]],
    with_checksum: bool,
) -> None:
    batch = BatchBuilder()
    # A builder is reused batch after batch, and its producer may be re-attached with another
    # id or be given its name by the broker.
    for producer, producer_name in (
        (producer_id, name),
        (producer_id, name),
        (producer_id ^ 1, "b"),
    ):
        batch.start(messages[0][1], publish_time, key, 0.0)
        futures = [batch.add_plain(payload, sequence_id) for payload, sequence_id in messages]
        assert (batch.count, batch.size) == (len(messages), sum(len(p) for p, _ in messages))
        first, frame, group, count = batch.build(producer, producer_name, with_checksum)
        assert (first, count) == (messages[0][1], len(messages))
        assert frame == generic_batch(
            producer, producer_name, publish_time, key, messages, with_checksum
        )
        group.set_result(functools.partial(MessageId, 1, 2, -1, batch_size=count))
        assert [f.result().batch_index for f in futures] == list(range(count))
        assert (batch.count, batch.size) == (0, 0)


def test_add_takes_the_plain_path_for_plain_messages() -> None:
    fast, generic_ = BatchBuilder(), BatchBuilder()
    for builder in (fast, generic_):
        builder.start(5, 1, None, 0.0)
    fast.add_plain(b"abc", 5)
    generic_.add(b"abc", 5, None, (), None)
    assert fast.build(1, "p")[1] == generic_.build(1, "p")[1]
