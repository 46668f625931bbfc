"""Delivery for one persistent subscription: which entry goes to which consumer, and when.

One dispatcher task per subscription (spec/wire-protocol.md §7): it sleeps on an
``anyio.Event`` that publish, FLOW, acks, redeliveries and membership changes set, then runs a
*round*: a plain synchronous loop that pushes as many entries as permits allow into the
consumers' non-blocking sinks, reading sections from storage in ranges of
``dispatcherMaxReadBatchSize``. There is no ``await`` per message.

Rules of a round, in order:

1. Delayed entries whose ``deliver_at_time`` has passed move to the replay set.
2. The replay set (redeliveries, entries of blocked Key_Shared consumers, released delayed
   entries) is delivered first, in entry order (§7.4).
3. Then new entries from the read position. Acknowledged entries are skipped (they exist after a
   reload or a redelivery); a partly batch-acked entry carries its still-unacked bitmap as
   ``ack_set`` and is charged only those messages (§8.3).

Consumer choice by type: Exclusive and Failover deliver to the single active consumer (Failover:
lowest ``priority_level``, then consumer name; on a partition, index ``partition % consumers``
of that order); Shared goes round-robin over consumers with permits; Key_Shared sends each key to
its selector's consumer, parking entries of consumers without permits in the replay set so other
keys keep flowing. An entry is delivered while its consumer has permits > 0 (a batch may
overshoot) and, for Shared and Key_Shared, fewer than ``maxUnackedMessagesPerConsumer`` unacked
messages.
"""

from __future__ import annotations

import heapq
import logging
from typing import TYPE_CHECKING

import anyio

from emubroker.topics.cursor import words_from_mask
from emubroker.topics.entry import NONE_KEY
from emubroker.topics.keyshared import (
    AutoSplitSelector,
    KeySelector,
    StickySelector,
    sticky_key_hash,
)
from protocol.commands import KeySharedMeta, KeySharedMode, SubType

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from emubroker.topics.consumer import Consumer
    from emubroker.topics.cursor import Cursor
    from emubroker.topics.entry import EntryInfo
    from emubroker.topics.managed_ledger import ManagedLedger
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.stats import TopicCounters
    from protocol.clock import Clock

__all__ = ["Dispatcher"]

logger = logging.getLogger(__name__)

MAX_READS_PER_ROUND = 10
"""Storage reads one round may do before it yields to the event loop and continues in the next
round, so one subscription with a deep backlog cannot starve every other task."""

MAX_REPLAY_ENTRIES = 10_000
"""Key_Shared stops reading new entries while this many are parked for blocked consumers, so a
consumer that never grants permits cannot make the broker buffer the whole topic."""

_SINGLE = (SubType.EXCLUSIVE, SubType.FAILOVER)


