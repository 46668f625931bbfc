"""Murmur3 on the Key_Shared hashing path: a pure-Python hash against the `mmh3` package.

Usage: python bench/keyshared_hash.py [--rounds N]

Key_Shared maps each message key to a consumer through the sticky key hash (Murmur3 x86 32-bit,
seed 0, masked to 31 bits; memoized because keys recur) and a selector lookup. The baseline is
the pure-Python Murmur3 the broker and the client used before ``protocol.murmur`` (kept here, and
only here, as the thing measured against). Times per key, side by side in one run:

1. the raw hash (pure Python vs ``protocol.murmur.murmur3_32``, i.e. mmh3) for key sizes a
   producer typically sends (8-byte ids, 16-36-byte UUIDs, 64-byte composite keys);
2. the whole hashing path as the dispatcher runs it (memoized sticky hash + the AUTO_SPLIT
   ring's ``select``) over (a) 1,000 recurring keys, where the memo answers, and (b) keys never
   seen before, where every key is hashed: pure Python memoized against mmh3 memoized, and
   against mmh3 without a memo.

It first checks that both hashes agree on random keys of every tail length. Prints nanoseconds per
key and the ratio pure/mmh3; asserts nothing else. Numbers move between runs on a shared machine:
compare rows of one run.
"""

from __future__ import annotations

import argparse
import functools
import os
import struct
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from emubroker.topics.keyshared import AutoSplitSelector
from protocol.murmur import murmur3_32

_M32 = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593


def pure_murmur3_32(data: bytes, seed: int = 0) -> int:
    """The baseline: Murmur3 x86 32-bit in pure Python."""
    h = seed & _M32
    nblocks = len(data) // 4
    for k in struct.unpack_from(f"<{nblocks}I", data):
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    tail = data[nblocks * 4 :]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * _C1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * _C2) & _M32
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


@functools.lru_cache(maxsize=65536)
def pure_sticky_memo(key: bytes) -> int:
    return pure_murmur3_32(key) & 0x7FFFFFFF


@functools.lru_cache(maxsize=65536)
def mmh3_sticky_memo(key: bytes) -> int:
    return murmur3_32(key) & 0x7FFFFFFF


def mmh3_sticky(key: bytes) -> int:
    return murmur3_32(key) & 0x7FFFFFFF


def ns_per_key(
    fn: Callable[[bytes], object], keys: list[bytes] | Callable[[], list[bytes]], rounds: int
) -> float:
    """Best of ``rounds``; ``keys`` as a callable gives fresh keys per round (memo misses)."""
    best = float("inf")
    for _ in range(rounds):
        batch = keys() if callable(keys) else keys
        start = time.perf_counter_ns()
        for key in batch:
            fn(key)
        best = min(best, (time.perf_counter_ns() - start) / len(batch))
    return best


def fresh_uuids() -> list[bytes]:
    return [os.urandom(18).hex().encode() for _ in range(60_000)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="best of N timing rounds")
    args = parser.parse_args()

    for size in (0, 1, 2, 3, 7, 8, 16, 36, 64, 1000):
        for _ in range(50):
            key = os.urandom(size)
            if pure_murmur3_32(key) != murmur3_32(key):
                raise SystemExit(f"hashes disagree on {key!r}")

    print(f"mmh3 {version('mmh3')}, Python {sys.version.split()[0]}; best of {args.rounds}")
    print(f"{'raw hash, key bytes':<48} {'pure ns':>8} {'mmh3 ns':>8} {'pure/mmh3':>10}")
    for size in (8, 16, 36, 64):
        keys = [os.urandom(size) for _ in range(20_000)]
        pure = ns_per_key(pure_murmur3_32, keys, args.rounds)
        mmh3 = ns_per_key(murmur3_32, keys, args.rounds)
        print(f"{size:<48} {pure:>8.0f} {mmh3:>8.0f} {pure / mmh3:>10.1f}")

    ring: AutoSplitSelector[str] = AutoSplitSelector(100)
    for i in range(4):
        ring.add(f"c{i}", f"consumer-{i}", [])

    def path(hash_fn: Callable[[bytes], int]) -> Callable[[bytes], object]:
        return lambda key: ring.select(hash_fn(key))

    recurring = [f"order-{i % 1000:06d}".encode() for i in range(100_000)]
    print(f"\n{'hash + select, per key':<48} {'pure ns':>8} {'mmh3 ns':>8} {'pure/mmh3':>10}")
    cases: list[tuple[str, list[bytes] | Callable[[], list[bytes]]]] = [
        ("1,000 recurring keys (memo hits)", recurring),
        ("new 36-byte keys (memo misses)", fresh_uuids),
    ]
    for label, keys_of in cases:
        pure_sticky_memo.cache_clear()
        mmh3_sticky_memo.cache_clear()
        pure = ns_per_key(path(pure_sticky_memo), keys_of, args.rounds)
        memo = ns_per_key(path(mmh3_sticky_memo), keys_of, args.rounds)
        bare = ns_per_key(path(mmh3_sticky), keys_of, args.rounds)
        print(f"{label + ', mmh3 memoized':<48} {pure:>8.0f} {memo:>8.0f} {pure / memo:>10.1f}")
        print(f"{label + ', mmh3 without memo':<48} {pure:>8.0f} {bare:>8.0f} {pure / bare:>10.1f}")


if __name__ == "__main__":
    main()
