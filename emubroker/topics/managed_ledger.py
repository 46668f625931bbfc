"""A persistent topic's entries over a bookie: Pulsar's managed ledger, reduced.

Entries are addressed internally by a dense *index* 0, 1, 2, … in append order; on the wire they
are ``(ledger_id, entry_id)`` (spec/wire-protocol.md §10). A topic writes to one ledger until it
is full (Pulsar's ``currentLedgerIsFull``: ``managedLedgerMaxEntriesPerLedger`` entries or
``managedLedgerMaxSizePerLedgerMbytes``, or older than
``managedLedgerMaxLedgerRolloverTimeMinutes``; never before
``managedLedgerMinLedgerRolloverTimeMinutes``), then rolls over to a fresh one, so ids only grow
and stay stable: receipt id = delivery id = last-message id (§7.6).

Two modes, one class, chosen from what the backend states (``emubroker.storage``):

* **Memory** (a ``sync`` backend and no ledger list to persist: the default embedded broker's
  ``MemoryBackend``): adds and reads answer at once, nothing is persisted in the metadata store,
  no entry cache (the store is memory already). The publish hot path costs no task switch.
  Consumed ledgers are deleted by :meth:`ManagedLedger.trim_nowait`, which the topic calls
  (``Topic.trim_consumed``).
* **Bookie** (any other: the stub, in-process or over TCP): the ledger list lives in the metadata
  store at Pulsar's path (``ml_meta``) when the backend is durable; adds are awaited (a
  SEND_RECEIPT goes out only once the stub holds the entry, DESIGN.md decision 8) with up to
  :data:`ADDS_IN_FLIGHT` pipelined, in order; reads come from a bounded entry cache or, on a miss,
  from the stub in ranges (``read`` raises :class:`CacheMiss`; ``await load(...)`` fills it).
  Opening fences the last ledger and recovers its end before anything is served (a new owner
  must not lose or fork entries). The ledger list is written version-checked from the version
  read at opening: once another owner opened the topic (a broker whose session expired while
  it still runs), this one's next write of the list fails and the managed ledger is *fenced*
  (Pulsar's ``ManagedLedgerFencedException``): every add fails from then on, so a zombie
  owner can neither write entries (its ledger is fenced in the bookie) nor roll over to a
  ledger of its own.

A failed add leaves the ledger *tainted*: adds after the failed one may have landed with shifted
ids, so only the prefix before the failure is committed and the next add rolls over to a fresh
ledger (as Pulsar closes a ledger after a write error). The producer re-sends what failed.
The :class:`EntryInfo` of every live entry stays in memory, aligned with the index from
:attr:`ManagedLedger.base` (the first live entry's index): a trim drops the infos and cache slots
of the deleted ledgers, so what a topic keeps per entry is bounded by its live ledgers, however
long it runs.
"""

from __future__ import annotations

import bisect
import logging
import sys
from typing import TYPE_CHECKING

import anyio
import msgspec

from emubroker.metadata.store import BadVersionError
from emubroker.topics.entry import EntryInfo, entry_info_from_entry
from emubroker.topics.entry_cache import CacheBudget, EntryCache
from emubroker.topics.ml_meta import (
    LedgerRecord,
    ManagedLedgerInfo,
    decode_ledger_info,
    encode_info,
)
from protocol.framing import decode_payload_section
from storage_stub.client import LedgerFencedError, ReadTooLargeError, StorageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emubroker.metadata.store import MetadataStore
    from emubroker.storage import LedgerBackend
    from protocol.clock import Clock

__all__ = [
    "ADDS_IN_FLIGHT",
    "READ_RANGE",
    "CacheBudget",
    "CacheMiss",
    "LedgerPolicy",
    "ManagedLedger",
    "ManagedLedgerFencedError",
]

logger = logging.getLogger(__name__)

ADDS_IN_FLIGHT = 32
"""Adds pipelined to the stub per managed ledger: enough to hide a round trip, bounded so one
producer's burst cannot flood the stub's connection."""

