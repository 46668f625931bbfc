"""The broker's seam to the bookie stub: what a managed ledger needs from ledger storage.

:class:`BookieClient` is satisfied by ``storage_stub.client.StubClient`` (over TCP, or the
in-process local client of ``StubServer.open_local_client``) and by :class:`MemoryBookie`, the
synchronous in-memory ``LedgerStore`` of the default embedded broker behind the same async
interface. Stores that can answer at once also implement :class:`NowaitBookie`; the managed
ledger then stores a read's SENDs without a task switch (the publish hot path, DESIGN.md
decision 8: a receipt still goes out only after the store holds the entry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from storage_stub.ledger import LedgerStore

__all__ = ["BookieClient", "MemoryBookie", "NowaitBookie"]


class BookieClient(Protocol):
    """Async ledger operations (BookKeeper's client, reduced; ``storage_stub.client``).

    Every method raises ``storage_stub.ledger.StorageError`` (or a subclass: timeouts,
    connection loss, fencing) when the store refuses or cannot be reached.
    """

    async def create_ledger(self, *, request_timeout: float | None = None) -> int: ...

    async def add_entry(
        self, ledger_id: int, data: bytes, *, request_timeout: float | None = None
    ) -> int: ...

    async def read(
        self, ledger_id: int, first: int, last: int, *, request_timeout: float | None = None
    ) -> list[bytes]: ...

    async def last_add_confirmed(
        self, ledger_id: int, *, request_timeout: float | None = None
    ) -> int: ...

    async def close_ledger(
        self, ledger_id: int, *, request_timeout: float | None = None
    ) -> int: ...

    async def fence(self, ledger_id: int, *, request_timeout: float | None = None) -> int: ...

    async def delete_ledger(
        self, ledger_id: int, *, request_timeout: float | None = None
    ) -> None: ...


@runtime_checkable
class NowaitBookie(Protocol):
    """A store that answers at once (in memory): synchronous twins of the hot operations."""

    def add_entries_nowait(self, ledger_id: int, data: Sequence[bytes]) -> int:
        """Append entries in order; returns the first one's entry id."""
        ...

    def read_nowait(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """Read entries ``first..last`` inclusive."""
        ...

    def create_ledger_nowait(self) -> int:
        """Create a ledger; returns its id."""
        ...

    def close_ledger_nowait(self, ledger_id: int) -> None:
        """Close a ledger (no more adds)."""
        ...

    def delete_ledger_nowait(self, ledger_id: int) -> None:
        """Delete a ledger and its entries."""
        ...


class MemoryBookie:
    """A :class:`BookieClient` (and :class:`NowaitBookie`) over an in-memory ``LedgerStore``.

    Args:
        store: The ledgers; the broker's default when no stub is configured.
    """

    def __init__(self, store: LedgerStore) -> None:
        self.store = store

    async def create_ledger(self, *, request_timeout: float | None = None) -> int:
        return self.store.create_ledger()

    async def add_entry(
        self, ledger_id: int, data: bytes, *, request_timeout: float | None = None
    ) -> int:
        return self.store.add_entry(ledger_id, data)

    async def read(
        self, ledger_id: int, first: int, last: int, *, request_timeout: float | None = None
    ) -> list[bytes]:
        return self.store.read(ledger_id, first, last)

    async def last_add_confirmed(
        self, ledger_id: int, *, request_timeout: float | None = None
    ) -> int:
        return self.store.last_add_confirmed(ledger_id)

    async def close_ledger(self, ledger_id: int, *, request_timeout: float | None = None) -> int:
        return self.store.close(ledger_id)

    async def fence(self, ledger_id: int, *, request_timeout: float | None = None) -> int:
        return self.store.fence(ledger_id)

    async def delete_ledger(self, ledger_id: int, *, request_timeout: float | None = None) -> None:
        self.store.delete(ledger_id)

    def add_entries_nowait(self, ledger_id: int, data: Sequence[bytes]) -> int:
        return self.store.add_entries(ledger_id, data)

    def read_nowait(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        return self.store.read(ledger_id, first, last)

    def create_ledger_nowait(self) -> int:
        return self.store.create_ledger()

    def close_ledger_nowait(self, ledger_id: int) -> None:
        self.store.close(ledger_id)

    def delete_ledger_nowait(self, ledger_id: int) -> None:
        self.store.delete(ledger_id)
