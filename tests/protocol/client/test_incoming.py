"""protocol/client/incoming.py: the consumer's fast lanes decode like the generic path.

`Incoming.decode` reads metadata with `wire.parse_metadata` (client tags) and splits plain
batches with `_plain_batch`, keeping headers, ids and metadata records for later; switched off,
both give way to the generic path (`decode_record` of everything, `split_batch`). On generated,
mutated and odd entries the two must yield the same messages (every property an application
can read), the same skipped count and validation error, and the same batch bookkeeping.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any
from unittest import mock

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.client import incoming
from protocol.client.acks import BatchTracker
from protocol.client.chunks import ChunkAssembler
from protocol.client.entry import ReceivedEntry, split_batch
from protocol.client.incoming import Decoded, Incoming, _plain_batch
from protocol.client.messages import plain_single_header
from protocol.client.received import Message
from protocol.codec import encode_record
from protocol.framing import Payload, build_entry
from protocol.ids import MessageId
from tests.protocol.test_wire import mutated
from tests.support.strategies import records

# ---- generated batches ------------------------------------------------------------------------

SEQUENCE_IDS = st.one_of(
    st.integers(0, 2**7),
    st.integers(0, 2**22),
    st.integers(2**27, 2**29),
    st.integers(0, 2**64 - 1),
)


@st.composite
def batched_message(draw: st.DrawFn, plain: bool = False) -> bytes:
    """One `| size | SingleMessageMetadata | payload |`: plain (as producers write) or any."""
    # Sizes around 16 KiB take two-byte payload_size varints in (and three out of) the fast lane.
    payload = draw(st.binary(max_size=300) | st.integers(16_380, 16_390).map(b"y".__mul__))
    if plain or draw(st.booleans()):
        return plain_single_header(len(payload), draw(SEQUENCE_IDS)) + payload
    header = draw(records(c.SingleMessageMetadata))
    if draw(st.booleans()):
        header = msgspec.structs.replace(header, payload_size=len(payload))
    encoded = encode_record(header)
    return len(encoded).to_bytes(4, "big") + encoded + payload


batch_parts = st.one_of(
    st.lists(batched_message(plain=True), max_size=6), st.lists(batched_message(), max_size=6)
)
batch_payloads = batch_parts.map(lambda parts: b"".join(parts))


def batch_entry(body: bytes, count: int) -> tuple[bytes, int]:
    meta = c.MessageMetadata(
        producer_name="p", sequence_id=3, publish_time=4, num_messages_in_batch=count
    )
    encoded = encode_record(meta)
    return build_entry(encoded, body), 4 + len(encoded)


def received_entry(entry: bytes, body_start: int, count: int) -> ReceivedEntry:
    command = c.Message(consumer_id=1, message_id=c.MessageIdData(ledger_id=5, entry_id=6))
    fields = ("p", 3, 4, count, None, None, None)
    return ReceivedEntry.of(command, -1, "t", lambda: None, fields, None, entry, body_start)


def check_plain_batch(body: bytes, count: int) -> None:
    entry, start = batch_entry(body, count)
    received = received_entry(entry, start, count)
    fast = _plain_batch(entry, start, count, received)
    split = split_batch(entry, count, start)
    plain = split is not None and not split[2] and all(type(h) is bytes for h in split[0])
    if fast is None:
        assert not plain, "a batch of plain headers must take the fast lane"
        return
    assert split is not None
    assert plain
    headers, bodies, _ = split
    assert [m.payload for m in fast] == bodies
    assert [m._index for m in fast] == list(range(count))
    assert [received.header(i) for i in range(count)] == headers


@given(batch_payloads, st.integers(0, 7))
def test_plain_batch_splits_likesplit_batch(body: bytes, count: int) -> None:
    check_plain_batch(body, count)


@given(mutated(batch_payloads), st.integers(0, 7))
def test_plain_batch_never_accepts_whatsplit_batch_refuses(body: bytes, count: int) -> None:
    check_plain_batch(body, count)


def test_plain_batch_reads_every_plain_header_shape() -> None:
    for size in (0, 1, 127, 128, 16_383, 16_384):
        for sequence_id in (0, 127, 128, 2**21, 2**28 - 1, 2**28, 2**64 - 1):
            body = (plain_single_header(size, sequence_id) + b"x" * size) * 2
            check_plain_batch(body, 2)
            entry, start = batch_entry(body, 2)
            out = _plain_batch(entry, start, 2, received_entry(entry, start, 2))
            assert out is not None
            assert [m.payload for m in out] == [b"x" * size] * 2


@st.composite
def equal_size_runs(draw: st.DrawFn) -> tuple[bytes, int]:
    """A batch of plain messages of one size, long enough for `_equal_size_run`, and a count."""
    size = draw(st.sampled_from([0, 1, 100, 127, 128, 300, 16_384]))
    sequence_ids = draw(st.lists(SEQUENCE_IDS, min_size=1, max_size=40))
    body = b"".join(plain_single_header(size, s) + b"z" * size for s in sequence_ids)
    count = draw(st.just(len(sequence_ids)) | st.integers(0, 41))
    return body, count


@given(equal_size_runs())
def test_equal_size_runs_split_likesplit_batch(case: tuple[bytes, int]) -> None:
    body, count = case
    check_plain_batch(body, count)


@given(mutated(equal_size_runs().map(lambda case: case[0])), st.integers(16, 41))
def test_equal_size_runs_never_accept_whatsplit_batch_refuses(body: bytes, count: int) -> None:
    check_plain_batch(body, count)


def test_equal_size_runs_take_the_regular_expression() -> None:
    for size in (0, 100, 16_384):
        for first in (0, 120, 2**21 - 10, 2**63 - 30):  # sequence ids of 1 to 4 and 9 bytes
            body = b"".join(plain_single_header(size, first + i) + b"z" * size for i in range(20))
            entry, start = batch_entry(body, 20)
            received = received_entry(entry, start, 20)
            out = incoming._equal_size_run(entry, start, 20, received)
            assert out is not None
            assert [m.payload for m in out] == [b"z" * size] * 20
            assert incoming._equal_size_run(entry, start, 19, received) is None  # one left over
            assert incoming._equal_size_run(entry + b"!", start, 20, received) is None
    # A ten-byte sequence id is left to the loop, which reads it.
    body = b"".join(plain_single_header(5, 2**64 - 1) + b"z" * 5 for _ in range(20))
    entry, start = batch_entry(body, 20)
    assert incoming._equal_size_run(entry, start, 20, received_entry(entry, start, 20)) is None
    check_plain_batch(body, 20)


# ---- Incoming.decode, fast lanes on and off ---------------------------------------------------


class _Owner:
    """Stands for the consumer a message's entry refers to (weakly)."""


