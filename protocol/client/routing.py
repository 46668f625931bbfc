"""Choosing the partition of a message: Murmur3-32 of the key, or round robin without one."""

from __future__ import annotations

import itertools

__all__ = ["RoundRobinRouter", "murmur3_32", "partition_for_key"]

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_MASK = 0xFFFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of `data` (unsigned result), as Pulsar's `Murmur3_32Hash`."""
    h = seed & _MASK
    length = len(data)
    tail_start = length - (length % 4)
    for i in range(0, tail_start, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _C1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * _C2) & _MASK
        h ^= k
        h = ((h << 13) | (h >> 19)) & _MASK
        h = (h * 5 + 0xE6546B64) & _MASK
    k = 0
    tail = data[tail_start:]
    if len(tail) == 3:
        k ^= tail[2] << 16
    if len(tail) >= 2:
        k ^= tail[1] << 8
    if tail:
        k ^= tail[0]
        k = (k * _C1) & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        k = (k * _C2) & _MASK
        h ^= k
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    h ^= h >> 16
    return h


def partition_for_key(key: str | bytes, partitions: int) -> int:
    """The partition of a keyed message: `(murmur3_32(key) & 0x7fffffff) % partitions`."""
    data = key.encode() if isinstance(key, str) else key
    return (murmur3_32(data) & 0x7FFFFFFF) % partitions


class RoundRobinRouter:
    """Partition choice for messages without a key: 0, 1, ..., n-1, 0, ..."""

    def __init__(self, partitions: int) -> None:
        self._next = itertools.cycle(range(partitions)).__next__

    def next(self) -> int:
        return self._next()
