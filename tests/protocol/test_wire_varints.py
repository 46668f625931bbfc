"""protocol/wire.py varints: the unrolled and table-driven forms equal a plain byte-by-byte model.

`uvarint` takes a different formulation per length (tables for one to three bytes, lane
spreading up to eight, a loop beyond) and `read_varint` unrolls up to six bytes: every length,
every length boundary, and every position of a varint against its buffer's end is compared with
the straightforward loops below.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from protocol import wire
from tests.support.bytestreams import varint

U64_MAX = 2**64 - 1

# Every value at and around a change of varint length, plus random values of every bit length.
_BOUNDARIES = sorted(
    {v for k in range(1, 10) for v in (2 ** (7 * k) - 1, 2 ** (7 * k), 2 ** (7 * k) + 1)}
    | {0, 1, 2**56 - 1, 2**56, 2**63 - 1, 2**63, U64_MAX}
)
_rnd = random.Random(20261122)
_BY_BIT_LENGTH = [
    _rnd.getrandbits(bits) | 1 << (bits - 1) for bits in range(1, 65) for _ in range(50)
]


def reference_read(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """`read_varint`'s contract, one byte at a time."""
    result = 0
    for i in range(10):
        if pos + i >= end:
            raise wire.OffTheFastLane
        byte = buf[pos + i]
        if i == 9:  # a canonical uint64's tenth byte is 0x01; protobuf judges the rest
            if byte != 1:
                raise wire.OffTheFastLane
            return result | 1 << 63, pos + 10
        result |= (byte & 0x7F) << 7 * i
        if byte < 0x80:
            return result, pos + i + 1
    raise AssertionError("unreachable")


def outcome(read: object, buf: bytes, pos: int, end: int) -> object:
    try:
        return read(buf, pos, end)  # type: ignore[operator]
    except wire.OffTheFastLane:
        return "off the fast lane"


# ---- uvarint ----------------------------------------------------------------------------------


def test_uvarint_equals_the_byte_loop_at_every_length() -> None:
    for value in _BOUNDARIES + _BY_BIT_LENGTH:
        assert wire.uvarint(value) == varint(value), value


def test_uvarint_is_exact_over_the_tables_range() -> None:
    # One and two bytes exhaustively, three bytes every 7th value (the tables' whole range).
    for value in list(range(2**14 + 1)) + list(range(2**14, 2**21 + 7, 7)):
        assert wire.uvarint(value) == varint(value), value


@pytest.mark.parametrize("value", [-1, -(2**63), U64_MAX + 1, 2**70])
def test_uvarint_refuses_what_protobuf_refuses(value: int) -> None:
    with pytest.raises(wire.OffTheFastLane):
        wire.uvarint(value)


def test_continued_bytes_start_every_longer_varint() -> None:
    for value in (128, 300, 2**20, 2**40, U64_MAX):
        assert wire.uvarint(value) == (
            wire.CONTINUED_BYTES[value & 0x7F] + wire.uvarint(value >> 7)
        )


# ---- read_varint ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", _BOUNDARIES + _BY_BIT_LENGTH[::7])
def test_read_varint_equals_the_byte_loop_at_every_position_against_the_end(value: int) -> None:
    # The varint after 0..2 bytes, followed by 0..7 bytes, read with every end: the unrolled
    # lanes depend on how many bytes are left.
    for lead in range(3):
        for tail in (b"", b"\x00", b"\x81\x01", b"\x05" * 7):
            buf = b"\xaa" * lead + varint(value) + tail
            for end in range(lead, len(buf) + 1):
                expected = outcome(reference_read, buf, lead, end)
                assert outcome(wire.read_varint, buf, lead, end) == expected, (buf, end)


@given(st.binary(max_size=16), st.integers(0, 16), st.integers(0, 16))
@example(b"\xff" * 9 + b"\x01", 0, 10)
@example(b"\xff" * 9 + b"\x02", 0, 10)
@example(b"\x80" * 5 + b"\x00", 0, 6)
@example(b"\x80" * 6 + b"\x00", 0, 7)
def test_read_varint_equals_the_byte_loop_on_any_bytes(buf: bytes, pos: int, end: int) -> None:
    end = min(end, len(buf))
    assert outcome(wire.read_varint, buf, pos, end) == outcome(reference_read, buf, pos, end)


@given(st.lists(st.integers(0, 255), min_size=1, max_size=12))
def test_read_varint_equals_the_byte_loop_on_continued_runs(bytes_: list[int]) -> None:
    # Mostly continuation bytes: the long forms, non-canonical zero groups, truncations.
    buf = bytes(b | 0x80 if i < len(bytes_) - 1 else b for i, b in enumerate(bytes_))
    for end in range(len(buf) + 1):
        assert outcome(wire.read_varint, buf, 0, end) == outcome(reference_read, buf, 0, end)