READ_RANGE = 256
"""Entries per stub read on a cache miss (halved when the stub says the reply is too big)."""

_PLACEHOLDER = EntryInfo(1, False, 0, None, None, "", -1, 0)  # trimmed entries: never read


class CacheMiss(anyio.WouldBlock):
    """Entries ``first..last`` are not in the cache; ``await ledger.load(first, last)``."""

    def __init__(self, first: int, last: int) -> None:
        super().__init__(first, last)
        self.first = first
        self.last = last


class ManagedLedgerFencedError(StorageError):
    """Another broker opened this managed ledger: nothing more may be written through this one."""

    code = "ManagedLedgerFenced"


class LedgerPolicy(msgspec.Struct, frozen=True):
    """Rollover and caching rules (Pulsar's ``managedLedger*`` keys, in base units).

    Attributes:
        max_entries: ``managedLedgerMaxEntriesPerLedger``.
        max_size: ``managedLedgerMaxSizePerLedgerMbytes`` in bytes.
        min_rollover: ``managedLedgerMinLedgerRolloverTimeMinutes`` in seconds.
        max_rollover: ``managedLedgerMaxLedgerRolloverTimeMinutes`` in seconds.
    """

    max_entries: int = 50_000
    max_size: int = 2048 * 1024 * 1024
    min_rollover: float = 0.0
    max_rollover: float = 240 * 60.0


