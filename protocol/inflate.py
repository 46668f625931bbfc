"""Undoing ZLIB compression of a stored payload without trusting it.

A payload comes from a client, and zlib expands about a thousandfold: 5 MiB of compressed
zeros is 5 GiB. The broker inflates only where Pulsar's broker decodes (an admin peek shows the
message's body; compaction reads the keys of a batch), and as Pulsar does, into at most the
``uncompressed_size`` the message's metadata states (Pulsar allocates exactly that); whatever
claims more than :data:`MAX_INFLATED`, inflates to more than it claims, or is not a complete
zlib stream is *undecodable*, which each caller already handles (the raw bytes are shown, the
batch is kept as it is).
"""

from __future__ import annotations

import zlib
from typing import Final

__all__ = ["MAX_INFLATED", "inflate_zlib"]

MAX_INFLATED: Final = 64 * 1024 * 1024
"""Bytes a payload may inflate to: Pulsar's clients refuse messages whose uncompressed size is
above ``maxMessageSize`` (5 MiB by default), so this leaves room for a raised limit."""


def inflate_zlib(payload: bytes | memoryview, uncompressed_size: int | None) -> bytes | None:
    """The inflated payload, or None when it is undecodable (module docstring).

    Args:
        payload: The compressed bytes.
        uncompressed_size: The size the message's metadata states; None: up to the ceiling.
    """
    limit = MAX_INFLATED if uncompressed_size is None else uncompressed_size
    if not 0 <= limit <= MAX_INFLATED:
        return None
    inflater = zlib.decompressobj()
    try:
        # One byte more than allowed tells "exactly the limit" from "more than it".
        data = inflater.decompress(payload, limit + 1)
    except zlib.error:
        return None
    if len(data) > limit or not inflater.eof:
        return None
    return data
