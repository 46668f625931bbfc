"""Partition routing: Murmur3 x86_32 (seed 0) and round robin."""

from __future__ import annotations

import pytest

from protocol.client.routing import RoundRobinRouter, murmur3_32, partition_for_key


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
    ],
)
def test_murmur3_matches_reference_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur3_32(data, seed) == expected


def test_keyed_partition_is_the_masked_hash_modulo_partitions() -> None:
    assert partition_for_key("hello", 7) == (0x248BFA47 & 0x7FFFFFFF) % 7
    assert partition_for_key(b"hello", 7) == partition_for_key("hello", 7)
    assert {partition_for_key(f"k{i}", 3) for i in range(100)} == {0, 1, 2}


def test_round_robin_cycles() -> None:
    router = RoundRobinRouter(3)
    assert [router.next() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
