"""A managed ledger's entry cache (bookie mode): what it wrote, and what it read back on a miss.

The entries a managed ledger added are kept, aligned with their index, until the broker-wide
budget (:class:`CacheBudget`, ``managedLedgerCacheSizeMB``) is full (then the oldest go) or
every durable cursor is past them (:meth:`EntryCache.evict_consumed`). A reader behind the
cache reads back from the bookie into a second, small store (:meth:`EntryCache.put_loaded`),
dropped whole when the budget is short. ``emubroker.topics.managed_ledger`` owns the positions
and the bookie; this class only holds bytes by index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CacheBudget", "EntryCache"]


class CacheBudget:
    """The broker-wide entry cache size (``managedLedgerCacheSizeMB``), shared by all topics.

    Args:
        limit: Bytes of cached entries allowed over all managed ledgers.
    """

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0


class EntryCache:
    """The cached entries of one managed ledger, from index ``base`` on.

    Args:
        budget: The broker-wide size it counts against.
    """

    __slots__ = ("_budget", "_cached_bytes", "_loaded", "_sections", "base", "evicted_below")

    def __init__(self, budget: CacheBudget) -> None:
        self._budget = budget
        # Aligned with the managed ledger's indexes from ``base``; ``evicted_below`` is an index
        # (not a list offset): entries below it are in ``_loaded`` or only in the bookie.
        self._sections: list[bytes | None] = []
        self.base = 0
        self.evicted_below = 0
        self._cached_bytes = 0
        self._loaded: dict[int, bytes] = {}  # misses read back from the bookie, by index

    def start_at(self, base: int) -> None:
        """An empty cache whose first entry will be index ``base`` (recovery)."""
        self.base = self.evicted_below = base

    def skip(self, count: int) -> None:
        """Entries that are in the bookie only (recovered): not cached, ``count`` of them."""
        self._sections += [None] * count
        self.evicted_below = self.base + len(self._sections)

    def append(self, section: bytes) -> None:
        """The next entry, just added."""
        self._sections.append(section)
        self._cached_bytes += len(section)
        budget = self._budget
        budget.used += len(section)
        if budget.used > budget.limit:
            self._evict()

    def _evict(self) -> None:
        # Oldest first, until the broker-wide budget holds or this topic has nothing left.
        sections, budget, base = self._sections, self._budget, self.base
        i = self.evicted_below
        while budget.used > budget.limit and i - base < len(sections):
            section = sections[i - base]
            if section is not None:
                sections[i - base] = None
                budget.used -= len(section)
                self._cached_bytes -= len(section)
            i += 1
        self.evicted_below = i
        if self._loaded:
            budget.used -= sum(len(s) for s in self._loaded.values())
            self._loaded.clear()

    def evict_consumed(self, end: int) -> int:
        """Drop the entries below index ``end``; returns the bytes freed."""
        sections, base, freed = self._sections, self.base, 0
        for i in range(self.evicted_below - base, end - base):
            section = sections[i]
            if section is not None:
                freed += len(section)
                sections[i] = None
        self.evicted_below = max(self.evicted_below, end)
        self._cached_bytes -= freed
        if self._loaded and min(self._loaded) < end:  # read back for a reader since gone past
            freed += sum(len(s) for i, s in self._loaded.items() if i < end)
            self._loaded = {i: s for i, s in self._loaded.items() if i >= end}
        self._budget.used -= freed
        return freed

    @property
    def cached_bytes(self) -> int:
        """Bytes of this topic's entries in the cache."""
        return self._cached_bytes + sum(len(s) for s in self._loaded.values())

    def get(self, first: int, last: int) -> list[bytes]:
        """The cached entries ``first..last``, or the run of them read back from ``first``.

        Empty when ``first`` is not cached.
        """
        if first >= self.evicted_below:
            return self._sections[first - self.base : last + 1 - self.base]  # type: ignore[return-value]  # cached: no None
        loaded = self._loaded
        out: list[bytes] = []
        for index in range(first, min(last, self.evicted_below - 1) + 1):
            section = loaded.get(index)
            if section is None:
                break
            out.append(section)
        return out

    def misses(self, first: int) -> bool:
        """Whether ``first`` is not cached."""
        return first < self.evicted_below and first not in self._loaded

    def put_loaded(self, first: int, sections: Sequence[bytes]) -> None:
        """Entries from index ``first`` on, read back from the bookie."""
        size = sum(len(s) for s in sections)
        budget = self._budget
        if budget.used + size > budget.limit and self._loaded:
            budget.used -= sum(len(s) for s in self._loaded.values())
            self._loaded.clear()
        budget.used += size
        for offset, section in enumerate(sections):
            self._loaded[first + offset] = section

    def forget_below(self, index: int) -> None:
        """Drop the entries below ``index`` (trimmed): the list is rebound, not cut in place."""
        cut = index - self.base
        if cut <= 0:
            return
        cached = sum(len(s) for s in self._sections[:cut] if s is not None)
        self._cached_bytes -= cached
        if self._loaded:
            cached += sum(len(s) for i, s in self._loaded.items() if i < index)
            self._loaded = {i: s for i, s in self._loaded.items() if i >= index}
        self._budget.used -= cached
        self._sections = self._sections[cut:]
        self.base = index
        self.evicted_below = max(self.evicted_below, index)

    def clear(self) -> None:
        """Drop everything (the topic is deleted)."""
        self._budget.used -= self.cached_bytes
        self._sections = []
        self._loaded.clear()
