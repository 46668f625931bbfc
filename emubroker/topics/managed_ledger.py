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

This module opens (and recovers) a managed ledger and appends to it; the table of ledgers and
the positions are ``ledger_segments.py``'s, the reads ``ledger_reads.py``'s and the trimming
``ledger_trimming.py``'s, each a base of :class:`ManagedLedger`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from emubroker.topics.entry import EntryInfo, entry_info_from_entry
from emubroker.topics.entry_cache import CacheBudget
from emubroker.topics.ledger_reads import READ_RANGE, CacheMiss, LedgerReads
from emubroker.topics.ledger_segments import LedgerPolicy, ManagedLedgerFencedError
from emubroker.topics.ledger_trimming import LedgerTrimming
from emubroker.topics.ml_meta import ManagedLedgerInfo, decode_ledger_info
from protocol.framing import decode_payload_section
from storage_stub.client import LedgerFencedError, StorageError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

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


class ManagedLedger(LedgerReads, LedgerTrimming):
    """The entries of one persistent topic (see the module docstring).

    Build one with :meth:`create` (memory mode, synchronous) or :meth:`open` (either mode).
    The state and positions are :class:`LedgerSegments`'s (``ledger_segments.py``), the reads
    :class:`LedgerReads`'s, the trimming :class:`LedgerTrimming`'s.
    """

    __slots__ = ()

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
        self._properties = dict(stored.properties)
        if not self._starts:
            self._add_segment(await self._bookie.create_ledger(), base)
        elif not self._terminated:  # a terminated one takes no entry: no ledger to write to
            await self._rollover()
        logger.info("recovered managed ledger %s: %s entries", self._path, self.count)

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
            positions += zip(
                [ledger_id] * (stop - done), range(first, first + stop - done), strict=True
            )
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

    async def close(self) -> None:
        """Wait for the appends in flight to finish (an unload hands the topic over after)."""
        async with self._lock:
            pass

    @property
    def properties(self) -> dict[str, str]:
        """A copy of the topic's properties (Pulsar's managed-ledger properties)."""
        return dict(self._properties)

    async def set_properties(self, properties: Mapping[str, str]) -> None:
        """Add properties, replacing same keys (Pulsar's ``asyncSetProperties``), persisted.

        Raises:
            MetadataStoreError: The ledger list could not be written (nothing changed).
        """
        await self._change_properties(lambda old: {**old, **properties})

    async def delete_property(self, key: str) -> None:
        """Remove one property, if set (Pulsar's ``asyncDeleteProperty``), persisted.

        Raises:
            MetadataStoreError: The ledger list could not be written (nothing changed).
        """
        await self._change_properties(lambda old: {k: v for k, v in old.items() if k != key})

    async def _change_properties(self, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        async with self._lock:  # the change applies to what the last one left
            before = self._properties
            self._properties = change(before)
            try:
                await self._persist()
            except BaseException:
                self._properties = before
                raise
