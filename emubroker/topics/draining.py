"""Key_Shared draining hashes (PIP-379): a key that moved keeps its order across consumers.

When a consumer joins an AUTO_SPLIT Key_Shared subscription, part of the hash ring moves to it.
Entries of a moved hash that an older consumer still holds unacked must be finished first, or the
newcomer would receive later messages of a key before the earlier ones are acknowledged. Pulsar
4.x (``DrainingHashesTracker``, ``PersistentStickyKeyDispatcherMultipleConsumers``) marks such a
hash *draining*: it remembers the old consumer and how many of its pending entries carry the
hash, and blocks the hash for every other consumer until that count reaches 0 (acked,
redelivered, or the consumer left).

Rules kept here:

1. A hash drains for at most one consumer, the one holding its pending entries.
2. While a hash drains, :meth:`DrainingHashes.blocks` is True for every other consumer.
3. A hash whose pending entries are all gone stops draining. Rather than being told of every
   ack, redelivery and release, the tracker remembers *which* pending entries it waits for and
   checks them against the holder's ``pending`` map when asked: each index is dropped once, so a
   check costs O(1) amortized and no release path can leave a hash blocked forever.
4. A hash that moved back to its draining consumer stops draining (Pulsar removes the entry
   when the draining consumer itself asks).

The module is pure: no clock, no I/O; the dispatcher decides when to call it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

__all__ = ["DrainingHashes", "Holder"]


class Holder(Protocol):
    """What the tracker reads from a consumer: the entries delivered to it and not acked."""

    @property
    def pending(self) -> Mapping[int, int]:
        """Entry index -> messages charged."""
        ...


C = TypeVar("C", bound=Holder)


class _Draining(Generic[C]):
    __slots__ = ("consumer", "indexes")

    def __init__(self, consumer: C) -> None:
        self.consumer = consumer
        self.indexes: list[int] = []  # pending entries of ``consumer`` with this hash

    def drained(self) -> bool:
        """Whether none of the entries is pending any more (pops the gone ones off the end)."""
        held = self.consumer.pending
        indexes = self.indexes
        while indexes and indexes[-1] not in held:
            indexes.pop()
        return not indexes


class DrainingHashes(Generic[C]):
    """Sticky-key hashes whose pending entries block other consumers (see the module docstring)."""

    def __init__(self) -> None:
        self._hashes: dict[int, _Draining[C]] = {}
        # Hashes found drained (rule 3), in all and per attached consumer: Pulsar's
        # drainingHashesClearedTotal of the subscription and of each consumer.
        self.cleared_total = 0
        self._cleared: dict[C, int] = {}

    def __len__(self) -> int:
        """Hashes registered as draining (some may have drained since: see ``statistics``)."""
        return len(self._hashes)

    def clear(self) -> None:
        """Forget every draining hash (seek, or the last consumer left)."""
        self._hashes.clear()

    def add(self, consumer: C, key_hash: int, index: int) -> bool:
        """Register one pending entry of ``consumer`` whose hash moved to another consumer.

        Returns:
            False if another consumer already drains this hash (the entry is not tracked:
            per rule 1 this only happens when order was not kept before, e.g. after
            out-of-order delivery).
        """
        draining = self._hashes.get(key_hash)
        if draining is None:
            draining = self._hashes[key_hash] = _Draining(consumer)
        elif draining.consumer is not consumer:
            return False
        draining.indexes.append(index)
        return True

    def reassign(
        self,
        consumers: Iterable[C],
        owner: Callable[[int], C | None],
        key_hash: Callable[[int], int],
    ) -> None:
        """Recompute after the hash assignment changed (a consumer joined or left).

        Every pending entry whose hash ``owner`` now gives to someone else drains for the
        consumer holding it; every other hash stops draining. Doing it from scratch equals
        Pulsar's incremental update (it adds entries for ranges a consumer lost and drops
        those of ranges given back) and cannot count an entry twice.

        Args:
            consumers: The attached consumers, in join order (the first holder of a hash wins).
            owner: The consumer a hash is assigned to now.
            key_hash: The sticky-key hash of an entry index.
        """
        self._hashes.clear()
        consumers = list(consumers)
        self._cleared = {c: n for c, n in self._cleared.items() if c in consumers}
        for consumer in consumers:
            for index in consumer.pending:
                h = key_hash(index)
                if owner(h) is not consumer:
                    self.add(consumer, h, index)

    def blocks(self, consumer: C, key_hash: int) -> bool:
        """Whether an entry with ``key_hash`` must not go to ``consumer`` now.

        True while another consumer still holds pending entries of the hash. A hash found
        drained, or asked about by its own draining consumer (it moved back), is forgotten.
        """
        draining = self._hashes.get(key_hash)
        if draining is None:
            return False
        drained = draining.drained()
        if draining.consumer is not consumer and not drained:
            return True
        del self._hashes[key_hash]
        if drained:
            self._count_cleared(draining.consumer)
        return False

    def _count_cleared(self, consumer: C) -> None:
        self.cleared_total += 1
        self._cleared[consumer] = self._cleared.get(consumer, 0) + 1

    def statistics(self) -> dict[int, tuple[C, int]]:
        """Hash -> (draining consumer, its pending entries with that hash), drained ones dropped.

        Pulsar reports these per consumer as ``drainingHashes`` (``hash``, ``unackMsgs``).
        """
        for h, d in list(self._hashes.items()):
            held = d.consumer.pending
            d.indexes = [i for i in d.indexes if i in held]
            if not d.indexes:
                del self._hashes[h]
                self._count_cleared(d.consumer)
        return {h: (d.consumer, len(d.indexes)) for h, d in self._hashes.items()}

    def summary(self) -> dict[C, tuple[int, int, int]]:
        """Per consumer: its draining hashes, their pending messages, the hashes it cleared.

        Pulsar's ``drainingHashesCount``, ``drainingHashesUnackedMessages`` and
        ``drainingHashesClearedTotal`` of ``ConsumerStats`` (their sums: the subscription's,
        whose cleared total is :attr:`cleared_total`, consumers that left included).
        """
        out: dict[C, tuple[int, int, int]] = {c: (0, 0, n) for c, n in self._cleared.items()}
        for h, (consumer, _) in self.statistics().items():
            held = consumer.pending
            messages = sum(held[i] for i in self._hashes[h].indexes)
            count, unacked, cleared = out.get(consumer, (0, 0, self._cleared.get(consumer, 0)))
            out[consumer] = (count + 1, unacked + messages, cleared)
        return out
