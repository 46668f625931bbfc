"""Murmur3 x86_32, the hash of partition routing and Key_Shared."""

from __future__ import annotations

import pytest

from protocol.client import murmur3_32 as exported_by_the_client
from protocol.murmur import murmur3_32


@pytest.mark.parametrize(
    ("data", "seed", "expected"),
    [
        # Reference values of MurmurHash3_x86_32 (Austin Appleby's SMHasher vectors).
        (b"", 0, 0x00000000),
        (b"", 1, 0x514E28B7),
        (b"", 0xFFFFFFFF, 0x81F16F39),
        (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
        (b"a", 0x9747B28C, 0x7FA09EA6),
        (b"aa", 0x9747B28C, 0x5D211726),
        (b"aaa", 0x9747B28C, 0x283E0130),
        (b"aaaa", 0x9747B28C, 0x5A97808A),
        (b"Hello, world!", 0x9747B28C, 0x24884CBA),
        (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
        (b"hello", 0, 0x248BFA47),
        (b"abc", 0, 0xB3DD93FA),
        (b"abcd", 0, 0x43ED676A),
        (b"The quick brown fox jumps over the lazy dog", 0, 0x2E4FF723),
    ],
)
def test_murmur3_matches_reference_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_32(data, seed) == expected


def test_seeds_are_taken_modulo_2_to_the_32() -> None:
    assert murmur3_32(b"", 0x1_FFFF_FFFF) == murmur3_32(b"", 0xFFFFFFFF) == 0x81F16F39


def test_the_client_exports_the_same_hash() -> None:
    assert exported_by_the_client is murmur3_32