class Dispatcher:
    """The delivery engine of one subscription (see the module docstring).

    Args:
        ledger: The topic's entries.
        cursor: The subscription's acknowledgement state.
        partition: The topic's partition index, -1 when not a partition.
        clock: Time for delayed delivery.
        settings: Read batch size, unacked limit, delayed delivery switch, Key_Shared points.
        counters: The topic's counters (messages and bytes out).
        read_position: The index of the first entry to read.
    """

    def __init__(
        self,
        *,
        ledger: ManagedLedger,
        cursor: Cursor,
        partition: int,
        clock: Clock,
        settings: TopicSettings,
        counters: TopicCounters,
        read_position: int,
    ) -> None:
        self._ledger = ledger
        self._cursor = cursor
        self._partition = partition
        self._clock = clock
        self._settings = settings
        self._counters = counters
        self.read_position = read_position
        self.consumers: list[Consumer] = []
        self.sub_type = SubType.EXCLUSIVE
        self.key_shared_mode: KeySharedMode | None = None
        self._selector: KeySelector[Consumer] | None = None
        self._active: Consumer | None = None
        self._rr = 0
        self._pending: dict[int, Consumer] = {}
        self._replay: list[int] = []
        self._replay_set: set[int] = set()
        # Key_Shared parks entries of blocked consumers; rescanning them only pays off after
        # something that can unblock one (permits, acks, membership, new replays), not after
        # every publish.
        self._replay_dirty = False
        self._delayed: list[tuple[int, int]] = []  # (deliver_at_time ms, index)
        self._wake = anyio.Event()
        self._scope = anyio.CancelScope()
        self._closed = False

    # ---- membership ---------------------------------------------------------------------------

    def configure(self, sub_type: SubType, key_shared_meta: KeySharedMeta | None) -> None:
        """Set the subscription type; only while no consumer is attached."""
        assert not self.consumers, "the type of a subscription with consumers cannot change"
        self.sub_type = sub_type
        self._active = None
        self._selector = None
        self.key_shared_mode = None
        if sub_type is SubType.KEY_SHARED:
            meta = key_shared_meta or KeySharedMeta(key_shared_mode=KeySharedMode.AUTO_SPLIT)
            self.key_shared_mode = meta.key_shared_mode
            if meta.key_shared_mode is KeySharedMode.STICKY:
                self._selector = StickySelector()
            else:
                self._selector = AutoSplitSelector(self._settings.key_shared_hash_points)
        if sub_type in _SINGLE:
            # Delayed delivery applies to Shared and Key_Shared only: hand them over now.
            while self._delayed:
                self._push_replay(heapq.heappop(self._delayed)[1])

    def add_consumer(self, consumer: Consumer, key_shared_meta: KeySharedMeta | None) -> None:
        """Attach a consumer.

        Raises:
            ConsumerAssignError: Its Key_Shared STICKY ranges overlap taken ones.
        """
        if self._selector is not None:
            ranges = key_shared_meta.hash_ranges if key_shared_meta is not None else ()
            self._selector.add(consumer, consumer.name, ranges)
        self.consumers.append(consumer)
        self._update_active(joined=consumer)
        self.wake()

    def remove_consumer(self, consumer: Consumer, *, redeliver: bool = True) -> None:
        """Detach a consumer; with ``redeliver`` its unacked entries go back for redelivery."""
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        if self._selector is not None:
            self._selector.remove(consumer)
        if redeliver:
            self._release(consumer, count=True)
        else:
            self._forget(consumer)
        self._update_active()
        self.wake()

    def _pick_active(self) -> Consumer | None:
        if not self.consumers:
            return None
        if self.sub_type is SubType.EXCLUSIVE:
            return self.consumers[0]
        ordered = sorted(self.consumers, key=lambda c: (c.priority_level, c.name))
        if self._partition >= 0:
            return ordered[self._partition % len(ordered)]
        return ordered[0]

    def _update_active(self, joined: Consumer | None = None) -> None:
        if self.sub_type not in _SINGLE:
            return
        active = self._pick_active()
        failover = self.sub_type is SubType.FAILOVER
        if active is not self._active:
            old, self._active = self._active, active
            if old is not None and old in self.consumers:
                # Failover switch: what the old active holds unacked goes to the new one, as
                # Pulsar rewinds the cursor on an active-consumer change (not a redelivery).
                self._release(old, count=False)
            if failover:
                for c in self.consumers:
                    c.sink.active_consumer_change(c.consumer_id, c is active)
        elif failover and joined is not None:
            joined.sink.active_consumer_change(joined.consumer_id, joined is active)

    # ---- acknowledgements, redelivery, seek ---------------------------------------------------

    def acked(self, index: int) -> None:
        """An entry became fully acknowledged: it is no longer pending on any consumer."""
        consumer = self._pending.pop(index, None)
        if consumer is not None:
            consumer.unacked -= consumer.pending.pop(index, 0)

    def acked_up_to(self, index: int) -> None:
        """Everything up to ``index`` was acknowledged (cumulative ack)."""
        for i in [i for i in self._pending if i <= index]:
            self.acked(i)

    def redeliver(self, consumer: Consumer, indexes: list[int] | None) -> None:
        """Move entries pending on ``consumer`` (all of them for None) back for redelivery."""
        if indexes is None:
            self._release(consumer, count=True)
        else:
            counts = self._cursor.redelivery_counts
            for index in indexes:
                charged = consumer.pending.pop(index, None)
                if charged is None:
                    continue  # not (or no longer) delivered to this consumer
                del self._pending[index]
                consumer.unacked -= charged
                counts[index] = counts.get(index, 0) + 1
                self._push_replay(index)
        self._wake.set()

    def reset(self, read_position: int) -> None:
        """Seek: forget every delivery and restart reading at ``read_position``."""
        for consumer in self.consumers:
            self._forget(consumer)
        self._pending.clear()
        self._replay.clear()
        self._replay_set.clear()
        self._delayed.clear()
        self.read_position = read_position
        self._wake.set()

    def release_all(self) -> None:
        """Unload: every unacked delivery becomes a redelivery (redelivery_count + 1, §9)."""
        for consumer in self.consumers:
            self._release(consumer, count=True)

    def _release(self, consumer: Consumer, *, count: bool) -> None:
        counts = self._cursor.redelivery_counts
        for index in consumer.pending:
            del self._pending[index]
            if count:
                counts[index] = counts.get(index, 0) + 1
            self._push_replay(index)
        consumer.pending.clear()
        consumer.unacked = 0

    def _forget(self, consumer: Consumer) -> None:
        for index in consumer.pending:
            self._pending.pop(index, None)
        consumer.pending.clear()
        consumer.unacked = 0

    def _push_replay(self, index: int) -> None:
        self._replay_dirty = True
        if index not in self._replay_set:
            self._replay_set.add(index)
            heapq.heappush(self._replay, index)

    # ---- the task -----------------------------------------------------------------------------

    def wake(self) -> None:
        """Ask for a dispatch round after a change that may unblock consumers."""
        self._replay_dirty = True
        self._wake.set()

    def notify_new_entries(self) -> None:
        """Ask for a dispatch round because entries were appended (the publish path)."""
        self._wake.set()

    def close(self) -> None:
        """Stop the task (also before it started: ``run`` checks the flag first)."""
        self._closed = True
        self._scope.cancel()
        self._wake.set()

    @property
    def pending_count(self) -> int:
        """Entries delivered and not yet acknowledged."""
        return len(self._pending)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Dispatch rounds until closed; one per wake-up or due delayed entry."""
        with self._scope:
            task_status.started()
            while not self._closed:
                await self._wait()
                self._wake = anyio.Event()
                try:
                    self.dispatch()
                except Exception:
                    # A bug in one subscription must not take the broker's task group down.
                    logger.exception("dispatch round failed; consumers: %s", self.consumers)

    async def _wait(self) -> None:
        if not self._delayed or not self.consumers:
            await self._wake.wait()
            return
        wait_ms = self._delayed[0][0] - self._clock.wall_ns() // 1_000_000
        deadline = self._clock.now() + max(wait_ms, 0) / 1000
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._sleep_then_cancel, deadline, tg.cancel_scope)
            await self._wake.wait()
            tg.cancel_scope.cancel()

    async def _sleep_then_cancel(self, deadline: float, scope: anyio.CancelScope) -> None:
        await self._clock.sleep_until(deadline)
        scope.cancel()

    # ---- a round ------------------------------------------------------------------------------

    def dispatch(self) -> None:
        """Run one dispatch round (see the module docstring)."""
        if not self.consumers or self._closed:
            return
        if self._delayed:
            now_ms = self._clock.wall_ns() // 1_000_000
            while self._delayed and self._delayed[0][0] <= now_ms:
                self._push_replay(heapq.heappop(self._delayed)[1])
        if self._replay and (self._replay_dirty or self._selector is None):
            self._replay_dirty = False
            if not self._dispatch_replay():
                return
        self._dispatch_new()

    def _has_capacity(self) -> bool:
        if self.sub_type in _SINGLE:
            return self._active is not None and self._active.permits > 0
        limit = self._settings.max_unacked_messages_per_consumer
        return any(c.permits > 0 and (limit <= 0 or c.unacked < limit) for c in self.consumers)

    def _select(self, info: EntryInfo) -> Consumer | None:
        sub_type = self.sub_type
        if sub_type in _SINGLE:
            active = self._active
            return active if active is not None and active.permits > 0 else None
        limit = self._settings.max_unacked_messages_per_consumer
        if self._selector is not None:
            chosen = self._selector.select(sticky_key_hash(info.key or NONE_KEY))
            if chosen is None or chosen.permits <= 0 or 0 < limit <= chosen.unacked:
                return None
            return chosen
        consumers = self.consumers
        n = len(consumers)
        for k in range(n):
            c = consumers[(self._rr + k) % n]
            if c.permits > 0 and (limit <= 0 or c.unacked < limit):
                self._rr = (self._rr + k + 1) % n
                return c
        return None

    def _dispatch_replay(self) -> bool:
        """Deliver parked entries in order; True if new entries may be read afterwards."""
        replay = self._replay
        cursor = self._cursor
        infos = self._ledger.infos
        key_shared = self._selector is not None
        parked: list[int] = []
        while replay:
            index = replay[0]
            if cursor.is_acked(index) or index in self._pending:
                heapq.heappop(replay)
                self._replay_set.discard(index)
                continue
            info = infos[index]
            consumer = self._select(info)
            if consumer is None:
                if key_shared and self._has_capacity():
                    parked.append(heapq.heappop(replay))  # its consumer is blocked, others not
                    continue
                break
            heapq.heappop(replay)
            self._replay_set.discard(index)
            ledger_id, entry_id, sections = self._ledger.read(index, index)
            self._send(consumer, index, ledger_id, entry_id, info, sections[0])
        for index in parked:
            heapq.heappush(replay, index)
        return key_shared or not replay

    def _dispatch_new(self) -> None:
        ledger = self._ledger
        cursor = self._cursor
        infos = ledger.infos
        end = ledger.count
        batch = max(1, self._settings.dispatcher_max_read_batch_size)
        key_shared = self._selector is not None
        delayed = self._settings.delayed_delivery_enabled and self.sub_type not in _SINGLE
        now_ms = self._clock.wall_ns() // 1_000_000 if delayed else 0
        reads = 0
        while self.read_position < end:
            if not self._has_capacity():
                return
            if key_shared and len(self._replay_set) >= MAX_REPLAY_ENTRIES:
                return
            if reads == MAX_READS_PER_ROUND:
                self._wake.set()  # more to do: continue in the next round, after a yield
                return
            reads += 1
            first = self.read_position
            ledger_id, first_entry, sections = ledger.read(first, min(end, first + batch) - 1)
            for offset, section in enumerate(sections):
                index = first + offset
                if cursor.is_acked(index):
                    continue
                info = infos[index]
                at = info.deliver_at_time
                if delayed and at is not None and at > now_ms:
                    heapq.heappush(self._delayed, (at, index))
                    continue
                consumer = self._select(info)
                if consumer is None:
                    if key_shared and self._has_capacity():
                        self._push_replay(index)
                        continue
                    self.read_position = index
                    return
                self._send(consumer, index, ledger_id, first_entry + offset, info, section)
            self.read_position = first + len(sections)

    def _send(
        self,
        consumer: Consumer,
        index: int,
        ledger_id: int,
        entry_id: int,
        info: EntryInfo,
        section: bytes,
    ) -> None:
        cursor = self._cursor
        mask = cursor.partial.get(index) if cursor.partial else None
        if mask is None:
            charged = info.num_messages
            ack_set: tuple[int, ...] = ()
        else:
            charged = mask.bit_count()
            ack_set = words_from_mask(mask, info.num_messages)
        consumer.permits -= charged
        consumer.unacked += charged
        consumer.pending[index] = charged
        self._pending[index] = consumer
        counts = cursor.redelivery_counts
        consumer.sink.send_message(
            consumer.consumer_id,
            ledger_id,
            entry_id,
            self._partition,
            counts.get(index, 0) if counts else 0,
            ack_set,
            section,
        )
        counters = self._counters
        counters.msg_out += charged
        counters.bytes_out += len(section)
