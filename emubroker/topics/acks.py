"""A subscription's acknowledgement state, and its one owner: cursor, pending set, redeliveries.

:class:`Acknowledgements` owns, for one loaded subscription:

* the **cursor** (``cursor.Cursor``): what is acknowledged, mark-delete position, individually
  acknowledged entries and partly acknowledged batches. It is the durable part, kept by the
  topic service across unloads and persisted by ``cursor_flush``; everyone may read it, and only
  this module changes it;
* the **pending set**: every entry delivered to a consumer and not yet acknowledged, with the
  messages it was charged (``Consumer.pending``, its ``unacked`` sum, and whether that sum holds
  the consumer *blocked* by ``maxUnackedMessagesPerConsumer``, ``selection`` rule 3);
* the **redelivery counts**: how often an entry went back for redelivery (spec §7.2). As in
  Pulsar they live with the loaded subscription, not the cursor: a reloaded topic, a seek and
  the last consumer leaving start them over.

Every change goes through an operation here, and the ones that acknowledge return an
:class:`AckChange` that says what changed, so that callers decide what follows (a dispatch
round, a trim, stats) without looking inside. Who decides what to acknowledge stays outside:
an ACK names ids; message expiry (``expiry``) finds an index; compaction (``compacted``) gives
the entries and batch masks it removed. Rules (spec §7.2, §7.3):

1. Acks apply to the subscription whichever consumer sends them; ids that name no entry of the
   topic (a reader's cumulative ack of entry -1, ids from another ledger) are no-ops.
2. A batch-index ack (``ack_set`` on a batched entry) intersects the entry's still-unacked mask;
   the entry is acknowledged when the mask empties. A cumulative ack with an ``ack_set`` covers
   the entries before it and acknowledges inside its batch. Without batch-index acks
   (``acknowledgmentAtBatchIndexLevelEnabled=false``, Pulsar 4.0's default) the cursor keeps no
   masks, as Pulsar's ``ManagedCursorImpl`` without ``batchDeletedIndexes``: an individual ack
   with an ``ack_set`` changes nothing, a cumulative one covers the entries before its batch
   only, so a partly acknowledged batch is delivered again whole.
3. An entry that becomes fully acknowledged is no longer pending on any consumer: its charged
   messages are *settled*, which may unblock the consumer holding it (down to half the limit).
4. Taking deliveries back (a consumer leaves, loses the Failover active role, asks for
   redelivery, the topic unloads) returns the entries to deliver again; only a redelivery
   request of a type that ``counts_redeliveries`` counts them.
"""

from __future__ import annotations

import sys
from itertools import repeat
from typing import TYPE_CHECKING, NamedTuple

from emubroker.topics.cursor import mask_from_words, words_from_mask
from protocol.ids import WholeEntryIds

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from emubroker.topics.consumer import Consumer
    from emubroker.topics.cursor import Cursor
    from emubroker.topics.managed_ledger import ManagedLedger
    from protocol.commands import MessageIdData

__all__ = ["AckChange", "Acknowledgements"]


_MAX_ENTRY_ID = (1 << 63) - 1


class AckChange(NamedTuple):
    """What one acknowledging operation changed.

    Attributes:
        moved: The mark-delete position moved.
        entries: Entries that became fully acknowledged (the backlog went down by this much).
        settled: Messages of pending deliveries it settled (the acking consumer's
            ``messageAckRate`` counts them).
        unblocked: A consumer blocked on unacked messages may take more now (rule 3).
    """

    moved: bool
    entries: int
    settled: int
    unblocked: bool


