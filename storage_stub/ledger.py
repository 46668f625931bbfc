"""The pure bookie ledger model: ledgers of opaque entries, closing, fencing.

This is what a BookKeeper ensemble looks like from the broker's managed ledger, reduced to one
in-process copy: no I/O, no clock, no ``await``. The stub server later serves it over RPC and
journals it, so the API is value-level: ints and ``bytes`` in, ints, ``bytes`` and frozen
snapshots out, and every failure is a :class:`StorageError` carrying a stable ``code``.

Rules and invariants (the state machine lives in ``_TRANSITIONS`` below):

1. Ledger ids are allocated from 1 upwards and never reused, even after a delete, so a stale id
   held by a broker can never alias a newer ledger.
2. Entry ids are 0, 1, 2, … in add order; ``last_add_confirmed`` (LAC) is the id of the last
   entry added, ``-1`` while the ledger is empty. The model is single-copy and synchronous, so
   every added entry is confirmed at once.
3. A ledger is OPEN, CLOSED or FENCED. Only OPEN ledgers accept adds. FENCED means "another
   writer took over" (BookKeeper's recovery open, done by the new owner of a topic on an
   ownership move, DESIGN.md decision 8); it implies closed. CLOSED means the writer closed it.
4. ``close`` is idempotent on CLOSED, and fails with :class:`LedgerFencedError` on FENCED so
   that an old writer learns it lost the ledger. ``fence`` is idempotent and also applies to
   CLOSED ledgers (recovery of an already closed ledger just reads its LAC).
5. A rejected operation never changes any state.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, ClassVar, Final, NoReturn

import msgspec

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "EntryOutOfRangeError",
    "LedgerClosedError",
    "LedgerFencedError",
    "LedgerInfo",
    "LedgerState",
    "LedgerStore",
    "LedgerStoreStatistics",
    "NoSuchLedgerError",
    "StorageError",
    "error_for_code",
]

# ---- errors ---------------------------------------------------------------------------------


class StorageError(Exception):
    """Base class of every error the ledger store raises.

    Attributes:
        code: Stable machine-readable name of the error, for the RPC reply (STYLE.md §1.10).
        retriable: Whether retrying the same request can succeed (STYLE.md §1.12).
        ledger_id: The ledger the failed operation addressed.
    """

    code: ClassVar[str] = "StorageError"
    retriable: ClassVar[bool] = False

    def __init__(self, message: str, *, ledger_id: int) -> None:
        super().__init__(message)
        self.ledger_id = ledger_id


class NoSuchLedgerError(StorageError):
    """The ledger id was never allocated, or the ledger was deleted."""

    code = "NoSuchLedger"


class EntryOutOfRangeError(StorageError):
    """A read asked for entries that are not (yet) confirmed, or for an invalid range."""

    code = "EntryOutOfRange"


class LedgerClosedError(StorageError):
    """The ledger was closed by its writer and accepts no more entries."""

    code = "LedgerClosed"


class LedgerFencedError(StorageError):
    """The ledger was fenced by a new writer; the old writer must stop."""

    code = "LedgerFenced"


_ERRORS_BY_CODE: Final[Mapping[str, type[StorageError]]] = {
    cls.code: cls
    for cls in (
        StorageError,
        NoSuchLedgerError,
        EntryOutOfRangeError,
        LedgerClosedError,
        LedgerFencedError,
    )
}


def error_for_code(code: str) -> type[StorageError]:
    """Return the error class for a ``code`` received over RPC.

    Args:
        code: A :attr:`StorageError.code` value.

    Returns:
        The matching class, or :class:`StorageError` itself for an unknown code (a newer stub
        may know errors we do not).
    """
    return _ERRORS_BY_CODE.get(code, StorageError)


# ---- state machine --------------------------------------------------------------------------


class LedgerState(enum.Enum):
    """Lifecycle state of a ledger (see the module docstring, rule 3)."""

    OPEN = "open"
    CLOSED = "closed"
    FENCED = "fenced"


class _Op(enum.Enum):
    ADD = "add"
    CLOSE = "close"
    FENCE = "fence"


# (state, operation) -> next state. A pair missing from the table is illegal and raises the
# error that explains the current state; the state itself is left as it was (rule 5).
_TRANSITIONS: Final[Mapping[tuple[LedgerState, _Op], LedgerState]] = {
    (LedgerState.OPEN, _Op.ADD): LedgerState.OPEN,
    (LedgerState.OPEN, _Op.CLOSE): LedgerState.CLOSED,
    (LedgerState.OPEN, _Op.FENCE): LedgerState.FENCED,
    (LedgerState.CLOSED, _Op.CLOSE): LedgerState.CLOSED,
    (LedgerState.CLOSED, _Op.FENCE): LedgerState.FENCED,
    (LedgerState.FENCED, _Op.FENCE): LedgerState.FENCED,
}


def _reject(ledger_id: int, state: LedgerState, op: _Op) -> NoReturn:
    if state is LedgerState.FENCED:
        raise LedgerFencedError(
            f"cannot {op.value}: ledger {ledger_id} is fenced", ledger_id=ledger_id
        )
    raise LedgerClosedError(f"cannot {op.value}: ledger {ledger_id} is closed", ledger_id=ledger_id)


def _transition(ledger_id: int, state: LedgerState, op: _Op) -> LedgerState:
    next_state = _TRANSITIONS.get((state, op))
    if next_state is None:
        _reject(ledger_id, state, op)
    return next_state


# ---- snapshots ------------------------------------------------------------------------------


class LedgerInfo(msgspec.Struct, frozen=True):
    """Snapshot of one ledger's metadata.

    Attributes:
        ledger_id: The ledger's id.
        state: Its lifecycle state.
        last_add_confirmed: Id of the last entry, ``-1`` when empty.
        size_bytes: Total payload bytes of its entries.
    """

    ledger_id: int
    state: LedgerState
    last_add_confirmed: int
    size_bytes: int


class LedgerStoreStatistics(msgspec.Struct, frozen=True):
    """Snapshot of the whole store, for debugging and metrics.

    Attributes:
        ledgers: Ledgers currently held (deleted ones excluded).
        open_ledgers: How many of them are OPEN.
        entries: Entries held across all ledgers.
        size_bytes: Payload bytes held across all ledgers.
    """

    ledgers: int
    open_ledgers: int
    entries: int
    size_bytes: int


# ---- the store ------------------------------------------------------------------------------


class _Ledger:
    # A mutable record private to the store; callers only ever see LedgerInfo snapshots.
    __slots__ = ("entries", "size_bytes", "state")

    def __init__(self) -> None:
        self.state = LedgerState.OPEN
        self.entries: list[bytes] = []
        self.size_bytes = 0


class LedgerStore:
    """Every ledger of one bookie stub, held in memory.

    Adds and reads are a dict lookup plus a list append or slice, because they sit on the
    produce and dispatch hot paths.
    """

    __slots__ = ("_bytes", "_entries", "_ledgers", "_next_id")

    def __init__(self) -> None:
        self._ledgers: dict[int, _Ledger] = {}
        self._next_id = 1  # rule 1: ids start at 1 and only grow
        self._entries = 0
        self._bytes = 0

    def _get(self, ledger_id: int) -> _Ledger:
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            raise NoSuchLedgerError(f"no such ledger: {ledger_id}", ledger_id=ledger_id)
        return ledger

    def create_ledger(self) -> int:
        """Create an empty OPEN ledger.

        Returns:
            The new ledger's id, greater than every id handed out before.
        """
        ledger_id = self._next_id
        self._next_id += 1
        self._ledgers[ledger_id] = _Ledger()
        return ledger_id

    def add_entry(self, ledger_id: int, data: bytes) -> int:
        """Append one entry to an OPEN ledger.

        Args:
            ledger_id: The ledger to append to.
            data: The entry payload, stored as an immutable copy.

        Returns:
            The new entry's id (the new last-add-confirmed).

        Raises:
            NoSuchLedgerError: The ledger does not exist.
            LedgerClosedError: The ledger was closed.
            LedgerFencedError: The ledger was fenced.
        """
        ledger = self._get(ledger_id)
        # The table admits ADD only as OPEN -> OPEN; test that directly on the hot path.
        if ledger.state is not LedgerState.OPEN:
            _reject(ledger_id, ledger.state, _Op.ADD)
        # bytes(b) returns b itself for exact bytes, so this copies only mutable buffers.
        payload = bytes(data)
        entries = ledger.entries
        entries.append(payload)
        ledger.size_bytes += len(payload)
        self._entries += 1
        self._bytes += len(payload)
        return len(entries) - 1

    def add_entries(self, ledger_id: int, entries: Sequence[bytes]) -> int:
        """Append entries to an OPEN ledger at once: ``add_entry`` for each, in order.

        All or nothing: a refused ledger stores none of them.

        Args:
            ledger_id: The ledger to append to.
            entries: The payloads, stored as immutable copies.

        Returns:
            The id of the first new entry (the others follow it); the ledger's last-add-confirmed
            when ``entries`` is empty.

        Raises:
            NoSuchLedgerError: The ledger does not exist.
            LedgerClosedError: The ledger was closed.
            LedgerFencedError: The ledger was fenced.
        """
        ledger = self._get(ledger_id)
        if ledger.state is not LedgerState.OPEN:
            _reject(ledger_id, ledger.state, _Op.ADD)
        payloads = list(map(bytes, entries))  # bytes(b) is b itself for exact bytes
        size = sum(map(len, payloads))
        stored = ledger.entries
        first = len(stored)
        stored += payloads
        ledger.size_bytes += size
        self._entries += len(payloads)
        self._bytes += size
        return first

    def read(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """Read the entries ``first..last`` (both inclusive).

        Args:
            ledger_id: The ledger to read.
            first: Id of the first entry to return, ``>= 0``.
            last: Id of the last entry to return, ``>= first`` and ``<=`` last-add-confirmed.

        Returns:
            The payloads in entry-id order, exactly ``last - first + 1`` of them.

        Raises:
            NoSuchLedgerError: The ledger does not exist.
            EntryOutOfRangeError: The range is reversed, negative or beyond last-add-confirmed.
        """
        entries = self._get(ledger_id).entries
        if not 0 <= first <= last < len(entries):
            raise EntryOutOfRangeError(
                f"cannot read entries {first}..{last} of ledger {ledger_id}: "
                f"last add confirmed is {len(entries) - 1}",
                ledger_id=ledger_id,
            )
        return entries[first : last + 1]

    def last_add_confirmed(self, ledger_id: int) -> int:
        """Return the id of the ledger's last entry, ``-1`` when it is empty.

        Raises:
            NoSuchLedgerError: The ledger does not exist.
        """
        return len(self._get(ledger_id).entries) - 1

    def info(self, ledger_id: int) -> LedgerInfo:
        """Return a snapshot of one ledger's metadata.

        Raises:
            NoSuchLedgerError: The ledger does not exist.
        """
        ledger = self._get(ledger_id)
        return LedgerInfo(ledger_id, ledger.state, len(ledger.entries) - 1, ledger.size_bytes)

    def ledger_ids(self) -> list[int]:
        """Return the ids of all ledgers held, ascending."""
        return sorted(self._ledgers)

    def close(self, ledger_id: int) -> int:
        """Close a ledger on behalf of its writer; closing twice is a no-op.

        Returns:
            The ledger's final last-add-confirmed.

        Raises:
            NoSuchLedgerError: The ledger does not exist.
            LedgerFencedError: The ledger was fenced: this writer no longer owns it.
        """
        ledger = self._get(ledger_id)
        ledger.state = _transition(ledger_id, ledger.state, _Op.CLOSE)
        return len(ledger.entries) - 1

    def fence(self, ledger_id: int) -> int:
        """Fence a ledger so that its old writer can add nothing more; idempotent.

        Returns:
            The ledger's last-add-confirmed, which can no longer change.

        Raises:
            NoSuchLedgerError: The ledger does not exist.
        """
        ledger = self._get(ledger_id)
        ledger.state = _transition(ledger_id, ledger.state, _Op.FENCE)
        return len(ledger.entries) - 1

    def delete(self, ledger_id: int) -> None:
        """Delete a ledger in any state, with its entries; its id is never reused.

        Raises:
            NoSuchLedgerError: The ledger does not exist.
        """
        ledger = self._get(ledger_id)
        del self._ledgers[ledger_id]
        self._entries -= len(ledger.entries)
        self._bytes -= ledger.size_bytes

    def statistics(self) -> LedgerStoreStatistics:
        """Return a frozen snapshot of the store's counters."""
        open_ledgers = sum(
            1 for ledger in self._ledgers.values() if ledger.state is LedgerState.OPEN
        )
        return LedgerStoreStatistics(
            ledgers=len(self._ledgers),
            open_ledgers=open_ledgers,
            entries=self._entries,
            size_bytes=self._bytes,
        )
