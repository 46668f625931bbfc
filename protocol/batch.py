"""Batched entries and batch-index acknowledgement bitmaps (spec/wire-protocol.md §8).

A batched entry's payload is, per message, ``| size:u32 | SingleMessageMetadata | bytes |``.
The broker never unpacks batches; only clients do.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from protocol.codec import decode_record, encode_record
from protocol.commands import SingleMessageMetadata
from protocol.errors import RemoteProtocolError

_U32 = struct.Struct(">I")
_WORD_BITS = 64


def build_batch(messages: Sequence[tuple[SingleMessageMetadata, bytes]]) -> bytes:
    """Concatenate messages into a batch payload (uncompressed)."""
    parts: list[bytes] = []
    for meta, payload in messages:
        header = encode_record(meta)
        parts.append(_U32.pack(len(header)))
        parts.append(header)
        parts.append(payload)
    return b"".join(parts)


def parse_batch(
    payload: bytes | memoryview, count: int
) -> list[tuple[SingleMessageMetadata, bytes]]:
    """Split a (decompressed) batch payload into ``count`` messages.

    Raises:
        RemoteProtocolError: the payload does not hold ``count`` well-formed messages.
    """
    view = memoryview(payload)
    out: list[tuple[SingleMessageMetadata, bytes]] = []
    pos = 0
    for _ in range(count):
        if len(view) - pos < 4:
            raise RemoteProtocolError("batch payload truncated before a message header")
        size = _U32.unpack_from(view, pos)[0]
        pos += 4
        if size > len(view) - pos:
            raise RemoteProtocolError("batch message header runs past the payload")
        meta = decode_record(SingleMessageMetadata, view[pos : pos + size])
        pos += size
        if meta.payload_size < 0 or meta.payload_size > len(view) - pos:
            raise RemoteProtocolError("batch message body runs past the payload")
        out.append((meta, bytes(view[pos : pos + meta.payload_size])))
        pos += meta.payload_size
    return out


def _to_signed(word: int) -> int:
    return word - (1 << 64) if word >= (1 << 63) else word


def ack_set_of(indexes: Iterable[int], size: int) -> tuple[int, ...]:
    """Encode the set bits ``indexes`` (each ``< size``) as signed 64-bit words."""
    words = [0] * ((size + _WORD_BITS - 1) // _WORD_BITS)
    for i in indexes:
        if 0 <= i < size:
            words[i // _WORD_BITS] |= 1 << (i % _WORD_BITS)
    return tuple(_to_signed(w) for w in words)


def indexes_of(ack_set: Sequence[int], size: int) -> frozenset[int]:
    """Decode signed 64-bit words into the set of bit indexes below ``size``."""
    out: set[int] = set()
    for word_index, word in enumerate(ack_set):
        unsigned = word & ((1 << 64) - 1)
        base = word_index * _WORD_BITS
        while unsigned:
            low = unsigned & -unsigned
            i = base + low.bit_length() - 1
            if i < size:
                out.add(i)
            unsigned ^= low
    return frozenset(out)
