"""A ledger store that journals every mutation before it is acknowledged (issue 4, part 2).

:class:`DurableLedgerStore` keeps the pure :class:`~storage_stub.ledger.LedgerStore` as its
in-memory image and, when given a :class:`~storage_stub.journal.Journal`, appends one record per
successful mutation. Mutators are synchronous and apply in call order, so entry ids follow the
order requests arrived in; the caller acknowledges only after ``await wait_durable(ticket)``
(DESIGN.md decision 8: nothing acknowledged is lost). Without a journal (in-memory mode) the
ticket is always 0 and waiting is free.

Rules:

1. A mutation is validated against the model first; a rejected one journals nothing.
2. Recovery replays the records in order into a fresh model; a record that does not apply is
   corruption and is reported with its file offset.
3. Reads may see an entry whose add is not durable yet; the managed ledger only reads up to
   positions it was acknowledged, so it never dispatches such an entry.
4. Compaction rewrites the journal from the live model, dropping deleted ledgers, once their
   bytes dominate (:data:`COMPACT_MIN_DEAD_BYTES`). Ledger ids are never reused, even across a
   compaction that dropped the newest ledgers (the ``Reserve`` record keeps the next id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from storage_stub.errors import PersistenceFailedError
from storage_stub.journal import Journal, JournalCorruptedError, JournalFailedError
from storage_stub.journaled import JournaledStore
from storage_stub.ledger import (
    LedgerInfo,
    LedgerState,
    LedgerStore,
    LedgerStoreStatistics,
    NoSuchLedgerError,
    StorageError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from storage_stub.journal import ScanResult

__all__ = ["COMPACT_MIN_DEAD_BYTES", "DurableLedgerStore", "ledger_record_bodies"]

# Compact once deleted ledgers hold this many journal bytes and more than the live ones do: a
# rewrite costs a copy of the live data, so it must reclaim at least as much as it copies.
COMPACT_MIN_DEAD_BYTES: Final = 64 * 1024 * 1024


class _Record(msgspec.Struct, frozen=True, array_like=True, gc=False):
    pass


class _Create(_Record, frozen=True, tag=1):
    ledger_id: int


class _Add(_Record, frozen=True, tag=2):
    ledger_id: int
    entry_id: int
    data: bytes


class _Close(_Record, frozen=True, tag=3):
    ledger_id: int


class _Fence(_Record, frozen=True, tag=4):
    ledger_id: int


class _Delete(_Record, frozen=True, tag=5):
    ledger_id: int


class _Reserve(_Record, frozen=True, tag=6):
    next_id: int  # ids below this were handed out; the next create must not reuse them


_LedgerRecord = _Create | _Add | _Close | _Fence | _Delete | _Reserve
_ENCODE: Final = msgspec.msgpack.Encoder().encode
_DECODER: Final = msgspec.msgpack.Decoder(_LedgerRecord)


class DurableLedgerStore(JournaledStore):
    """The ledger model plus an optional journal.

    Args:
        journal: The journal to append to, or ``None`` for in-memory mode.
        compact_min_dead_bytes: See :data:`COMPACT_MIN_DEAD_BYTES`.
    """

    def __init__(
        self,
        journal: Journal | None = None,
        *,
        compact_min_dead_bytes: int = COMPACT_MIN_DEAD_BYTES,
    ) -> None:
        self._model = LedgerStore()
        super().__init__(journal)
        self._next_id = 1
        self._journal_bytes: dict[int, int] = {}  # live ledger -> its record bytes
        self._dead_bytes = 0
        self._compact_min = compact_min_dead_bytes

    @classmethod
    def recover(
        cls,
        journal: Journal,
        scanned: ScanResult,
        *,
        compact_min_dead_bytes: int = COMPACT_MIN_DEAD_BYTES,
    ) -> DurableLedgerStore:
        """Rebuild the store from a journal's recovered records (rule 2).

        Raises:
            JournalCorruptedError: A record does not decode or does not apply.
        """
        store = cls(None, compact_min_dead_bytes=compact_min_dead_bytes)
        path = str(journal.path)
        for body, offset in zip(scanned.records, scanned.offsets, strict=True):
            try:
                store._apply(_DECODER.decode(body), len(body))
            except (msgspec.DecodeError, StorageError) as exc:
                raise JournalCorruptedError(
                    f"ledger record does not apply: {exc}", offset=offset, path=path
                ) from exc
        store._journal = journal
        return store

    # ---- replay -------------------------------------------------------------------------------

    def _apply(self, record: _LedgerRecord, size: int) -> None:
        model = self._model
        match record:
            case _Add(ledger_id, entry_id, data):
                got = model.add_entry(ledger_id, data)
                if got != entry_id:
                    raise StorageError(f"entry {entry_id} replayed as {got}", ledger_id=ledger_id)
            case _Create(ledger_id):
                self._reserve(ledger_id)
                if self._create() != ledger_id:  # pragma: no cover - _reserve guarantees it
                    raise StorageError("ledger id mismatch", ledger_id=ledger_id)
            case _Close(ledger_id):
                model.close(ledger_id)
            case _Fence(ledger_id):
                model.fence(ledger_id)
            case _Delete(ledger_id):
                self._delete(ledger_id)
            case _Reserve(next_id):
                self._reserve(next_id)
        if not isinstance(record, _Reserve) and record.ledger_id in self._journal_bytes:
            self._journal_bytes[record.ledger_id] += size

    def _reserve(self, next_id: int) -> None:
        # LedgerStore allocates ids itself; burn the ids of ledgers a compaction dropped.
        if next_id < self._next_id:
            raise StorageError(f"ledger id {next_id} already used", ledger_id=next_id)
        while self._next_id < next_id:
            burnt = self._create()
            self._model.delete(burnt)
            del self._journal_bytes[burnt]

    # ---- mutators: validate + apply (rule 1), then journal ------------------------------------

    def _log(self, record: _LedgerRecord, ledger_id: int) -> None:
        if self._journal is None:
            return
        body = _ENCODE(record)
        try:
            self._journal.append(body)
        except JournalFailedError as exc:  # pragma: no cover - _check_writable ran first
            raise PersistenceFailedError(str(exc), ledger_id=ledger_id) from exc
        if ledger_id in self._journal_bytes:
            self._journal_bytes[ledger_id] += len(body)

    def _create(self) -> int:
        ledger_id = self._model.create_ledger()
        self._next_id = ledger_id + 1
        self._journal_bytes[ledger_id] = 0
        return ledger_id

    def _delete(self, ledger_id: int) -> None:
        self._model.delete(ledger_id)
        self._dead_bytes += self._journal_bytes.pop(ledger_id, 0)

    def create_ledger(self) -> int:
        """See ``LedgerStore.create_ledger``; journaled."""
        self._check_writable()
        ledger_id = self._create()
        self._log(_Create(ledger_id), ledger_id)
        return ledger_id

    def add_entry(self, ledger_id: int, data: bytes) -> int:
        """See ``LedgerStore.add_entry``; journaled."""
        self._check_writable()
        entry_id = self._model.add_entry(ledger_id, data)
        self._log(_Add(ledger_id, entry_id, data), ledger_id)
        return entry_id

    def close(self, ledger_id: int) -> int:
        """See ``LedgerStore.close``; journaled (a repeated close journals nothing)."""
        self._check_writable()
        was = self._model.info(ledger_id).state
        lac = self._model.close(ledger_id)
        if was is not LedgerState.CLOSED:
            self._log(_Close(ledger_id), ledger_id)
        return lac

    def fence(self, ledger_id: int) -> int:
        """See ``LedgerStore.fence``; journaled, so a fence survives a restart."""
        self._check_writable()
        was = self._model.info(ledger_id).state
        lac = self._model.fence(ledger_id)
        if was is not LedgerState.FENCED:
            self._log(_Fence(ledger_id), ledger_id)
        return lac

    def delete(self, ledger_id: int) -> None:
        """See ``LedgerStore.delete``; journaled."""
        self._check_writable()
        if ledger_id not in self._journal_bytes:
            raise NoSuchLedgerError(f"no such ledger: {ledger_id}", ledger_id=ledger_id)
        self._delete(ledger_id)
        self._log(_Delete(ledger_id), ledger_id)

    # ---- reads --------------------------------------------------------------------------------

    def read(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """See ``LedgerStore.read`` (rule 3)."""
        return self._model.read(ledger_id, first, last)

    def last_add_confirmed(self, ledger_id: int) -> int:
        return self._model.last_add_confirmed(ledger_id)

    def info(self, ledger_id: int) -> LedgerInfo:
        return self._model.info(ledger_id)

    def ledger_ids(self) -> list[int]:
        return self._model.ledger_ids()

    def statistics(self) -> LedgerStoreStatistics:
        return self._model.statistics()

    # ---- durability and compaction ------------------------------------------------------------

    @property
    def next_ledger_id(self) -> int:
        """The id the next ``create_ledger`` returns (ids are never reused)."""
        return self._next_id

    @property
    def dead_bytes(self) -> int:
        """Journal bytes that belong to deleted ledgers."""
        return self._dead_bytes

    def should_compact(self) -> bool:
        """Whether deleted ledgers hold enough of the journal to be worth a rewrite (rule 4)."""
        live = sum(self._journal_bytes.values())
        return self._journal is not None and self._dead_bytes >= max(self._compact_min, live)

    def _snapshot_records(self) -> Iterator[bytes]:
        # Compaction (rule 4), called by Journal.rewrite with appends quiesced: a consistent
        # image of the model.
        self._dead_bytes = 0
        for ledger_id in self._journal_bytes:
            self._journal_bytes[ledger_id] = 0
        for ledger_id, body in ledger_record_bodies(self._model):
            self._journal_bytes[ledger_id] += len(body)
            yield body
        yield _ENCODE(_Reserve(self._next_id))


def ledger_record_bodies(model: LedgerStore) -> Iterator[tuple[int, bytes]]:
    """Journal records that rebuild ``model``'s live ledgers, in id order."""
    for ledger_id in model.ledger_ids():
        yield ledger_id, _ENCODE(_Create(ledger_id))
        info = model.info(ledger_id)
        if info.last_add_confirmed >= 0:
            for entry_id, data in enumerate(model.read(ledger_id, 0, info.last_add_confirmed)):
                yield ledger_id, _ENCODE(_Add(ledger_id, entry_id, data))
        if info.state is LedgerState.CLOSED:
            yield ledger_id, _ENCODE(_Close(ledger_id))
        elif info.state is LedgerState.FENCED:
            yield ledger_id, _ENCODE(_Fence(ledger_id))
