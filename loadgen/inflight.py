"""One partition producer's state: sequence ids, the FIFO of messages in flight, receipts.

Receipts come back in send order per handler, so the messages in flight are a FIFO. It is
columnar (a list of intended times, one of send times, one of keys) and a message's place in it
is its sequence id (loadgen numbers each handler's messages 0, 1, 2, ...), so a receipt of a
whole batch is a range of places: slices, not a step per message.
"""

from __future__ import annotations

from typing import Final

from loadgen.drivers import ProducerLike
from loadgen.trace.writer import ColumnBuffer

__all__ = ["PartitionSends"]

_COMPACT_AT: Final = 8192
"""Receipted FIFO slots a handler drops at once (dropping them one batch at a time would move
the whole outstanding rest each time)."""


class PartitionSends:
    """One partition handler: its sequence ids, in-flight FIFO, receipts and trace rows.

    The FIFO holds the messages from sequence id `base` on (receipted ones until compacted);
    `head` is the place of the oldest message without an outcome, sequence id `base + head`.
    """

    __slots__ = (
        "acked",
        "base",
        "failed",
        "handler",
        "head",
        "index",
        "intended",
        "keys",
        "next_seq",
        "receipted",
        "rows",
        "sent",
    )

    handler: ProducerLike

    def __init__(self, index: int, rows: ColumnBuffer) -> None:
        self.index = index
        self.next_seq = 0
        self.base = 0
        self.head = 0
        self.intended: list[int] = []
        self.sent: list[int] = []
        self.keys: list[int] = []  # key indexes, when the producer sends keys
        self.acked = bytearray(4096)
        self.receipted = 0
        self.failed = 0
        self.rows = rows

    def take(self, count: int) -> tuple[int, int, int]:
        """Move the head past `count` messages: (their first sequence id, start, end in FIFO)."""
        start = self.head
        end = self.head = start + count
        if end > len(self.intended):
            raise RuntimeError(f"{count} outcomes for {len(self.intended) - start} messages")
        return self.base + start, start, end

    def compact(self) -> None:
        """Drop the messages with an outcome once there are enough of them."""
        head = self.head
        if head >= _COMPACT_AT:
            del self.intended[:head], self.sent[:head], self.keys[:head]
            self.base += head
            self.head = 0
