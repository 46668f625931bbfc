"""What every journaled store shares: tickets, waiting until a mutation is durable, compaction.

A store applies a mutation to its pure model, appends it to its journal and gets a ticket; the
server acknowledges the mutation only once ``wait_durable(ticket)`` returns (DESIGN.md decision
8). Without a journal (memory mode) every ticket is 0 and nothing waits. Compaction rewrites the
journal from the records a subclass gives for its live state (:meth:`JournaledStore.
_snapshot_records`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from storage_stub.errors import PersistenceFailedError
from storage_stub.journal import Journal, JournalFailedError

if TYPE_CHECKING:
    from collections.abc import Iterator


class JournaledStore:
    """Base of the durable ledger store and the durable metadata tree.

    Args:
        journal: The open journal, or ``None`` in memory mode.
    """

    def __init__(self, journal: Journal | None) -> None:
        self._journal = journal

    @property
    def ticket(self) -> int:
        """Ticket of the last journaled mutation (``0`` in memory mode)."""
        return 0 if self._journal is None else self._journal.appended_ticket

    @property
    def durable_ticket(self) -> int:
        """Every mutation up to this ticket is durable."""
        return 0 if self._journal is None else self._journal.durable_ticket

    async def wait_durable(self, ticket: int) -> None:
        """Return once every mutation up to ``ticket`` is durable.

        Raises:
            PersistenceFailedError: The journal failed.
        """
        if self._journal is None or ticket <= self._journal.durable_ticket:
            return
        try:
            await self._journal.wait_durable(ticket)
        except JournalFailedError as exc:
            raise PersistenceFailedError(str(exc), ledger_id=-1) from exc

    async def compact(self) -> None:
        """Rewrite the journal from the live state (:meth:`_snapshot_records`).

        Raises:
            PersistenceFailedError: The rewrite failed; the old journal is still in place.
        """
        if self._journal is None:
            return
        try:
            await self._journal.rewrite(self._snapshot_records)
        except JournalFailedError as exc:
            raise PersistenceFailedError(str(exc), ledger_id=-1) from exc

    def _snapshot_records(self) -> Iterator[bytes]:
        """Journal records that rebuild the live state (called with appends quiesced)."""
        raise NotImplementedError

    def _check_writable(self) -> None:
        journal = self._journal
        if journal is not None and (journal.failed or journal.closed):
            raise PersistenceFailedError(f"journal {journal.path} is not writable", ledger_id=-1)