class ManagedLedger:
    """The entries of one persistent topic (see the module docstring).

    Build one with :meth:`create` (memory mode, synchronous) or :meth:`open` (either mode).
    """

    __slots__ = (
        "_bookie",
        "_cache",
        "_clock",
        "_created",
        "_fenced",
        "_first_live",
        "_ledger_ids",
        "_lock",
        "_metadata",
        "_nowait",
        "_path",
        "_policy",
        "_sizes",
        "_starts",
        "_tainted",
        "_terminated",
        "_version",
        "base",
        "infos",
    )

    def __init__(
        self,
        backend: LedgerBackend,
        *,
        policy: LedgerPolicy,
        clock: Clock | None,
        metadata: MetadataStore | None,
        path: str | None,
        budget: CacheBudget | None,
    ) -> None:
        self._bookie = backend.client
        # Memory mode: the store answers at once and no ledger list waits to be written (a
        # rollover of a persisted ledger list must be awaited).
        self._nowait = backend if backend.sync and metadata is None else None
        self._policy = policy
        self._clock = clock
        self._metadata = metadata
        self._path = path
        # Segment k covers indexes _starts[k] .. _starts[k+1]-1 and lives in ledger _ledger_ids[k].
        self._starts: list[int] = []
        self._ledger_ids: list[int] = []
        self._sizes: list[int] = []
        self._created: list[float] = []
        self._first_live = 0  # segments before it were trimmed (deleted from the bookie)
        self._tainted = False
        self._terminated = False  # ``terminate``: no entry is ever added again
        self._version = -1  # of the stored ledger list (-1: not stored yet)
        self._fenced = False
        self._lock = anyio.Lock()
        self._cache = EntryCache(budget if budget is not None else CacheBudget(256 * 1024 * 1024))
        # ``infos[i]`` is the info of index ``base + i``: entries before ``base`` were trimmed.
        # A trim rebinds ``infos`` (never cuts it in place), so a reader holding the list and
        # the ``base`` it read with it keeps a consistent pair.
        self.base = 0
        self.infos: list[EntryInfo] = []

    # ---- opening ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls, backend: LedgerBackend, *, policy: LedgerPolicy | None = None, ledger_id: int
    ) -> ManagedLedger:
        """A new memory-mode managed ledger writing to ``ledger_id`` (already created).

        Raises:
            WouldBlock: The backend is not sync: use :meth:`open`.
        """
        if not backend.sync:
            raise anyio.WouldBlock
        ml = cls(
            backend,
            policy=policy or LedgerPolicy(),
            clock=None,
            metadata=None,
            path=None,
            budget=None,
        )
        ml._add_segment(ledger_id, 0)
        return ml

    @classmethod
    async def open(
        cls,
        backend: LedgerBackend,
        *,
        policy: LedgerPolicy,
        clock: Clock | None = None,
        metadata: MetadataStore | None = None,
        path: str | None = None,
        budget: CacheBudget | None = None,
        create: bool = True,
    ) -> ManagedLedger | None:
        """Open a topic's managed ledger, recovering it from the metadata store if stored.

        A stored one has its last ledger fenced (a writer from an earlier owner can add nothing
        more) and its end recovered; its entries are read back to rebuild the entry infos, and
        writing continues in a fresh ledger.

        Args:
            backend: Where entries live.
            policy: Rollover rules.
            clock: Time for rollover by age; None: never by age.
            metadata: Where the ledger list is kept; None: memory mode, nothing persisted.
            path: The ledger list's node (``ml_meta.managed_ledger_path``).
            budget: The shared cache size.
            create: Whether a missing managed ledger may be created.

        Returns:
            The managed ledger, or None when it does not exist and ``create`` is false.

        Raises:
            StorageError: The bookie failed.
            MetadataStoreError: The metadata store failed.
        """
        ml = cls(backend, policy=policy, clock=clock, metadata=metadata, path=path, budget=budget)
        stored = None
        if metadata is not None and path is not None:
            value = await metadata.get(path)
            if value is not None:
                stored = decode_ledger_info(value.value)
                ml._version = value.version
        if stored is None:
            if not create:
                return None
            ml._add_segment(await backend.client.create_ledger(), 0)
            await ml._persist()
            return ml
        await ml._recover(stored)
        return ml

    async def _recover(self, stored: ManagedLedgerInfo) -> None:
        records = stored.ledgers
        base = records[0].first_index if records else 0
        self.base = base
        self._cache.start_at(base)
        for i, record in enumerate(records):
            entries = record.entries
            if i == len(records) - 1 and entries < 0:
                # The open ledger: fence it, then its last-add-confirmed is its end for good.
                entries = await self._bookie.fence(record.ledger_id) + 1
            self._add_segment(record.ledger_id, self.count)
            self._sizes[-1] = record.size
            infos: list[EntryInfo] = []
            for section in await self._read_range(record.ledger_id, 0, entries - 1):
                infos.append(entry_info_from_entry(decode_payload_section(section).entry))
            self.infos += infos
            self._cache.skip(len(infos))
        self._terminated = stored.terminated
        if not self._starts:
            self._add_segment(await self._bookie.create_ledger(), base)
        elif not self._terminated:  # a terminated one takes no entry: no ledger to write to
            await self._rollover()
        logger.info("recovered managed ledger %s: %s entries", self._path, self.count)

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

    # ---- positions ----------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Number of entries appended so far (the next entry's index)."""
        return self.base + len(self.infos)

    @property
    def first_index(self) -> int:
        """The first entry still stored (entries before it were trimmed)."""
        return self._starts[self._first_live]

    @property
    def current_ledger_id(self) -> int:
        """The ledger new entries go to."""
        return self._ledger_ids[-1]

    @property
    def ledger_ids(self) -> tuple[int, ...]:
        """Every live ledger of the topic, oldest first."""
        return tuple(self._ledger_ids[self._first_live :])

    @property
    def nowait(self) -> bool:
        """Whether adds and reads answer at once (memory mode)."""
        return self._nowait is not None

    def position(self, index: int) -> tuple[int, int]:
        """The ``(ledger_id, entry_id)`` of an index; ``-1`` gives (first ledger, -1)."""
        if index < 0:
            return self._ledger_ids[0], -1
        k = bisect.bisect_right(self._starts, index) - 1
        return self._ledger_ids[k], index - self._starts[k]

    def last_position(self) -> tuple[int, int]:
        """Position of the last entry; an empty topic gives (current ledger, -1) (§7.6)."""
        if not self.count:
            return self._ledger_ids[-1], -1
        return self.position(self.count - 1)

    def last_message_id(self) -> tuple[int, int, int]:
        """``(ledger, entry, batch_index)`` of the last entry for GET_LAST_MESSAGE_ID (§7.6).

        ``batch_index`` is ``num_messages - 1`` for a batched last entry, else -1; an empty topic
        gives ``(current ledger, -1, -1)``; so does a last entry whose ledger was trimmed (its
        info is gone, as a reopened topic's is).
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
            return index if index < self.count else None
        k = bisect.bisect_left(self._ledger_ids, ledger_id)
        if k == len(self._ledger_ids) or self._ledger_ids[k] != ledger_id or k < self._first_live:
            return None  # not ours, or trimmed (deleted from the bookie)
        index = self._starts[k] + entry_id
        end = self._starts[k + 1] if k + 1 < len(self._starts) else self.count
        return index if index < end else None

    def index_at_or_after(self, ledger_id: int, entry_id: int) -> int:
        """The index of the first entry at or after ``(ledger_id, entry_id)``, up to ``count``."""
        k = bisect.bisect_left(self._ledger_ids, ledger_id)
        if k == len(self._ledger_ids):
            return self.count
        if self._ledger_ids[k] != ledger_id:
            return self._starts[k]  # a ledger between ours: the next ledger's first entry
        end = self._starts[k + 1] if k + 1 < len(self._starts) else self.count
        return min(self._starts[k] + max(entry_id, 0), end)

    # ---- appending ----------------------------------------------------------------------------

    def append_many_nowait(
        self, sections: Sequence[bytes], infos: Sequence[EntryInfo]
    ) -> list[tuple[int, int]]:
        """Store entries in order, one store call per ledger (memory mode only).

        Returns:
            The ``(ledger_id, entry_id)`` of each entry stored. Fewer than given when the store
            refused a write after some were stored; the caller retries the rest.

        Raises:
            WouldBlock: Bookie mode: use :meth:`append_many`.
            StorageError: The store refused the first write (nothing was stored).
        """
        store = self._nowait
        if store is None:
            raise anyio.WouldBlock
        positions: list[tuple[int, int]] = []
        policy = self._policy
        done = 0
        while done < len(sections):
            index = self.count
            room = policy.max_entries - (index - self._starts[-1])
            try:
                # By entries exactly; by size once a call's entries filled it (Pulsar checks
                # after each add). Memory mode has no clock: never by age.
                if room <= 0 or self._sizes[-1] >= policy.max_size:
                    store.close_ledger_nowait(self._ledger_ids[-1])
                    self._add_segment(store.create_ledger_nowait(), index)
                    room = policy.max_entries
                ledger_id = self._ledger_ids[-1]
                stop = min(len(sections), done + room)
                first = store.add_entries_nowait(ledger_id, sections[done:stop])
            except StorageError:
                if not positions:
                    raise
                return positions
            self._sizes[-1] += sum(map(len, sections[done:stop]))
            self.infos += infos[done:stop]
            positions += [(ledger_id, entry_id) for entry_id in range(first, first + stop - done)]
            done = stop
        return positions

    async def append_many(
        self, sections: Sequence[bytes], infos: Sequence[EntryInfo]
    ) -> list[tuple[int, int]]:
        """Store entries in order; returns once the bookie holds them.

        Several adds are in flight at once (:data:`ADDS_IN_FLIGHT`); appends of different
        callers are serialized so each caller's entries stay in order and contiguous.

        Returns:
            The ``(ledger_id, entry_id)`` of each entry stored; fewer than given when a write
            failed after some were stored (the caller fails or retries the rest).

        Raises:
            StorageError, MetadataStoreError: Nothing was stored.
        """
        if self._nowait is not None:
            return self.append_many_nowait(sections, infos)
        positions: list[tuple[int, int]] = []
        async with self._lock:
            self._check_fenced()
            done = 0
            while done < len(sections):
                try:
                    if self._full():
                        await self._rollover()
                    room = self._policy.max_entries - (self.count - self._starts[-1])
                    stop = min(len(sections), done + max(room, 1))
                    stored, error = await self._add_run(sections[done:stop])
                except StorageError:
                    if positions:
                        return positions
                    raise
                ledger_id, base = self._ledger_ids[-1], self.count - self._starts[-1]
                for offset in range(stored):
                    positions.append((ledger_id, base + offset))
                    self._cache.append(sections[done + offset])
                self.infos += infos[done : done + stored]
                self._sizes[-1] += sum(len(s) for s in sections[done : done + stored])
                done += stored
                if error is not None:
                    if positions:
                        return positions
                    raise error
        return positions

    async def _add_run(self, run: Sequence[bytes]) -> tuple[int, StorageError | None]:
        """Add ``run`` to the current ledger, pipelined; returns (committed prefix, error)."""
        ledger_id = self._ledger_ids[-1]
        expected = self.count - self._starts[-1]
        add = self._bookie.add_entry
        if len(run) == 1:
            try:
                entry_id = await add(ledger_id, run[0])
            except StorageError as exc:
                self._tainted = True
                return 0, exc
            if entry_id != expected:
                self._tainted = True
                return 0, StorageError(f"ledger {ledger_id} forked", ledger_id=ledger_id)
            return 1, None
        results: list[int | None] = [None] * len(run)
        errors: list[tuple[int, StorageError]] = []
        cursor = [0]

        async def worker() -> None:
            while not errors:
                i = cursor[0]
                if i >= len(run):
                    return
                cursor[0] = i + 1
                # Taking ``i`` and issuing its add happen in one step (no checkpoint between),
                # so the stub receives the adds in index order whatever the task order.
                try:
                    results[i] = await add(ledger_id, run[i])
                except StorageError as exc:
                    errors.append((i, exc))
                    return

        async with anyio.create_task_group() as tg:
            for _ in range(min(ADDS_IN_FLIGHT, len(run))):
                tg.start_soon(worker)
        stored = 0
        while stored < len(run) and results[stored] == expected + stored:
            stored += 1
        if stored < len(run):
            self._tainted = True  # later adds may have landed with shifted ids
            error = min(errors, key=lambda e: e[0])[1] if errors else None
            return stored, error or StorageError(f"ledger {ledger_id} forked", ledger_id=ledger_id)
        return stored, None

    def _full(self) -> bool:
        # Pulsar's ManagedLedgerImpl.currentLedgerIsFull, plus a ledger tainted by a failed add.
        if self._tainted:
            return True
        entries = self.count - self._starts[-1]
        policy = self._policy
        space = entries >= policy.max_entries or self._sizes[-1] >= policy.max_size
        age = self._age()
        if not (space or (entries > 0 and age >= policy.max_rollover)):
            return False
        return policy.min_rollover <= 0 or age > policy.min_rollover

    def _age(self) -> float:
        return 0.0 if self._clock is None else self._clock.now() - self._created[-1]

    async def reopen(self) -> None:
        """Continue in a fresh ledger, as Pulsar's managed ledger does when a topic is reopened.

        An unloaded topic's next owner (this broker again, after an unload) writes entry 0 of a
        new ledger; a current ledger with no entries is kept (Pulsar deletes an empty one).
        """
        if self.count > self._starts[-1]:
            await self._rollover()

    async def _rollover(self) -> None:
        """Close the current ledger (best effort) and continue in a fresh one."""
        old = self._ledger_ids[-1]
        new = await self._bookie.create_ledger()
        self._add_segment(new, self.count)
        try:
            await self._persist()
        except BaseException:
            self._drop_last_segment()
            raise
        self._tainted = False
        try:
            await self._bookie.close_ledger(old)
        except LedgerFencedError:
            # Expected when a new owner recovers the ledger it has just fenced (a fenced ledger
            # refuses close); its count is in the ledger list, which recovery reads, not its LAC.
            logger.info("ledger %s of %s is fenced: left as it is", old, self._path)
        except StorageError:
            # Recovery reads closed ledgers by the count in the ledger list, not their LAC.
            logger.warning("could not close ledger %s of %s", old, self._path)

    def _add_segment(self, ledger_id: int, start: int) -> None:
        self._ledger_ids.append(ledger_id)
        self._starts.append(start)
        self._sizes.append(0)
        self._created.append(0.0 if self._clock is None else self._clock.now())

    def _drop_last_segment(self) -> None:
        for column in (self._ledger_ids, self._starts, self._sizes, self._created):
            column.pop()

    @property
    def terminated(self) -> bool:
        """Whether the managed ledger was terminated: it takes no entry any more."""
        return self._terminated

    async def terminate(self) -> tuple[int, int]:
        """Take no entry any more (Pulsar's ``asyncTerminate``), persisted with the ledger list.

        Appends in flight finish first; terminating again answers the same position.

        Returns:
            The last entry's ``(ledger_id, entry_id)``: :meth:`last_position`.

        Raises:
            MetadataStoreError: The ledger list could not be written.
        """
        async with self._lock:
            if not self._terminated:
                self._terminated = True
                try:
                    await self._persist()
                except BaseException:
                    self._terminated = False
                    raise
        return self.last_position()

    def _check_fenced(self) -> None:
        if self._fenced:
            raise ManagedLedgerFencedError(
                f"managed ledger {self._path} was opened by another broker",
                ledger_id=self._ledger_ids[-1],
            )

    async def close(self) -> None:
        """Wait for the appends in flight to finish (an unload hands the topic over after)."""
        async with self._lock:
            pass

    async def _persist(self) -> None:
        if self._metadata is None or self._path is None:
            return
        records = []
        for k in range(self._first_live, len(self._ledger_ids)):
            last = k == len(self._ledger_ids) - 1
            end = self.count if last else self._starts[k + 1]
            records.append(
                LedgerRecord(
                    ledger_id=self._ledger_ids[k],
                    first_index=self._starts[k],
                    # A terminated managed ledger's last ledger is complete: nothing to recover.
                    entries=-1 if last and not self._terminated else end - self._starts[k],
                    size=self._sizes[k],
                )
            )
        try:
            put = await self._metadata.put(
                self._path,
                encode_info(ManagedLedgerInfo(records, terminated=self._terminated)),
                self._version,
            )
        except BadVersionError:
            self._fenced = True
            logger.warning("managed ledger %s was opened by another broker: fenced", self._path)
            self._check_fenced()
            raise
        self._version = put.version

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

    def info(self, index: int) -> EntryInfo:
        """The info of an entry; a placeholder for one whose ledger was trimmed (never read)."""
        return self.infos[index - self.base] if index >= self.base else _PLACEHOLDER

    def bytes_from(self, index: int) -> int:
        """The stored bytes from ``index`` on, estimated as Pulsar estimates a backlog's size.

        ``ManagedLedgerImpl.getEstimatedBacklogSize``: the ledgers after the one holding
        ``index`` count whole; of that one, its size less its entries before ``index`` at its
        average entry size. No walk through the entries.
        """
        index = max(index, self.first_index)
        if index >= self.count:
            return 0
        k = bisect.bisect_right(self._starts, index) - 1
        end = self._starts[k + 1] if k + 1 < len(self._starts) else self.count
        size, entries, consumed = self._sizes[k], end - self._starts[k], index - self._starts[k]
        return size - consumed * (size // entries) + sum(self._sizes[k + 1 :])

    def _trim_point(self, floor: int) -> int:
        """The first segment to keep once every entry at or below ``floor`` is consumed.

        Only whole ledgers go, and never the current one.
        """
        k = self._first_live
        while k < len(self._starts) - 1 and self._starts[k + 1] - 1 <= floor:
            k += 1
        return k

    @property
    def oldest_closed_last(self) -> int:
        """The last index of the oldest live ledger if it is closed, else ``sys.maxsize``.

        Once the slowest cursor's mark-delete reaches it, that whole ledger is consumed: the
        moment Pulsar looks for ledgers to trim. The current ledger is never trimmed, hence the
        sentinel while it is the only one.
        """
        k = self._first_live + 1
        return self._starts[k] - 1 if k < len(self._starts) else sys.maxsize

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
