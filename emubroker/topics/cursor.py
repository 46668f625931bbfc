"""A subscription's durable acknowledgements: Pulsar's managed cursor, reduced and pure.

Positions are managed-ledger indexes (see ``managed_ledger``). The cursor is the part of a
subscription's acknowledgement state that is persisted and outlives the topic object; its owner
is ``acks.Acknowledgements``, the only caller of the methods that change it. Everyone else reads
it through its queries (:meth:`Cursor.is_acked`, :meth:`Cursor.ranges`, :meth:`Cursor.backlog`
...), never its sets, so that how acknowledgements are kept can change here alone. Invariants:

1. ``mark_delete`` is the last index such that it and everything before it is acknowledged
   (-1: nothing). It only moves forward, except on :meth:`Cursor.reset` (seek).
2. ``acked`` holds the fully acknowledged indexes after ``mark_delete`` (individual acks out of
   order); whenever ``mark_delete + 1`` is in it, the mark-delete position advances.
3. ``partial`` maps an index after ``mark_delete`` that is a partly acknowledged batch to the
   bitmask of its messages still unacknowledged (bit i set: message i still to deliver, the
   meaning of ``MessageIdData.ack_set``, spec/wire-protocol.md §7.3). A mask that reaches 0 makes
   the entry fully acknowledged.
4. ``version`` goes up with every change, so that a persisted copy knows it is stale
   (``cursor_flush``), and every change calls ``on_change`` when one is set (the flusher's mark:
   its periodic flush visits only the topics whose cursors changed).

The cursor of a durable subscription outlives its topic object: on unload the service keeps it,
and the reloaded topic resumes from it (§9).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Set

__all__ = ["Cursor", "mask_from_words", "words_from_mask"]

_WORD = 64
_WORD_MASK = (1 << 64) - 1
_MAX_FULL_WORDS = 1 << 16
"""Words of a batch's ack set sent in full (4 Mi messages: more than a 5 MiB frame holds)."""


def mask_from_words(words: tuple[int, ...] | list[int], size: int) -> int:
    """Join signed 64-bit ``ack_set`` words into one bitmask limited to ``size`` bits.

    Costs what the words do, whatever ``size``: a batch's message count is the producer's word
    (a hostile one may claim two billion), so no mask of ``size`` bits is ever built.
    """
    mask = 0
    for i, word in enumerate(words):
        mask |= (word & _WORD_MASK) << (i * _WORD)
    if size < len(words) * _WORD:
        mask &= (1 << size) - 1
    return mask


