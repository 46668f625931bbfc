"""Key_Shared routing: Pulsar's sticky-key hash and its consumer selectors.

* The key hash is Murmur3 x86 32-bit, seed 0 (Guava's ``murmur3_32``, which Pulsar's
  ``Murmur3_32Hash`` wraps, computed by ``protocol.murmur``), masked to 31 bits; hashes of
  recurring keys are memoized.
* STICKY (``KeySharedMeta.hashRanges``): consumers declare inclusive ranges of the 65 536 slots;
  a key goes to the range holding ``hash % 65536`` (Pulsar's
  ``HashRangeExclusiveStickyKeyConsumerSelector``); overlapping declarations are refused with
  ``ConsumerAssignError``.
* AUTO_SPLIT uses Pulsar 4.x's default consistent hashing
  (``ConsistentHashingStickyKeyConsumerSelector``) over the slots ``1..65535``: a hash ``h``
  is the slot ``h % 65535 + 1``; each consumer puts
  ``subscriptionKeySharedConsistentHashingReplicaPoints`` points on a ring at the slots of
  ``consumer_name NUL name_index NUL i``, where ``name_index`` is the lowest index no other
  attached consumer of that name holds (so same-named consumers get points of their own); a
  key goes to the first point at or after its slot, wrapping around. A point two consumers
  share belongs to the one that joined first, then to the next in join order.
* AUTO_SPLIT with ``subscriptionKeySharedUseConsistentHashing=false`` uses Pulsar's
  ``HashRangeAutoSplitStickyKeyConsumerSelector`` instead (:class:`RangeSplitSelector`): a
  hash ``h`` is the slot ``h % 65536`` (0 read as 1); the first consumer owns every slot, each
  later one takes the upper half of the widest range (the first widest from the bottom), and a
  leaving consumer's range goes to the range above it (the top range to the one below it).
  ``TopicSettings.key_shared_auto_split`` picks one of the two classes once, from the key.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from protocol.commands import IntRange
from protocol.errors import ConsumerAssignError
from protocol.murmur import murmur3_32

__all__ = [
    "AUTO_SPLIT_SLOTS",
    "HASH_RANGE_SIZE",
    "AutoSplitSelector",
    "KeySelector",
    "RangeSplitSelector",
    "StickySelector",
    "auto_split_slot",
    "sticky_key_hash",
]

HASH_RANGE_SIZE = 65536
"""Pulsar's ``DEFAULT_RANGE_SIZE``: STICKY ranges cover slots ``0..65535``."""


# Keys recur (that is the point of keys), so memoize; bounded so random keys cannot grow it.
@functools.lru_cache(maxsize=65536)
def sticky_key_hash(key: bytes) -> int:
    """Pulsar's ``makeStickyKeyHash``: Murmur3-32 of the key masked to a non-negative Java int."""
    return murmur3_32(key) & 0x7FFFFFFF


C = TypeVar("C")


class KeySelector(Protocol[C]):
    """Maps a sticky-key hash to a consumer; membership changes may be refused."""

    def add(self, consumer: C, name: str, ranges: Sequence[IntRange]) -> None:
        """Add a consumer.

        Raises:
            ConsumerAssignError: The consumer's declared ranges cannot be honoured.
        """
        ...

    def remove(self, consumer: C) -> None:
        """Remove a consumer (unknown consumers are ignored)."""
        ...

    def select(self, key_hash: int) -> C | None:
        """The consumer for a :func:`sticky_key_hash`, or None when nobody covers it."""
        ...


AUTO_SPLIT_SLOTS = HASH_RANGE_SIZE - 1
"""Pulsar 4.x's AUTO_SPLIT key range is ``1..65535``: slot 0 means "no hash" there."""


def auto_split_slot(key_hash: int) -> int:
    """The AUTO_SPLIT ring slot of a :func:`sticky_key_hash` (Pulsar's ``makeStickyKeyHash``)."""
    return key_hash % AUTO_SPLIT_SLOTS + 1


class AutoSplitSelector(Generic[C]):
    """Consistent hashing over consumer names (see the module docstring).

    Args:
        points: Ring points per consumer.
    """

    def __init__(self, points: int = 100) -> None:
        self._points = points
        self._members: list[tuple[C, str, int]] = []  # consumer, name, name index; join order
        self._ring_slots: list[int] = []
        self._ring_owners: list[C] = []

    def add(self, consumer: C, name: str, ranges: Sequence[IntRange]) -> None:
        del ranges  # AUTO_SPLIT consumers declare none
        taken = {index for _, other, index in self._members if other == name}
        index = next(i for i in range(len(taken) + 1) if i not in taken)
        self._members.append((consumer, name, index))
        self._rebuild()

    def remove(self, consumer: C) -> None:
        self._members = [m for m in self._members if m[0] is not consumer]
        self._rebuild()

    def _rebuild(self) -> None:
        ring: dict[int, C] = {}
        for consumer, name, index in self._members:
            for i in range(self._points):
                point = sticky_key_hash(f"{name}\0{index}\0{i}".encode())
                ring.setdefault(auto_split_slot(point), consumer)
        self._ring_slots = sorted(ring)
        self._ring_owners = [ring[slot] for slot in self._ring_slots]

    def select(self, key_hash: int) -> C | None:
        if not self._ring_slots:
            return None
        i = bisect.bisect_left(self._ring_slots, auto_split_slot(key_hash))
        return self._ring_owners[i if i < len(self._ring_owners) else 0]


