"""Choosing the partition of a message: Murmur3-32 of the key, or round robin without one."""

from __future__ import annotations

import itertools

from protocol.murmur import murmur3_32

__all__ = ["RoundRobinRouter", "murmur3_32", "partition_for_key"]


def partition_for_key(key: str | bytes, partitions: int) -> int:
    """The partition of a keyed message: `(murmur3_32(key) & 0x7fffffff) % partitions`."""
    data = key.encode() if isinstance(key, str) else key
    return (murmur3_32(data) & 0x7FFFFFFF) % partitions


class RoundRobinRouter:
    """Partition choice for messages without a key: 0, 1, ..., n-1, 0, ..."""

    def __init__(self, partitions: int) -> None:
        self._next = itertools.cycle(range(partitions)).__next__

    def next(self) -> int:
        """The partition for the next message without a key."""
        return self._next()
