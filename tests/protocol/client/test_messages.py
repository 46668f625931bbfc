"""Building SEND frames: the fast metadata encoders equal the codec's bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.client.messages import plain_single_metadata
from protocol.codec import encode_record

U64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@given(size=st.integers(min_value=0, max_value=(1 << 31) - 1), sequence_id=U64)
def test_plain_single_metadata_equals_the_codec(size: int, sequence_id: int) -> None:
    expected = encode_record(c.SingleMessageMetadata(payload_size=size, sequence_id=sequence_id))
    assert plain_single_metadata(size, sequence_id) == expected


def test_batches_split_lazily_and_reject_malformed_payloads() -> None:
    from protocol.client.entry import ReceivedEntry, split_batch
    from protocol.client.messages import plain_single_header
    from protocol.client.received import Message
    from protocol.ids import MessageId

    keyed = encode_record(c.SingleMessageMetadata(payload_size=2, partition_key="k"))
    compacted = encode_record(c.SingleMessageMetadata(payload_size=0, compacted_out=True))
    buf = b"".join(
        (
            plain_single_header(3, 9),
            b"abc",
            len(keyed).to_bytes(4, "big"),
            keyed,
            b"de",
            len(compacted).to_bytes(4, "big"),
            compacted,
        )
    )
    parts = split_batch(buf, 3)
    assert parts is not None
    headers, bodies, skipped = parts
    assert bodies == [b"abc", b"de", b""]
    assert skipped == {2}
    assert isinstance(headers[0], bytes)  # plain: decoded only when asked
    assert isinstance(headers[1], c.SingleMessageMetadata)
    meta = c.MessageMetadata(producer_name="p", sequence_id=9, publish_time=1)
    received = ReceivedEntry.of(
        c.Message(consumer_id=0, message_id=c.MessageIdData(ledger_id=1, entry_id=2)),
        -1,
        "t",
        lambda: None,
        ("p", 9, 1, 3, None, None, None),
        meta,
        b"",
        0,
    )
    message = Message(bodies[0], received, 0, headers[0])
    assert (message.sequence_id, message.key, message.properties) == (9, None, {})
    assert message.message_id == MessageId(1, 2, -1, 0, 3)
    assert split_batch(buf, 4) is None  # fewer messages than announced
    assert split_batch(buf[:-1], 3) is None  # a header running past the payload