def words_from_mask(mask: int, size: int) -> tuple[int, ...]:
    """Split a bitmask of ``size`` bits into signed 64-bit ``ack_set`` words.

    Words past the mask's highest set bit are left out when the batch claims more than a
    frame's worth of messages (as Pulsar sends a bit set's words: a missing bit is a clear
    one), so a claimed count costs nothing; smaller batches get a word for every message.
    """
    if size > _MAX_FULL_WORDS * _WORD:
        size = min(size, mask.bit_length())
    out: list[int] = []
    for _ in range((size + _WORD - 1) // _WORD):
        word = mask & _WORD_MASK
        out.append(word - (1 << 64) if word >= (1 << 63) else word)
        mask >>= _WORD
    return tuple(out)


class Cursor:
    """Acknowledgement state of one subscription (see the module docstring).

    Args:
        mark_delete: The initial mark-delete index (-1: nothing acknowledged).
        durable: Whether the subscription survives its consumers and topic unloads.
    """

    __slots__ = ("acked", "durable", "mark_delete", "on_change", "partial", "version")

    def __init__(self, mark_delete: int = -1, *, durable: bool = True) -> None:
        self.mark_delete = mark_delete
        self.durable = durable
        self.acked: set[int] = set()
        self.partial: dict[int, int] = {}
        # Counts the changes of the acknowledgement state; the topic service's flusher
        # persists the durable cursors whose version moved since it last wrote them.
        self.version = 0
        # Told of every change (``TopicState.add_cursor`` sets it): marks the topic for the
        # flusher, which would otherwise have to look at every topic every second.
        self.on_change: Callable[[], None] | None = None

    def is_acked(self, index: int) -> bool:
        """Whether an index is fully acknowledged."""
        return index <= self.mark_delete or index in self.acked

    def ack(self, index: int) -> bool:
        """Acknowledge a whole entry.

        Returns:
            True if it was not acknowledged before.
        """
        if index <= self.mark_delete or index in self.acked:
            return False
        self._changed()
        if self.partial:
            self.partial.pop(index, None)
        if index == self.mark_delete + 1:
            self.mark_delete = index
            if self.acked:  # in-order acks (the common case) have nothing to fold in
                self._advance()
        else:
            self.acked.add(index)
        return True

    def ack_many(self, indexes: Iterable[int]) -> list[int]:
        """``ack`` each index in turn (the ACK hot path: one call per ACK, not per id).

        Returns:
            The indexes that were not acknowledged before, in the given order.
        """
        newly: list[int] = []
        append = newly.append
        acked = self.acked
        partial = self.partial
        mark_delete = self.mark_delete
        for index in indexes:
            if index <= mark_delete or index in acked:
                continue
            if partial:
                partial.pop(index, None)
            if index == mark_delete + 1:
                mark_delete = index
                while mark_delete + 1 in acked:  # invariant 2: fold in what follows
                    mark_delete += 1
                    acked.discard(mark_delete)
            else:
                acked.add(index)
            append(index)
        self.mark_delete = mark_delete
        if newly:
            self._changed()
        return newly

    def ack_batch(self, index: int, unacked_mask: int, size: int) -> bool:
        """Acknowledge messages of a batch entry by intersecting its still-unacked bitmask.

        Args:
            index: The entry.
            unacked_mask: Bits of messages the client has *not* acknowledged (none at or past
                ``size``: ``mask_from_words`` limits it).
            size: Messages in the batch.

        Returns:
            True if this made the whole entry acknowledged.
        """
        if self.is_acked(index):
            return False
        # ``unacked_mask`` has no bit at or past ``size``, so it is its own intersection with
        # the full mask, which is never built (``size`` is the producer's claim).
        known = self.partial.get(index)
        remaining = unacked_mask if known is None else known & unacked_mask
        if remaining:
            self.partial[index] = remaining
            self._changed()
            return False
        return self.ack(index)

    def ack_cumulative(self, index: int) -> bool:
        """Acknowledge every entry up to and including ``index``.

        Returns:
            True if the mark-delete position moved.
        """
        if index <= self.mark_delete:
            return False
        self.mark_delete = index
        self._changed()
        if self.acked:
            self.acked = {i for i in self.acked if i > index}
        if self.partial:
            self.partial = {i: m for i, m in self.partial.items() if i > index}
        self._advance()
        return True

    def acked_among(self, first: int, end: int) -> Set[int]:
        """The acknowledged indexes of ``[first, end)``, to test entries of a read against.

        The dispatch hot path asks once per read instead of once per entry; the answer is
        only for ``in`` tests (and an empty one means none), and only until the cursor changes.
        """
        if self.mark_delete < first:
            return self.acked  # the usual case: nothing of the read is behind the mark-delete
        return {*range(first, min(end, self.mark_delete + 1)), *self.acked}

    def unacked_mask(self, index: int) -> int | None:
        """The still-unacknowledged bitmask of a partly acknowledged batch, else None."""
        return self.partial.get(index) if self.partial else None

    def partial_acks(self) -> list[tuple[int, int]]:
        """Every partly acknowledged batch as ``(index, still-unacked mask)``, sorted."""
        return sorted(self.partial.items())

    def reset(self, index: int) -> None:
        """Seek: the next entry to deliver becomes ``index``; every other ack is forgotten."""
        self.mark_delete = index - 1
        self._changed()
        self.acked.clear()
        self.partial.clear()

    def first_unacked(self, start: int, end: int) -> int:
        """The first index in ``[start, end)`` that is not fully acknowledged, else ``end``."""
        index = max(start, self.mark_delete + 1)
        while index < end and index in self.acked:
            index += 1
        return index

    def nth_unacked(self, n: int, end: int) -> int | None:
        """The ``n``-th (from 1) not fully acknowledged index after the mark-delete, if < ``end``.

        Steps over the individually acknowledged ranges, not over the entries, so a far ``n``
        costs no walk through the backlog (the admin API's peeks and skips take any number).
        """
        if n < 1:
            return None
        index = self.mark_delete + n
        for first, last in self.ranges():  # sorted, all after the mark-delete position
            if first > index:
                break
            index += last - first + 1  # acknowledged entries at or before it: that much further
        return index if index < end else None

    def backlog(self, count: int) -> int:
        """Entries among the first ``count`` that are not fully acknowledged."""
        if self.mark_delete + 1 >= count:
            return 0
        # Only stored entries can be acknowledged, so every index in ``acked`` is below count.
        return count - self.mark_delete - 1 - len(self.acked)

    def ranges(self) -> list[tuple[int, int]]:
        """The individually acknowledged indexes as sorted ``(first, last)`` inclusive ranges."""
        out: list[tuple[int, int]] = []
        for index in sorted(self.acked):
            if out and out[-1][1] == index - 1:
                out[-1] = (out[-1][0], index)
            else:
                out.append((index, index))
        return out

    @classmethod
    def restore(
        cls,
        mark_delete: int,
        ranges: Iterable[tuple[int, int]],
        partial: Iterable[tuple[int, int]],
    ) -> Cursor:
        """A durable cursor rebuilt from its persisted state (``ml_meta.CursorInfo``)."""
        cursor = cls(mark_delete)
        for first, last in ranges:
            cursor.acked.update(range(max(first, mark_delete + 1), last + 1))
        cursor.partial = {i: m for i, m in partial if i > mark_delete and i not in cursor.acked}
        cursor._advance()
        return cursor

    def _changed(self) -> None:
        self.version += 1
        if self.on_change is not None:
            self.on_change()

    def _advance(self) -> None:
        acked = self.acked
        md = self.mark_delete
        while md + 1 in acked:
            md += 1
            acked.discard(md)
        self.mark_delete = md
