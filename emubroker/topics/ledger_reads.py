"""A managed ledger's reads: from memory, from its entry cache, or back from the bookie.

Memory mode reads the store at once; bookie mode reads the bounded entry cache
(``entry_cache.py``) and, on a miss, raises :class:`CacheMiss` so that the reader awaits
``load`` off the hot path, which reads the stub in ranges of :data:`READ_RANGE`.
"""

from __future__ import annotations

import bisect

import anyio

from emubroker.topics.ledger_segments import LedgerSegments
from storage_stub.client import ReadTooLargeError

__all__ = ["READ_RANGE", "CacheMiss", "LedgerReads"]

READ_RANGE = 256
"""Entries per stub read on a cache miss (halved when the stub says the reply is too big)."""


class CacheMiss(anyio.WouldBlock):
    """Entries ``first..last`` are not in the cache; ``await ledger.load(first, last)``."""

    def __init__(self, first: int, last: int) -> None:
        super().__init__(first, last)
        self.first = first
        self.last = last


class LedgerReads(LedgerSegments):
    """The reads of a managed ledger (a part of :class:`ManagedLedger`)."""

    __slots__ = ()

    async def _read_range(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        out: list[bytes] = []
        step = READ_RANGE
        while first <= last:
            stop = min(last, first + step - 1)
            try:
                out += await self._bookie.read(ledger_id, first, stop)
            except ReadTooLargeError:
                if step == 1:
                    raise
                step = max(1, step // 2)
                continue
            first = stop + 1
        return out

    # ---- the entry cache and reads ------------------------------------------------------------

    def evict_consumed(self, floor: int) -> int:
        """Drop the cached entries at or below ``floor`` (every durable cursor is past them).

        Pulsar evicts what every cursor has read (``cacheEvictionByMarkDeletedPosition``: up to
        the slowest mark-delete, the variant that never evicts an entry a cursor may still
        deliver); without it the cache of a topic whose ledger does not roll over would hold
        everything written until the budget is full. A reader behind reads back from the
        bookie. Memory mode has no cache.

        Returns:
            The bytes freed.
        """
        if self._nowait is not None:
            return 0
        return self._cache.evict_consumed(min(floor + 1, self.count))

    @property
    def cached_bytes(self) -> int:
        """Bytes of this topic's entries in the cache."""
        return self._cache.cached_bytes

    def read(self, first: int, last: int) -> tuple[int, int, list[bytes]]:
        """Read entries ``first..last`` (inclusive) from memory, without waiting.

        The range is cut at the end of ``first``'s ledger, so fewer entries may come back.

        Returns:
            ``(ledger_id, entry_id of first, sections)``.

        Raises:
            CacheMiss: Bookie mode and ``first`` is not cached: ``await load(first, last)``.
            StorageError: The range is outside the stored entries.
        """
        k = bisect.bisect_right(self._starts, first) - 1
        start = self._starts[k]
        if k + 1 < len(self._starts):
            last = min(last, self._starts[k + 1] - 1)
        ledger_id = self._ledger_ids[k]
        store = self._nowait
        if store is not None:
            return (
                ledger_id,
                first - start,
                store.read_nowait(ledger_id, first - start, last - start),
            )
        sections = self._cache.get(first, last)
        if not sections:
            raise CacheMiss(first, last)
        return ledger_id, first - start, sections

    def require(self, first: int, last: int) -> None:
        """Raise what ``read(first, last)`` would raise for a ``first`` not in the cache.

        Raises:
            CacheMiss: Bookie mode and ``first`` is not cached: ``await load(first, last)``.
        """
        if self._nowait is None and self._cache.misses(first):
            raise CacheMiss(first, last)

    async def load(self, first: int, last: int) -> None:
        """Bring entries ``first..last`` (cut at ``first``'s ledger end) into the cache.

        Raises:
            StorageError: The bookie failed (the reader retries later).
        """
        k = bisect.bisect_right(self._starts, first) - 1
        start = self._starts[k]
        last = min(last, self._cache.evicted_below - 1, first + READ_RANGE - 1)
        if k + 1 < len(self._starts):
            last = min(last, self._starts[k + 1] - 1)
        if last < first:
            return
        sections = await self._read_range(self._ledger_ids[k], first - start, last - start)
        self._cache.put_loaded(first, sections)

    async def read_entries(self, first: int, last: int) -> tuple[int, int, list[bytes]]:
        """``read``, loading from the bookie on a miss (for readers off the hot path).

        Raises:
            StorageError: The range is outside the stored entries, or the bookie failed.
        """
        try:
            return self.read(first, last)
        except CacheMiss:
            await self.load(first, last)
            return self.read(first, last)
