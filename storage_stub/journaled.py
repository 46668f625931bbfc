"""What every journaled store shares: tickets and waiting until a mutation is durable.

A store applies a mutation to its pure model, appends it to its journal and gets a ticket; the
server acknowledges the mutation only once ``wait_durable(ticket)`` returns (DESIGN.md decision
8). Without a journal (memory mode) every ticket is 0 and nothing waits.
"""

from __future__ import annotations

from storage_stub.errors import PersistenceFailedError
from storage_stub.journal import Journal, JournalFailedError


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