class RangeSplitSelector(Generic[C]):
    """AUTO_SPLIT by splitting the hash range in halves as consumers join (module docstring).

    Each consumer owns the slots from the end of the range below its own (exclusive) up to its
    range's end (inclusive); the ends are kept sorted.

    Args:
        size: The slots split (Pulsar's ``rangeSize``; a smaller one only in tests).
    """

    def __init__(self, size: int = HASH_RANGE_SIZE) -> None:
        self._size = size
        self._ends: list[int] = []  # sorted range ends; the top one is always ``size``
        self._owners: list[C] = []  # the owner of each end

    def add(self, consumer: C, name: str, ranges: Sequence[IntRange]) -> None:
        del ranges  # AUTO_SPLIT consumers declare none
        if not self._ends:
            self._ends, self._owners = [self._size], [consumer]
            return
        # Pulsar's findBiggestRange: the widest (end - previous end), the lowest one on a tie.
        widths = [end - low for low, end in zip([0, *self._ends], self._ends, strict=False)]
        i = widths.index(max(widths))
        if widths[i] <= 1:
            raise ConsumerAssignError(
                f"No more range can be assigned to consumer {name!r}: "
                f"{len(self._ends)} consumers hold the whole range"
            )
        split = self._ends[i] - (widths[i] >> 1)
        self._ends.insert(i, split)
        self._owners.insert(i, consumer)

    def remove(self, consumer: C) -> None:
        i = next((i for i, owner in enumerate(self._owners) if owner is consumer), None)
        if i is None:
            return
        if i == len(self._ends) - 1 and i > 0:
            # The top end stays: the consumer below takes it (and gives up its own end).
            self._owners[i] = self._owners[i - 1]
            i -= 1
        del self._ends[i]
        del self._owners[i]

    def select(self, key_hash: int) -> C | None:
        if not self._ends:
            return None
        # Pulsar's makeStickyKeyHash over the range 0..65535, where 0 means "no hash".
        slot = key_hash % self._size or 1
        return self._owners[bisect.bisect_left(self._ends, slot)]


class StickySelector(Generic[C]):
    """Consumers own the hash ranges they declare; a key goes to the range holding its slot."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ranges: list[tuple[int, int, C]] = []  # sorted by start, non-overlapping

    def add(self, consumer: C, name: str, ranges: Sequence[IntRange]) -> None:
        if not ranges:
            raise ConsumerAssignError(f"Key_Shared STICKY consumer {name!r} declared no ranges")
        for r in ranges:
            if not 0 <= r.start <= r.end < HASH_RANGE_SIZE:
                raise ConsumerAssignError(
                    f"invalid hash range [{r.start}, {r.end}] of consumer {name!r}: "
                    f"need 0 <= start <= end < {HASH_RANGE_SIZE}"
                )
        # One sort and one pass over neighbours: a SUBSCRIBE may carry hundreds of thousands of
        # ranges, and checking each against every other would hold the event loop for hours.
        # Sorted by start and disjoint up to a pair, a range can only overlap the one before.
        mine = [(r.start, r.end, consumer) for r in ranges]
        new = sorted([*self._ranges, *mine], key=lambda t: (t[0], t[1]))
        for (start, end, _), (next_start, next_end, owner) in itertools.pairwise(new):
            if next_start <= end:
                taken, other = (start, end), (next_start, next_end)
                if owner is not consumer:
                    taken, other = other, taken
                raise ConsumerAssignError(
                    f"range [{other[0]}, {other[1]}] of consumer {name!r} overlaps "
                    f"the taken range [{taken[0]}, {taken[1]}]"
                )
        self._ranges = new
        self._starts = [start for start, _, _ in new]

    def remove(self, consumer: C) -> None:
        self._ranges = [t for t in self._ranges if t[2] is not consumer]
        self._starts = [start for start, _, _ in self._ranges]

    def select(self, key_hash: int) -> C | None:
        slot = key_hash % HASH_RANGE_SIZE
        i = bisect.bisect_right(self._starts, slot) - 1
        if i < 0:
            return None
        _, end, consumer = self._ranges[i]
        return consumer if slot <= end else None
