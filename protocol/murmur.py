"""Murmur3 x86 32-bit, as Pulsar's ``Murmur3_32Hash`` (Guava's ``murmur3_32``) computes it.

Two things hash with it: a client choosing the partition of a keyed message (spec §14.4) and the
broker's Key_Shared sticky key hash. Computed by the maintained ``mmh3`` package (C): on the
Key_Shared path it costs a fifth of the pure-Python hash for a key the memo has not seen and
20 to 100 times less as a raw hash (bench/keyshared_hash.py, docs/performance.md).
"""

from __future__ import annotations

import mmh3

__all__ = ["murmur3_32"]

_M32 = 0xFFFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """Murmur3 x86 32-bit hash of `data` as an unsigned int (`seed` taken modulo 2**32)."""
    return mmh3.hash(data, seed & _M32, signed=False)