OWNER = _Owner()


def new_incoming(start: MessageId | None, inclusive: bool) -> Incoming:
    incoming_ = Incoming("t", 2, OWNER, BatchTracker(), ChunkAssembler(), lambda _l, _e: False)
    incoming_.start_id = start
    incoming_.inclusive = inclusive
    return incoming_


def outcome(call: Any) -> Any:
    try:
        return call()
    except Exception as exc:  # the same failure on both paths counts as the same outcome
        return type(exc)


def view(message: Message) -> tuple[Any, ...]:
    """Everything an application can read from a message."""
    names = (
        "payload",
        "message_id",
        "topic",
        "redelivery_count",
        "properties",
        "key",
        "ordering_key",
        "event_time",
        "publish_time",
        "producer_name",
        "sequence_id",
        "metadata",
        "_consumer",
    )
    values = tuple(outcome(lambda name=name: getattr(message, name)) for name in names)
    return (*values, message.message_id.batch_size, repr(message))


def decode_view(incoming_: Incoming, command: c.Message, entry: bytes) -> tuple[Any, ...]:
    decoded: Decoded = incoming_.decode(command, Payload(entry))
    messages, skipped, validation_error = decoded
    views = [view(m) for m in messages]
    return views, skipped, validation_error, incoming_.batches._outstanding


@st.composite
def message_entries(draw: st.DrawFn) -> tuple[c.Message, bytes, MessageId | None, bool]:
    meta = draw(records(c.MessageMetadata))
    parts = draw(batch_parts)
    body = b"".join(parts) if parts else draw(st.binary(max_size=40))
    if draw(st.booleans()):  # what producers write: none of the fields off the fast lane
        meta = msgspec.structs.replace(
            meta,
            properties=(),
            replicated_from=None,
            replicate_to=(),
            compression=None,
            encryption_keys=(),
            encryption_algo=None,
            uuid=None,
            num_chunks_from_msg=None,
            total_chunk_msg_size=None,
            chunk_id=None,
        )
    if draw(st.booleans()):
        count = draw(st.just(len(parts)) | st.integers(-1, 7))
        meta = msgspec.structs.replace(meta, num_messages_in_batch=count)
    entry = build_entry(encode_record(meta), body)
    if draw(st.booleans()):
        entry = draw(mutated(st.just(entry)))
        if len(entry) < 4 or int.from_bytes(entry[:4]) > len(entry) - 4:
            entry = build_entry(encode_record(meta), body)  # framing refuses these
    command = c.Message(
        consumer_id=1,
        message_id=c.MessageIdData(ledger_id=7, entry_id=draw(st.integers(0, 3))),
        redelivery_count=draw(st.integers(0, 3)),
        ack_set=draw(st.sampled_from([(), (), (), (0b101,), (-1,), (0,)])),
    )
    start = draw(
        st.none()
        | st.builds(MessageId, st.just(7), st.integers(0, 3), st.just(2), st.integers(-1, 7))
    )
    return command, entry, start, draw(st.booleans())


