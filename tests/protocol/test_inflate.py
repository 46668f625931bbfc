"""Bounded ZLIB inflation of client payloads."""

from __future__ import annotations

import zlib

from protocol.inflate import MAX_INFLATED, inflate_zlib


def test_a_payload_inflates_to_the_size_it_states() -> None:
    body = b"hello " * 1000
    assert inflate_zlib(zlib.compress(body), len(body)) == body
    assert inflate_zlib(zlib.compress(body), None) == body
    assert inflate_zlib(zlib.compress(b""), 0) == b""


def test_a_bomb_is_undecodable_without_being_inflated() -> None:
    # 80 MiB of zeros in 80 KiB (zlib expands a thousandfold: 5 MiB would be 5 GiB).
    bomb = zlib.compressobj(9)
    chunk = bytes(1024 * 1024)
    payload = b"".join(bomb.compress(chunk) for _ in range(80)) + bomb.flush()
    assert len(payload) < 100 * 1024
    assert inflate_zlib(payload, 100) is None  # more than it claims
    assert inflate_zlib(payload, None) is None  # more than the ceiling
    assert inflate_zlib(payload, 2**32 - 1) is None  # a claim above the ceiling


def test_a_corrupt_or_truncated_stream_is_undecodable() -> None:
    body = bytes(range(256)) * 10
    packed = zlib.compress(body)
    assert inflate_zlib(b"not zlib at all", 100) is None
    assert inflate_zlib(packed[:-5], len(body)) is None
    assert inflate_zlib(packed, MAX_INFLATED + 1) is None
