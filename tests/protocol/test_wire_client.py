"""protocol/wire.py client readers agree with protobuf (spec §8.2).

`scan_single_metadata` must, wherever it answers, read the same `payload_size` and
`compacted_out` as `decode_record` and only answer for bytes protobuf accepts; it must give up
on the headers the consumer decodes eagerly (properties, keys) so their validation is unchanged.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from protocol import commands as c
from protocol.client.messages import plain_single_header, plain_single_metadata
from protocol.codec import decode_record, encode_record
from protocol.errors import RemoteProtocolError
from protocol.wire import scan_single_metadata

U64 = st.integers(0, 2**64 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)


def scan(data: bytes) -> tuple[int, bool] | None:
    return scan_single_metadata(data, 0, len(data))


@given(
    payload_size=I32,
    compacted_out=st.none() | st.booleans(),
    event_time=st.none() | U64,
    sequence_id=st.none() | U64,
    null_value=st.none() | st.booleans(),
    null_partition_key=st.none() | st.booleans(),
    b64=st.none() | st.booleans(),
)
def test_varint_headers_are_read_like_the_codec(
    payload_size: int,
    compacted_out: bool | None,
    event_time: int | None,
    sequence_id: int | None,
    null_value: bool | None,
    null_partition_key: bool | None,
    b64: bool | None,
) -> None:
    record = c.SingleMessageMetadata(
        payload_size=payload_size,
        compacted_out=compacted_out,
        event_time=event_time,
        sequence_id=sequence_id,
        null_value=null_value,
        null_partition_key=null_partition_key,
        partition_key_b64_encoded=b64,
    )
    encoded = encode_record(record)
    decoded = decode_record(c.SingleMessageMetadata, encoded)
    assert scan(encoded) == (decoded.payload_size, bool(decoded.compacted_out))


def test_headers_with_length_delimited_fields_take_the_codec() -> None:
    for record in (
        c.SingleMessageMetadata(payload_size=3, partition_key="k"),
        c.SingleMessageMetadata(payload_size=3, properties=(c.KeyValue(key="a", value="b"),)),
        c.SingleMessageMetadata(payload_size=3, ordering_key=b"o"),
    ):
        assert scan(encode_record(record)) is None


def test_missing_payload_size_and_truncation_give_up() -> None:
    assert scan(b"") is None
    assert scan(b"\x40\x05") is None  # sequence_id only: payload_size is required
    assert scan(b"\x18") is None  # tag without its value
    assert scan(b"\x18\x80") is None  # truncated varint


def test_reads_in_place_within_bounds() -> None:
    header = plain_single_metadata(100, 7)
    buf = b"\xff\xff" + header + b"\xff"
    assert scan_single_metadata(buf, 2, 2 + len(header)) == (100, False)


@given(st.binary(max_size=24))
@example(b"\x18\x05\x20\x02")
@example(b"\x18\xff\xff\xff\xff\x0f")  # 2^32-1: protobuf truncates it, so we give up
@example(b"\x18\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01")
def test_random_bytes_never_disagree_with_the_codec(data: bytes) -> None:
    fast = scan(data)
    if fast is None:
        return  # the codec decides on its own
    try:
        decoded = decode_record(c.SingleMessageMetadata, data)
    except RemoteProtocolError as exc:  # pragma: no cover - a failure is the finding
        raise AssertionError(f"fast reader accepted {data!r}, protobuf refused it") from exc
    assert fast == (decoded.payload_size, bool(decoded.compacted_out))


@given(st.integers(0, 2**31 - 1), U64)
def test_plain_single_header_is_length_prefixed_codec_bytes(size: int, sequence_id: int) -> None:
    header = encode_record(c.SingleMessageMetadata(payload_size=size, sequence_id=sequence_id))
    assert plain_single_header(size, sequence_id) == len(header).to_bytes(4, "big") + header
