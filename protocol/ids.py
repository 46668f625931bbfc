"""Message ids and their sentinels.

The client orders ids by (ledger, entry, batch index) and compares equality on those plus the
partition (spec/wire-protocol.md §10). Ledger and entry ids are signed 64-bit values here; the
codec maps them to the wire's uint64, so ``-1`` travels as ``2**64 - 1``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import msgspec

from protocol.commands import MessageIdData

MAX_I64 = (1 << 63) - 1


class MessageId(msgspec.Struct, frozen=True, eq=False):
    """A message's identity: entry position, partition index and index inside a batch.

    ``batch_size`` rides along for acknowledgement bitmaps but is not part of the identity: the
    C++ client compares (ledger, entry, partition, batch index), and GET_LAST_MESSAGE_ID carries
    no batch size, so the last id of a batch must equal the id of the message received.
    """

    ledger_id: int
    entry_id: int
    partition: int = -1
    batch_index: int = -1
    batch_size: int = 0

    @property
    def key(self) -> tuple[int, int, int]:
        """The ordering key (partition is not part of it)."""
        return (self.ledger_id, self.entry_id, self.batch_index)

    @property
    def identity(self) -> tuple[int, int, int, int]:
        """What equality compares: (ledger, entry, partition, batch index)."""
        return (self.ledger_id, self.entry_id, self.partition, self.batch_index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self.identity == other.identity

    def __hash__(self) -> int:
        return hash(self.identity)

    # Fix (tests/protocol/test_ids.py): functools.total_ordering added nothing here, because
    # msgspec.Struct already defines the rich comparisons (answering NotImplemented), so `<=`
    # and `>=` raised TypeError. Spelled out as pulsar-client-cpp's lib/MessageId.cc derives
    # them from `<` and `==`; for ids equal but for the partition, `>` and `>=` hold both ways
    # there too.
    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self.key < other.key

    def __le__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self.key < other.key or self == other

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return not (self.key < other.key or self == other)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return not self.key < other.key

    def to_data(self) -> MessageIdData:
        """The wire form; batch fields are written only for batched ids."""
        if self.batch_index < 0:
            return MessageIdData(
                ledger_id=self.ledger_id, entry_id=self.entry_id, partition=self.partition
            )
        return MessageIdData(
            ledger_id=self.ledger_id,
            entry_id=self.entry_id,
            partition=self.partition,
            batch_index=self.batch_index,
            batch_size=self.batch_size or None,
        )

    @classmethod
    def from_data(cls, data: MessageIdData, partition: int | None = None) -> MessageId:
        """Build from the wire form, optionally overriding the partition."""
        return cls(
            data.ledger_id,
            data.entry_id,
            data.partition if partition is None else partition,
            data.batch_index,
            data.batch_size or 0,
        )


EARLIEST = MessageId(-1, -1)
"""The client's ``MessageId.earliest``: (-1, -1)."""

LATEST = MessageId(MAX_I64, MAX_I64)
"""The client's ``MessageId.latest``: (2^63-1, 2^63-1)."""


def is_earliest(data: MessageIdData) -> bool:
    """True for the earliest sentinel (ledger and entry both -1)."""
    return data.ledger_id == -1 and data.entry_id == -1


def is_latest(data: MessageIdData) -> bool:
    """True for the latest sentinel (ledger and entry both 2^63-1)."""
    return data.ledger_id == MAX_I64 and data.entry_id == MAX_I64


class WholeEntryIds(Sequence[MessageIdData]):
    """Message ids of whole entries of one ledger: what a grouped ACK names (spec §7.3).

    The sequence of ``MessageIdData(ledger_id=ledger_id, entry_id=e)`` for each of
    ``entry_ids``, each record built only when looked at: ``wire.parse_ack`` gives this for an
    ACK whose every id is a plain ``(ledgerId, entryId)`` of the same small ledger, so that the
    broker applies them from ``entry_ids`` without a record per id. It equals the tuple of those
    records (and hashes as it), so to anything else it is that tuple.
    """

    __slots__ = ("entry_ids", "ledger_id")

    def __init__(self, ledger_id: int, entry_ids: list[int]) -> None:
        self.ledger_id = ledger_id
        self.entry_ids = entry_ids

    def __len__(self) -> int:
        return len(self.entry_ids)

    @overload
    def __getitem__(self, index: int) -> MessageIdData: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[MessageIdData, ...]: ...

    def __getitem__(self, index: int | slice) -> MessageIdData | tuple[MessageIdData, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        return MessageIdData(ledger_id=self.ledger_id, entry_id=self.entry_ids[index])

    def __iter__(self) -> Iterator[MessageIdData]:
        ledger_id = self.ledger_id
        return (MessageIdData(ledger_id=ledger_id, entry_id=e) for e in self.entry_ids)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WholeEntryIds):
            return (self.ledger_id, self.entry_ids) == (other.ledger_id, other.entry_ids)
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))
