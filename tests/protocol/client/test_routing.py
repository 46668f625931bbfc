"""Partition routing: Murmur3 x86_32 (seed 0) of the key, and round robin."""

from __future__ import annotations

from protocol.client.routing import RoundRobinRouter, partition_for_key


def test_keyed_partition_is_the_masked_hash_modulo_partitions() -> None:
    assert partition_for_key("hello", 7) == (0x248BFA47 & 0x7FFFFFFF) % 7
    assert partition_for_key(b"hello", 7) == partition_for_key("hello", 7)
    assert {partition_for_key(f"k{i}", 3) for i in range(100)} == {0, 1, 2}


def test_round_robin_cycles() -> None:
    router = RoundRobinRouter(3)
    assert [router.next() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
