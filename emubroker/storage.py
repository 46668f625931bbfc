"""Where persistent topics keep their entries: one :class:`LedgerBackend` interface, two backends.

A managed ledger (``topics.managed_ledger``) stores a topic's entries through a backend, and
every backend states the two things the broker must know about it, rather than have the broker
guess them from its type:

* ``durable``: entries outlive this broker process. With a metadata store the topic service
  then keeps ledger lists and durable cursors there (``topics.cursor_flush``) and recovers a
  stored topic when it is loaded again (spec §9); a backend that is not durable keeps nothing
  across restarts, so nothing about it is written.
* ``sync``: the ``*_nowait`` operations answer at once. A managed ledger that persists nothing
  then stores a read's SENDs without a task switch (the publish hot path; a receipt still goes
  out only after the store holds the entry, DESIGN.md decision 8). A backend that is not sync
  raises ``anyio.WouldBlock`` from them, and everything goes through its ``client``.

:class:`MemoryBackend` (the default embedded broker: an in-memory ``LedgerStore``) is sync and
not durable; :class:`BookieBackend` (the bookie stub, in-process or over TCP:
``storage_stub.client.StubClient``) is durable and not sync. A new backend is one more class
here that states both, and the composition root (``app``) that picks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from anyio import WouldBlock

if TYPE_CHECKING:
    from collections.abc import Sequence

    from storage_stub.ledger import LedgerStore

__all__ = ["BookieBackend", "BookieClient", "LedgerBackend", "MemoryBackend"]


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


class LedgerBackend(Protocol):
    """Ledger storage as a managed ledger uses it (see the module docstring).

    Attributes:
        durable: Entries outlive the broker: persist ledger lists and cursors, recover topics.
        sync: The ``*_nowait`` operations answer at once (else they raise ``WouldBlock``).
        client: Every operation, awaited (the only way in when not ``sync``).
    """

    @property
    def durable(self) -> bool: ...

    @property
    def sync(self) -> bool: ...

    @property
    def client(self) -> BookieClient: ...

    def add_entries_nowait(self, ledger_id: int, data: Sequence[bytes]) -> int:
        """Append entries in order; returns the first one's entry id.

        Raises:
            WouldBlock: Not a sync backend.
            StorageError: The store refused (nothing was stored).
        """
        ...

    def read_nowait(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """Read entries ``first..last`` inclusive (``WouldBlock`` unless sync)."""
        ...

    def create_ledger_nowait(self) -> int:
        """Create a ledger; returns its id (``WouldBlock`` unless sync)."""
        ...

    def close_ledger_nowait(self, ledger_id: int) -> None:
        """Close a ledger: no more adds (``WouldBlock`` unless sync)."""
        ...

    def delete_ledger_nowait(self, ledger_id: int) -> None:
        """Delete a ledger and its entries (``WouldBlock`` unless sync)."""
        ...


class MemoryBackend:
    """The in-memory ``LedgerStore`` of the default embedded broker: sync, not durable.

    It is its own :class:`BookieClient` (the same store behind the async interface), so code
    that awaits works on it unchanged.

    Args:
        store: The ledgers.
    """

    durable = False
    sync = True

    def __init__(self, store: LedgerStore) -> None:
        self.store = store

    @property
    def client(self) -> BookieClient:
        return self

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


class BookieBackend:
    """The bookie stub (``storage_stub.client.StubClient``): durable, not sync.

    Args:
        client: The stub's client, over TCP or in-process.
    """

    durable = True
    sync = False

    def __init__(self, client: BookieClient) -> None:
        self.client = client

    def add_entries_nowait(self, ledger_id: int, data: Sequence[bytes]) -> int:
        raise WouldBlock

    def read_nowait(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        raise WouldBlock

    def create_ledger_nowait(self) -> int:
        raise WouldBlock

    def close_ledger_nowait(self, ledger_id: int) -> None:
        raise WouldBlock

    def delete_ledger_nowait(self, ledger_id: int) -> None:
        raise WouldBlock
