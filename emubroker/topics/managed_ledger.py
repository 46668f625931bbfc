"""A persistent topic's entries over the ledger store: Pulsar's managed ledger, reduced.

Entries are addressed internally by a dense *index* 0, 1, 2, … in append order; on the wire they
are ``(ledger_id, entry_id)`` (spec/wire-protocol.md §10). A topic writes to one ledger until it
holds ``managedLedgerMaxEntriesPerLedger`` entries, then rolls over to a fresh one, so ids stay
strictly increasing (ledger ids only grow) and stable: receipt id = delivery id = last-message id.
The first ledger's entry ids are 0, 1, 2, … as the client tests expect (§7.6).

The store keeps each entry's payload section (``framing.payload_section``: optional checksum
section plus the entry bytes exactly as sent), so a MESSAGE is the command plus those bytes.
The :class:`EntryInfo` of every entry stays in memory, aligned with the index.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from storage_stub.ledger import StorageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emubroker.topics.entry import EntryInfo
    from storage_stub.ledger import LedgerStore

__all__ = ["ManagedLedger"]


class ManagedLedger:
    """The entries of one persistent topic.

    Args:
        store: Where entries live.
        max_entries_per_ledger: Roll over to a new ledger after this many entries.
    """

    __slots__ = ("_ledger_ids", "_max_entries", "_starts", "_store", "infos")

    def __init__(self, store: LedgerStore, *, max_entries_per_ledger: int = 50_000) -> None:
        self._store = store
        self._max_entries = max(1, max_entries_per_ledger)
        # Segment k covers indexes _starts[k] .. _starts[k+1]-1 and lives in ledger _ledger_ids[k].
        self._starts: list[int] = [0]
        self._ledger_ids: list[int] = [store.create_ledger()]
        self.infos: list[EntryInfo] = []

    @property
    def count(self) -> int:
        """Number of entries appended so far (the next entry's index)."""
        return len(self.infos)

    @property
    def current_ledger_id(self) -> int:
        """The ledger new entries go to."""
        return self._ledger_ids[-1]

    @property
    def ledger_ids(self) -> tuple[int, ...]:
        """Every ledger of the topic, oldest first."""
        return tuple(self._ledger_ids)

    def append(self, section: bytes, info: EntryInfo) -> tuple[int, int]:
        """Store one entry.

        Returns:
            Its ``(ledger_id, entry_id)``.

        Raises:
            StorageError: The store refused the write.
        """
        index = len(self.infos)
        if index - self._starts[-1] >= self._max_entries:
            self._store.close(self._ledger_ids[-1])
            self._ledger_ids.append(self._store.create_ledger())
            self._starts.append(index)
        ledger_id = self._ledger_ids[-1]
        entry_id = self._store.add_entry(ledger_id, section)
        self.infos.append(info)
        return ledger_id, entry_id

    def append_many(
        self, sections: Sequence[bytes], infos: Sequence[EntryInfo]
    ) -> list[tuple[int, int]]:
        """Store entries in order, one store call per ledger they fall into.

        Returns:
            The ``(ledger_id, entry_id)`` of each entry stored. Fewer than given when the store
            refused a write after some were stored; the caller retries the rest.

        Raises:
            StorageError: The store refused the first write (nothing was stored).
        """
        positions: list[tuple[int, int]] = []
        done = 0
        while done < len(sections):
            index = len(self.infos)
            room = self._max_entries - (index - self._starts[-1])
            try:
                if room <= 0:
                    self._store.close(self._ledger_ids[-1])
                    self._ledger_ids.append(self._store.create_ledger())
                    self._starts.append(index)
                    room = self._max_entries
                ledger_id = self._ledger_ids[-1]
                stop = min(len(sections), done + room)
                first = self._store.add_entries(ledger_id, sections[done:stop])
            except StorageError:
                if not positions:
                    raise
                return positions
            self.infos += infos[done:stop]
            positions += [(ledger_id, entry_id) for entry_id in range(first, first + stop - done)]
            done = stop
        return positions

    def position(self, index: int) -> tuple[int, int]:
        """The ``(ledger_id, entry_id)`` of an index; ``-1`` gives (first ledger, -1)."""
        if index < 0:
            return self._ledger_ids[0], -1
        k = bisect.bisect_right(self._starts, index) - 1
        return self._ledger_ids[k], index - self._starts[k]

    def last_position(self) -> tuple[int, int]:
        """Position of the last entry; an empty topic gives (current ledger, -1) (§7.6)."""
        if not self.infos:
            return self._ledger_ids[-1], -1
        return self.position(len(self.infos) - 1)

    def last_message_id(self) -> tuple[int, int, int]:
        """``(ledger, entry, batch_index)`` of the last entry for GET_LAST_MESSAGE_ID (§7.6).

        ``batch_index`` is ``num_messages - 1`` for a batched last entry, else -1; an empty topic
        gives ``(current ledger, -1, -1)``.
        """
        ledger_id, entry_id = self.last_position()
        if self.infos and self.infos[-1].batched:
            return ledger_id, entry_id, self.infos[-1].num_messages - 1
        return ledger_id, entry_id, -1

    def index_of(self, ledger_id: int, entry_id: int) -> int | None:
        """The index of an existing entry, or None for ids that name no entry of this topic."""
        if entry_id < 0:
            return None
        if ledger_id == self._ledger_ids[-1]:  # the current ledger: what acks name most
            index = self._starts[-1] + entry_id
            return index if index < len(self.infos) else None
        k = bisect.bisect_left(self._ledger_ids, ledger_id)
        if k == len(self._ledger_ids) or self._ledger_ids[k] != ledger_id:
            return None
        index = self._starts[k] + entry_id
        end = self._starts[k + 1] if k + 1 < len(self._starts) else len(self.infos)
        return index if index < end else None

    def index_at_or_after(self, ledger_id: int, entry_id: int) -> int:
        """The index of the first entry at or after ``(ledger_id, entry_id)``, up to ``count``."""
        k = bisect.bisect_left(self._ledger_ids, ledger_id)
        if k == len(self._ledger_ids):
            return len(self.infos)
        if self._ledger_ids[k] != ledger_id:
            return self._starts[k]  # a ledger between ours: the next ledger's first entry
        end = self._starts[k + 1] if k + 1 < len(self._starts) else len(self.infos)
        return min(self._starts[k] + max(entry_id, 0), end)

    def read(self, first: int, last: int) -> tuple[int, int, list[bytes]]:
        """Read entries ``first..last`` (inclusive) with one store call.

        The range is cut at the end of ``first``'s ledger, so fewer entries may come back.

        Returns:
            ``(ledger_id, entry_id of first, sections)``.

        Raises:
            StorageError: The range is outside the stored entries.
        """
        k = bisect.bisect_right(self._starts, first) - 1
        start = self._starts[k]
        if k + 1 < len(self._starts):
            last = min(last, self._starts[k + 1] - 1)
        ledger_id = self._ledger_ids[k]
        return ledger_id, first - start, self._store.read(ledger_id, first - start, last - start)
