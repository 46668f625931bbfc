"""What a managed ledger and its cursors keep in the metadata store, and where.

Pulsar keeps a topic's ledger list in ZooKeeper at ``/managed-ledgers/<tenant>/<ns>/<domain>/
<encoded-topic>`` (``ManagedLedgerInfo``) and each cursor's mark-delete position in a cursor
ledger, with a pointer to it (and a small fallback copy) in a child node of that path
(``ManagedCursorInfo``). We keep the same paths but store the cursor state itself in the child
node (msgspec JSON, no cursor ledgers): the mark-delete index, the individually acknowledged
ranges after it and the batch-index ack sets of partly acknowledged batches, rewritten as a
whole, coalesced by the topic service's flusher (``cursor_flush``), never per acknowledgement.

Positions are stored as managed-ledger *indexes* (``managed_ledger``): they are stable across
restarts because the ledger list records the first index of every ledger. The human-readable
``(ledger, entry)`` of the mark-delete position is stored alongside for inspection.
"""

from __future__ import annotations

import msgspec

__all__ = [
    "CursorInfo",
    "LedgerRecord",
    "ManagedLedgerInfo",
    "decode_cursor_info",
    "decode_ledger_info",
    "encode_info",
]


class LedgerRecord(msgspec.Struct, forbid_unknown_fields=False):
    """One ledger of a managed ledger.

    Attributes:
        ledger_id: The stub's ledger id.
        first_index: Managed-ledger index of its entry 0.
        entries: Entries it holds; -1 while it is the open ledger (recovered by fencing).
        size: Bytes written to it (known for closed ledgers).
        created: Wall-clock milliseconds when it was created (rollover by age).
    """

    ledger_id: int
    first_index: int
    entries: int = -1
    size: int = 0
    created: int = 0


class ManagedLedgerInfo(msgspec.Struct, forbid_unknown_fields=False):
    """The live ledgers of a topic, oldest first (Pulsar's ``ManagedLedgerInfo``).

    Attributes:
        ledgers: The live ledgers, oldest first.
        terminated: The topic was terminated (Pulsar keeps ``terminatedPosition``): it takes
            no entry any more, across unloads and restarts.
        properties: The topic's properties (Pulsar's ``ManagedLedgerInfo.properties``): given
            when it is created, changed by ``PUT/DELETE .../{topic}/properties``.
    """

    ledgers: list[LedgerRecord]
    terminated: bool = False
    properties: dict[str, str] = {}


class CursorInfo(msgspec.Struct, forbid_unknown_fields=False):
    """A durable subscription's acknowledgement state (Pulsar's ``ManagedCursorInfo``).

    Attributes:
        mark_delete: Index up to which everything is acknowledged (-1: nothing).
        ranges: Individually acknowledged index ranges after it, ``[first, last]`` inclusive.
        batch_acks: ``[index, unacked bitmask]`` of partly acknowledged batches.
        mark_delete_position: ``[ledger, entry]`` of ``mark_delete``, for people reading it.
    """

    mark_delete: int
    ranges: list[tuple[int, int]] = []
    batch_acks: list[tuple[int, int]] = []
    mark_delete_position: tuple[int, int] = (-1, -1)


_ENCODER = msgspec.json.Encoder()
_LEDGER_DECODER = msgspec.json.Decoder(ManagedLedgerInfo)
_CURSOR_DECODER = msgspec.json.Decoder(CursorInfo)


def encode_info(info: ManagedLedgerInfo | CursorInfo) -> bytes:
    """JSON bytes of a ledger list or a cursor."""
    return _ENCODER.encode(info)


def decode_ledger_info(data: bytes) -> ManagedLedgerInfo:
    """Parse a stored ledger list.

    Raises:
        msgspec.DecodeError: Not a ledger list.
    """
    return _LEDGER_DECODER.decode(data)


def decode_cursor_info(data: bytes) -> CursorInfo:
    """Parse a stored cursor.

    Raises:
        msgspec.DecodeError: Not a cursor.
    """
    return _CURSOR_DECODER.decode(data)
