"""A managed ledger's trimming: consumed ledgers deleted, and the whole topic's deletion.

Only whole ledgers go, once every cursor is past them, and never the current one; the infos and
cached sections of what was trimmed are dropped with them, so what a topic keeps per entry is
bounded by its live ledgers.
"""

from __future__ import annotations

import logging

import anyio

from emubroker.topics.ledger_segments import LedgerSegments
from storage_stub.client import StorageError

__all__ = ["LedgerTrimming"]

logger = logging.getLogger(__name__)


class LedgerTrimming(LedgerSegments):
    """The trimming and deletion of a managed ledger (a part of :class:`ManagedLedger`)."""

    __slots__ = ()

    # ---- trimming and deletion ----------------------------------------------------------------

    async def trim(self, floor: int) -> int:
        """Delete ledgers whose entries are all at or below ``floor`` (every cursor past them).

        The current ledger is never trimmed.

        Returns:
            How many ledgers were deleted.

        Raises:
            StorageError, MetadataStoreError: The ledger list could not be updated (nothing
                was deleted).
        """
        if self._nowait is not None:
            return self.trim_nowait(floor)
        if self._trim_point(floor) == self._first_live:
            return 0  # the usual answer, without a turn of the event loop for the lock
        async with self._lock:
            k = self._trim_point(floor)
            if k == self._first_live:
                return 0
            doomed = self._ledger_ids[self._first_live : k]
            previous, self._first_live = self._first_live, k
            try:
                await self._persist()
            except BaseException:
                self._first_live = previous
                raise
            self._forget_below(self._starts[k])
        for ledger_id in doomed:
            try:
                await self._bookie.delete_ledger(ledger_id)
            except StorageError:
                logger.warning("could not delete trimmed ledger %s", ledger_id)
        return len(doomed)

    def trim_nowait(self, floor: int) -> int:
        """``trim`` in memory mode, where the store answers at once and nothing is persisted.

        The trimmed entries' infos are dropped too, as in bookie mode.

        Returns:
            How many ledgers were deleted.

        Raises:
            WouldBlock: Bookie mode: use :meth:`trim`.
        """
        store = self._nowait
        if store is None:
            raise anyio.WouldBlock
        k = self._trim_point(floor)
        doomed = self._ledger_ids[self._first_live : k]
        if not doomed:
            return 0
        self._first_live = k
        self._forget_below(self._starts[k])
        for ledger_id in doomed:
            store.delete_ledger_nowait(ledger_id)
        return len(doomed)

    def _forget_below(self, index: int) -> None:
        """Drop the infos, cached sections and read-back entries of indexes below ``index``.

        The lists are rebound, not cut in place (see ``base``); the cache budget gets back
        what the dropped sections held.
        """
        cut = index - self.base
        if cut <= 0:
            return
        self._cache.forget_below(index)
        self.infos = self.infos[cut:]
        self.base = index

    def _trim_point(self, floor: int) -> int:
        """The first segment to keep once every entry at or below ``floor`` is consumed.

        Only whole ledgers go, and never the current one.
        """
        k = self._first_live
        while k < len(self._starts) - 1 and self._starts[k + 1] - 1 <= floor:
            k += 1
        return k

    async def delete(self) -> None:
        """Delete every ledger and the ledger list (the topic is deleted).

        Raises:
            StorageError, MetadataStoreError: The metadata store failed.
        """
        for ledger_id in self.ledger_ids:
            try:
                await self._bookie.delete_ledger(ledger_id)
            except StorageError:
                logger.warning("could not delete ledger %s", ledger_id)
        self._cache.clear()
        if self._metadata is not None and self._path is not None:
            for child in await self._metadata.children(self._path):
                await self._metadata.delete(f"{self._path}/{child}")
            if await self._metadata.exists(self._path):
                await self._metadata.delete(self._path)