def assert_decoded_like_the_generic_path(
    command: c.Message, entry: bytes, start: MessageId | None, inclusive: bool
) -> None:
    fast = decode_view(new_incoming(start, inclusive), command, entry)
    with (
        mock.patch.object(incoming, "parse_metadata", return_value=None),
        mock.patch.object(incoming, "_plain_batch", return_value=None),
    ):
        generic = decode_view(new_incoming(start, inclusive), command, entry)
    assert fast == generic


@given(message_entries())
def test_decode_reads_like_the_generic_path(
    case: tuple[c.Message, bytes, MessageId | None, bool],
) -> None:
    assert_decoded_like_the_generic_path(*case)


@given(
    parts=st.lists(batched_message(plain=True), min_size=1, max_size=8),
    name=st.text(max_size=5),
    key=st.none() | st.text(max_size=3),
    redelivery_count=st.integers(0, 2),
    start_index=st.none() | st.integers(-1, 8),
    inclusive=st.booleans(),
)
def test_plain_batches_decode_like_the_generic_path(
    parts: list[bytes],
    name: str,
    key: str | None,
    redelivery_count: int,
    start_index: int | None,
    inclusive: bool,
) -> None:
    meta = c.MessageMetadata(
        producer_name=name,
        sequence_id=1,
        publish_time=2,
        partition_key=key,
        num_messages_in_batch=len(parts),
        uncompressed_size=9,
    )
    entry = build_entry(encode_record(meta), b"".join(parts))
    data = c.MessageIdData(ledger_id=7, entry_id=1)
    command = c.Message(consumer_id=1, message_id=data, redelivery_count=redelivery_count)
    start = None if start_index is None else MessageId(7, 1, 2, start_index)
    assert_decoded_like_the_generic_path(command, entry, start, inclusive)


def test_plain_entries_take_the_fast_lanes() -> None:
    body = b"".join(plain_single_header(3, i) + b"abc" for i in range(4))
    meta = c.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=9, num_messages_in_batch=4
    )
    entry = build_entry(encode_record(meta), body)
    command = c.Message(consumer_id=1, message_id=c.MessageIdData(ledger_id=7, entry_id=1))
    with mock.patch.object(incoming, "decode_record", side_effect=AssertionError):
        messages, _, _ = new_incoming(None, False).decode(command, Payload(entry))
    assert [m.payload for m in messages] == [b"abc"] * 4
    message = messages[2]
    assert message._id is None  # made on first use only
    assert message._single is None
    assert message.message_id == MessageId(7, 1, 2, 2, 4)
    assert (message.sequence_id, message.publish_time, message.producer_name) == (2, 9, "p")
    assert message.metadata == meta


class _Queueing:
    """A consumer stand-in that keeps its messages, as a consumer's receive queue does."""

    def __init__(self) -> None:
        self.queue: list[Message] = []


def test_messages_are_untracked_and_cannot_keep_their_consumer_alive() -> None:
    body = b"".join(plain_single_header(3, i) + b"abc" for i in range(20))
    meta = c.MessageMetadata(
        producer_name="p", sequence_id=0, publish_time=9, num_messages_in_batch=20
    )
    entry = build_entry(encode_record(meta), body)
    command = c.Message(consumer_id=1, message_id=c.MessageIdData(ledger_id=7, entry_id=1))
    owner = _Queueing()
    decoder = Incoming("t", -1, owner, BatchTracker(), ChunkAssembler(), lambda _l, _e: False)
    owner.queue, _, _ = decoder.decode(command, Payload(entry))
    assert len(owner.queue) == 20
    assert not any(gc.is_tracked(m) for m in owner.queue)
    assert owner.queue[0]._consumer is owner
    # owner -> queue -> message -> entry -> owner would be a cycle the collector cannot see
    # through untracked messages; the entry's reference is weak, so there is none.
    alive = weakref.ref(owner)
    del owner, decoder
    gc.collect()
    assert alive() is None
