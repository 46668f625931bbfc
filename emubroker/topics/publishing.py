"""A persistent topic's write side: SENDs stored in its managed ledger, termination, trimming.

:class:`PublishingTopic` is the base class of ``topic.Topic``, which owns the state declared
here. A run of SENDs is admitted (nothing from a closed producer, no duplicate, ``dedup``),
appended (awaiting the stub in bookie mode, at once in memory mode) and settled (counted, the
dispatchers woken, each SEND answered); a terminated topic takes no more. The ledger's other
end is trimmed here too: what every subscription consumed goes when a ledger closes, which
publishing causes, and when the slowest subscription moves or goes.
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, NamedTuple

from anyio import WouldBlock

from emubroker.metadata.store import MetadataStoreError
from emubroker.topics.base import TopicBase
from emubroker.topics.dedup import Admission, DedupState, Pending
from emubroker.topics.subscription import Subscription
from emubroker.topics.topic_state import may_trim
from protocol.errors import PersistenceError
from protocol.framing import payload_sections
from storage_stub.client import StorageError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emubroker.naming import TopicName
    from emubroker.topics.entry import EntryInfo
    from emubroker.topics.producer import ProducerHandle
    from emubroker.topics.topic_state import TopicState
    from protocol.clock import Clock

__all__ = ["PublishingTopic"]

_NUM_MESSAGES = attrgetter("num_messages")
_ENTRY = itemgetter(0)


class _Run(NamedTuple):
    """A run of SENDs admitted for storage (``PublishingTopic._admit``).

    Attributes:
        entries: The SENDs to store, in order (duplicates left out).
        sections: Their payload sections, as stored.
        infos: Their entry infos.
        dedup: The deduplication state and its verdicts on the run, when deduplication is on.
        ledger_id: The ledger being written before the run (a rollover may trim).
    """

    entries: Sequence[Pending]
    sections: list[bytes]
    infos: list[EntryInfo]
    dedup: tuple[DedupState, Admission] | None
    ledger_id: int


class PublishingTopic(TopicBase[Subscription]):
    """The write side of a loaded persistent topic (``topic.Topic``; see the module docstring)."""

    # The topic's state these read and write (set by `Topic.__init__`).
    _state: TopicState
    _clock: Clock
    _retains: Callable[[TopicName], bool] | None

    # ---- termination --------------------------------------------------------------------------

    @property
    def terminated(self) -> bool:
        """Whether the topic was terminated (``terminate``): it takes no message any more."""
        return self._state.ledger.terminated

    async def terminate(self) -> tuple[int, int]:
        """Take no message any more (``POST .../terminate``, ``PersistentTopic.terminate``).

        The managed ledger is terminated (persisted, so it outlives unloads and restarts), every
        producer is disconnected (its client's PRODUCER is then refused, ``TopicTerminated``)
        and consumers that consumed everything hear REACHED_END_OF_TOPIC. Terminating again
        answers the same position.

        Returns:
            The last entry's ``(ledger_id, entry_id)`` (``entry_id`` -1 for an empty topic).

        Raises:
            ServiceNotReadyError: The topic is being unloaded.
            MetadataStoreError: The ledger list could not be written.
        """
        self._check_open()
        position = await self._state.ledger.terminate()
        self._producers.disconnect_all()
        for sub in list(self._subs.values()):
            sub.topic_terminated()
        return position

    # ---- publishing ---------------------------------------------------------------------------

    async def publish(
        self, producer: ProducerHandle, entry: bytes, entry_checksum: int | None, info: EntryInfo
    ) -> tuple[int, int]:
        """Store one entry and wake the dispatchers: :meth:`publish_many` of one SEND.

        Args:
            producer: The publishing producer.
            entry: ``metadata_size | metadata | payload`` as received.
            entry_checksum: The CRC-32C that came with it, replayed in MESSAGE.
            info: What the handler decoded from the metadata.

        Returns:
            The entry's ``(ledger_id, entry_id)`` for the SEND_RECEIPT.

        Raises:
            PersistenceError: Storage refused the entry.
            ServiceNotReadyError: The producer or the topic was closed (see ``publish_many``).
        """
        return (await self.publish_many(producer, ((entry, entry_checksum, info),)))[0]

    async def publish_many(
        self, producer: ProducerHandle, entries: Sequence[Pending]
    ) -> list[tuple[int, int]]:
        """Store entries in order and wake the dispatchers once: the publish path.

        One call and one storage write per ledger for every SEND of a producer that arrived in
        one read. A SEND_RECEIPT goes out only once storage holds the entry (DESIGN.md decision
        8): in bookie mode this awaits the stub, and the managed ledger keeps concurrent
        publishers' runs in order and pipelines the adds. What gets stored, and how it is
        settled, is :meth:`_admit` and :meth:`_settle`, shared with :meth:`publish_many_nowait`.

        Args:
            producer: The publishing producer.
            entries: ``(entry, entry_checksum, info)`` of each SEND, as for ``publish``.

        Returns:
            The ``(ledger_id, entry_id)`` of each stored entry, in order. Fewer than given when
            storage failed after storing some; publishing the rest raises the failure. With
            deduplication on, a duplicate is not stored and gets ``(-1, -1)`` (``dedup``).

        Raises:
            PersistenceError: Storage refused the first entry.
            ServiceNotReadyError: The producer or the topic was closed (unload, fencing, a
                successor producer). Pulsar drops such a SEND without a reply; the client
                re-sends it after re-creating the producer, so nothing may be stored.
        """
        ledger = self._state.ledger
        if ledger.nowait:
            return self.publish_many_nowait(producer, entries)
        run = self._admit(producer, entries)
        try:
            positions = await ledger.append_many(run.sections, run.infos)
        except (StorageError, MetadataStoreError) as exc:
            raise self._refused(run, exc) from exc
        return self._settle(producer, run, positions)

    def publish_many_nowait(
        self, producer: ProducerHandle, entries: Sequence[Pending]
    ) -> list[tuple[int, int]]:
        """:meth:`publish_many` without waiting: the publish hot path of memory mode.

        The handlers call it after each read; storage that cannot answer at once raises
        ``anyio.WouldBlock`` (before anything is admitted) and they await ``publish_many``.

        Raises:
            WouldBlock: Bookie mode.
            PersistenceError: Storage refused the first entry.
            ServiceNotReadyError: The producer or the topic was closed (see ``publish_many``).
        """
        ledger = self._state.ledger
        if not ledger.nowait:
            raise WouldBlock
        run = self._admit(producer, entries)
        try:
            positions = ledger.append_many_nowait(run.sections, run.infos)
        except StorageError as exc:
            raise self._refused(run, exc) from exc
        return self._settle(producer, run, positions)

    def _admit(self, producer: ProducerHandle, entries: Sequence[Pending]) -> _Run:
        """What of a run of SENDs gets stored: nothing from a closed producer, no duplicate."""
        self._check_producer(producer)
        dedup = self._state.dedup
        verdicts = None
        if dedup is not None:
            admission = dedup.admit_all(producer.producer_name, entries)
            entries = admission.fresh
            verdicts = (dedup, admission)
        return _Run(
            entries,
            payload_sections(entries),
            [info for _, _, info in entries],
            verdicts,
            self._state.ledger.current_ledger_id,
        )

    def _refused(self, run: _Run, exc: Exception) -> PersistenceError:
        if run.dedup is not None:
            run.dedup[0].failed()
        return PersistenceError(f"cannot store entry on {self.name}: {exc}")

    def _settle(
        self, producer: ProducerHandle, run: _Run, positions: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """Count what was stored, wake the dispatchers, answer each SEND."""
        state = self._state
        if state.ledger.current_ledger_id != run.ledger_id:
            self.trim_consumed()  # Pulsar trims when a ledger closes
        stored = len(positions)
        messages = sum(map(_NUM_MESSAGES, run.infos[:stored]))
        size = sum(map(len, map(_ENTRY, run.entries[:stored])))
        counters = state.counters
        counters.msg_in += messages
        counters.bytes_in += size
        counters.last_publish_ms = self._clock.wall_ms()
        producer.msg_in += messages
        producer.bytes_in += size
        for sub in self._subs.values():
            sub.dispatcher.notify_new_entries()
        if run.dedup is not None:
            dedup, admission = run.dedup
            return dedup.settle(producer.producer_name, admission, positions)
        return positions

    # ---- trimming -----------------------------------------------------------------------------

    def trim_consumed(self) -> int:
        """Delete the closed ledgers every subscription has consumed, in memory mode.

        Pulsar's ``trimConsumedLedgersInBackground``, run when a ledger closes, when the slowest
        subscription's mark-delete passes the oldest ledger, and when a subscription goes. With
        no subscription every closed ledger goes, as in Pulsar. Without this an in-memory topic
        would keep every entry it was ever sent. (Bookie mode trims as cursors are persisted,
        ``cursor_flush``: the topic is marked for the flusher's next round.) Some topics keep
        everything (:func:`may_trim`).

        Returns:
            How many ledgers were deleted.
        """
        state = self._state
        ledger = state.ledger
        if not ledger.nowait:
            state.changed()  # bookie mode: the flusher's next round trims
            return 0
        if not may_trim(self.name, state, self._retains):
            return 0
        cursors = [*state.cursors.values(), *(sub.cursor for sub in self._subs.values())]
        floor = min((c.mark_delete for c in cursors), default=ledger.count - 1)
        return ledger.trim_nowait(floor)