class Acknowledgements:
    """The acknowledgement state of one loaded subscription (see the module docstring).

    Args:
        cursor: Its cursor (a durable subscription's outlives this object).
        ledger: The topic's entries (ids to indexes, batch sizes, the backlog's end).
        batch_index: Acknowledge inside batches (rule 2).
    """

    __slots__ = (
        "_batch_index",
        "_block_at",
        "_counts",
        "_ledger",
        "_pending",
        "_settled",
        "_unblock_at",
        "_unblocked",
        "cursor",
    )

    def __init__(self, cursor: Cursor, ledger: ManagedLedger, *, batch_index: bool = True) -> None:
        self.cursor = cursor
        self._batch_index = batch_index
        self._ledger = ledger
        self._pending: dict[int, Consumer] = {}  # index -> the consumer it is pending on
        self._counts: dict[int, int] = {}  # index -> redeliveries
        self._block_at = sys.maxsize
        self._unblock_at = 0
        self._settled = 0  # what the running operation settled (``_change`` reports it)
        self._unblocked = False

    def limit_unacked(self, block_at: int, unblock_at: int) -> None:
        """Set the unacked marks of the subscription's type (``ConsumerSet.block_at``)."""
        self._block_at = block_at
        self._unblock_at = unblock_at

    # ---- queries ------------------------------------------------------------------------------

    def backlog(self) -> int:
        """Entries of the topic not fully acknowledged."""
        return self.cursor.backlog(self._ledger.count)

    def needs_delivery(self, index: int) -> bool:
        """Neither acknowledged nor delivered and pending: an entry to (re)deliver."""
        return index not in self._pending and not self.cursor.is_acked(index)

    # ---- deliveries (the pending set) ---------------------------------------------------------

    def deliver(
        self, consumer: Consumer, index: int, num_messages: int
    ) -> tuple[int, tuple[int, ...], int]:
        """Record that ``index`` goes to ``consumer`` now (the dispatch hot path).

        A partly acknowledged batch is charged only its still-unacked messages, and carries
        their mask as ``ack_set`` (§8.3). The consumer blocks once its unacked messages reach
        the limit (Pulsar blocks once a send reaches it).

        Returns:
            ``(messages charged, ack_set words, redelivery count)`` for the MESSAGE.
        """
        partial = self.cursor.partial  # the owner reads it in place: once per delivery
        mask = partial.get(index) if partial else None
        if mask is None:
            charged = num_messages
            ack_set: tuple[int, ...] = ()
        else:
            charged = mask.bit_count()
            ack_set = words_from_mask(mask, num_messages)
        unacked = consumer.unacked = consumer.unacked + charged
        if unacked >= self._block_at:
            consumer.blocked = True
        consumer.pending[index] = charged
        self._pending[index] = consumer
        counts = self._counts
        return charged, ack_set, counts.get(index, 0) if counts else 0

    @property
    def plain(self) -> bool:
        """No partly acknowledged batch and no redelivery count: ``deliver_run`` may be used."""
        return not self.cursor.partial and not self._counts

    def deliver_run(self, consumer: Consumer, first: int, charges: list[int]) -> None:
        """``deliver`` of entries ``first``, ``first + 1``, ... to ``consumer``, at once.

        The dispatch hot path for a run of new entries to one consumer, when :attr:`plain`:
        each entry is charged its messages (``charges``), with no ack set and no redelivery
        count, as ``deliver`` would. The consumer blocks if the run reaches the limit.
        """
        indexes = range(first, first + len(charges))
        consumer.pending.update(zip(indexes, charges, strict=True))
        self._pending.update(zip(indexes, repeat(consumer)))
        unacked = consumer.unacked = consumer.unacked + sum(charges)
        if unacked >= self._block_at:
            consumer.blocked = True

    def release(self, consumer: Consumer, *, count: bool = False) -> list[int]:
        """Take back every delivery pending on ``consumer`` (rule 4).

        Returns:
            The entries to deliver again.
        """
        indexes = list(consumer.pending)
        pending, counts = self._pending, self._counts
        for index in indexes:
            del pending[index]
            if count:
                counts[index] = counts.get(index, 0) + 1
        consumer.pending.clear()
        consumer.unacked = 0
        consumer.blocked = False
        return indexes

    def redeliver(
        self, consumer: Consumer, indexes: Iterable[int] | None, *, count: bool
    ) -> list[int]:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: take back ``indexes`` (all for None) (rule 4).

        Asking unblocks the consumer, as in Pulsar; indexes not pending on it are skipped.

        Returns:
            The entries to deliver again.
        """
        consumer.blocked = False
        if indexes is None:
            return self.release(consumer, count=count)
        back: list[int] = []
        counts = self._counts
        for index in indexes:
            charged = consumer.pending.pop(index, None)
            if charged is None:
                continue  # not (or no longer) delivered to this consumer
            del self._pending[index]
            consumer.unacked -= charged
            if count:
                counts[index] = counts.get(index, 0) + 1
            back.append(index)
        return back

    def forget(self, consumer: Consumer) -> None:
        """Drop ``consumer``'s deliveries without delivering them again (it is closed for good)."""
        pending = self._pending
        for index in consumer.pending:
            pending.pop(index, None)
        consumer.pending.clear()
        consumer.unacked = 0
        consumer.blocked = False

    def forget_redeliveries(self) -> None:
        """Start redelivery counts over (the last consumer left; the topic unloads)."""
        self._counts.clear()

    # ---- acknowledgements ---------------------------------------------------------------------

    def ack_individual(self, ids: Sequence[MessageIdData]) -> AckChange:
        """An individual ACK (rules 1-3): the hot path, one pass over the cursor.

        The client groups up to 1000 ids per ACK: whole entries are acknowledged in one call,
        and ids the wire gave as ``WholeEntryIds`` are turned into indexes without a record each.
        """
        cursor = self.cursor
        mark_delete = cursor.mark_delete
        if type(ids) is WholeEntryIds:
            done = cursor.ack_many(self._indexes(ids.ledger_id, ids.entry_ids))
            self._settle(done)
            return self._change(cursor.mark_delete != mark_delete, len(done))
        ledger = self._ledger
        infos, base = ledger.infos, ledger.base  # index_of names no trimmed entry
        index_of = ledger.index_of
        whole: list[int] = []
        done = []
        for mid in ids:
            index = index_of(mid.ledger_id, mid.entry_id)
            if index is None:
                continue
            if mid.ack_set and infos[index - base].batched:
                if not self._batch_index:
                    continue  # rule 2: no masks kept
                size = infos[index - base].num_messages
                if cursor.ack_batch(index, mask_from_words(mid.ack_set, size), size):
                    done.append(index)
            else:
                whole.append(index)
        if whole:
            done += cursor.ack_many(whole)
        self._settle(done)
        return self._change(cursor.mark_delete != mark_delete, len(done))

    def _indexes(self, ledger_id: int, entry_ids: list[int]) -> list[int]:
        """``ManagedLedger.index_of`` of each entry of one ledger, leaving out those it names not.

        The ledger's entries are the indexes ``first .. end - 1`` (none when ``index_of`` does
        not know its entry 0: another topic's ledger, a trimmed or an empty one).
        """
        ledger = self._ledger
        first = ledger.index_of(ledger_id, 0)
        if first is None:
            return []
        span = ledger.index_at_or_after(ledger_id, _MAX_ENTRY_ID) - first
        return [first + entry_id for entry_id in entry_ids if 0 <= entry_id < span]

    def ack_cumulative(self, ids: Sequence[MessageIdData]) -> AckChange:
        """A cumulative ACK (rules 1-3): everything up to each id."""
        cursor = self.cursor
        ledger = self._ledger
        mark_delete, backlog = cursor.mark_delete, self.backlog()
        for mid in ids:
            index = ledger.index_of(mid.ledger_id, mid.entry_id)
            if index is None:
                continue
            info = ledger.info(index)
            size = info.num_messages
            partial = bool(mid.ack_set) and info.batched
            upto = index - 1 if partial else index
            if upto >= 0:
                self._up_to(upto)
            if (
                partial
                and self._batch_index
                and cursor.ack_batch(index, mask_from_words(mid.ack_set, size), size)
            ):
                self._settle((index,))
        return self._change(cursor.mark_delete != mark_delete, backlog - self.backlog())

    def expire_to(self, index: int) -> AckChange:
        """Mark-delete up to ``index``, as message expiry does (``expiry`` rule 4)."""
        backlog = self.backlog()
        moved = self._up_to(index)
        return self._change(moved, backlog - self.backlog())

    def skip(self, count: int | None) -> AckChange:
        """Acknowledge the next ``count`` unacknowledged entries; all of them for None (REST)."""
        cursor, end = self.cursor, self._ledger.count
        mark_delete, backlog = cursor.mark_delete, self.backlog()
        if count is None:
            if end:
                self._up_to(end - 1)
        elif count > 0:
            # Acknowledging the first ``count`` unacknowledged entries is acknowledging
            # everything up to the last of them, found without a walk through the backlog (the
            # admin API passes any count).
            last = cursor.nth_unacked(count, end)
            self._up_to(end - 1 if last is None else last)
        return self._change(cursor.mark_delete != mark_delete, backlog - self.backlog())

    def apply_compaction(self, dropped: Iterable[int], survivors: Mapping[int, int]) -> AckChange:
        """Acknowledge what compaction removed (``compacted`` rule 3).

        Args:
            dropped: Entries whose every message was compacted out.
            survivors: Batch entry -> mask of its surviving messages, for batches only partly
                compacted out.
        """
        cursor = self.cursor
        info = self._ledger.info
        floor = cursor.mark_delete
        done = [index for index in dropped if index > floor and cursor.ack(index)]
        for index, mask in survivors.items():
            if index > floor and cursor.ack_batch(index, mask, info(index).num_messages):
                done.append(index)
        self._settle(done)
        return self._change(cursor.mark_delete != floor, len(done))

    def reset(self, index: int) -> None:
        """Seek: the next entry to deliver becomes ``index``; every ack and delivery is forgotten.

        The consumers' deliveries are dropped (they are all closed by the seek, §7.5).
        """
        self.cursor.reset(index)
        for consumer in set(self._pending.values()):
            self.forget(consumer)
        self._pending.clear()
        self._counts.clear()

    # ---- settling -----------------------------------------------------------------------------

    def _up_to(self, index: int) -> bool:
        """Cumulatively acknowledge up to ``index`` and settle what that covered.

        Returns:
            Whether the mark-delete position moved.
        """
        if not self.cursor.ack_cumulative(index):
            return False
        if self._counts:
            self._counts = {i: n for i, n in self._counts.items() if i > index}
        self._settle([i for i in self._pending if i <= index])
        return True

    def _settle(self, indexes: Iterable[int]) -> None:
        """Entries became fully acknowledged: settle their deliveries (rule 3).

        What they settle adds up until :meth:`_change` reports it.
        """
        indexes = list(indexes)
        counts = self._counts
        if counts:
            for index in indexes:
                counts.pop(index, None)
        holders = list(map(self._pending.pop, indexes, repeat(None)))
        if not holders:
            return
        consumer = holders[0]
        if consumer is not None and holders.count(consumer) == len(holders):
            # All pending on one consumer (the usual ACK): its unacked count only goes down, so
            # unblocking is decided once, at the end, as after each entry.
            settled = sum(map(consumer.pending.pop, indexes, repeat(0)))
            consumer.unacked -= settled
            self._unblock(consumer)
            self._settled += settled
            return
        settled = 0
        for index, holder in zip(indexes, holders, strict=True):
            if holder is not None:
                charged = holder.pending.pop(index, 0)
                holder.unacked -= charged
                settled += charged
                self._unblock(holder)
        self._settled += settled

    def _unblock(self, consumer: Consumer) -> None:
        if consumer.blocked and consumer.unacked <= self._unblock_at:
            consumer.blocked = False
            self._unblocked = True

    def _change(self, moved: bool, entries: int) -> AckChange:
        """The operation's :class:`AckChange`; the next one starts from nothing settled."""
        change = AckChange(moved, entries, self._settled, self._unblocked)
        self._settled = 0
        self._unblocked = False
        return change
