"""Building SEND frames: the fast metadata encoders equal the codec's bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.client.messages import name_prefix, plain_metadata, plain_single_metadata
from protocol.codec import decode_record, encode_record
from protocol.errors import LocalProtocolError

U64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@given(name=st.text(max_size=300), sequence_id=U64, publish_time=U64)
def test_plain_metadata_equals_the_codec(name: str, sequence_id: int, publish_time: int) -> None:
    expected = encode_record(
        c.MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=publish_time)
    )
    assert plain_metadata(name_prefix(name), name, sequence_id, publish_time) == expected


@given(size=st.integers(min_value=0, max_value=(1 << 31) - 1), sequence_id=U64)
def test_plain_single_metadata_equals_the_codec(size: int, sequence_id: int) -> None:
    expected = encode_record(c.SingleMessageMetadata(payload_size=size, sequence_id=sequence_id))
    assert plain_single_metadata(size, sequence_id) == expected


def test_out_of_range_values_fall_back_to_the_codec() -> None:
    # A sequence id beyond uint64 is the codec's to refuse, with its own error.
    with pytest.raises(LocalProtocolError):
        plain_metadata(name_prefix("p"), "p", 1 << 64, 0)


def test_metadata_round_trips() -> None:
    encoded = plain_metadata(
        name_prefix("standalone-0-1"), "standalone-0-1", 300, 1_700_000_000_000
    )
    decoded = decode_record(c.MessageMetadata, encoded)
    assert (decoded.producer_name, decoded.sequence_id, decoded.publish_time) == (
        "standalone-0-1",
        300,
        1_700_000_000_000,
    )
