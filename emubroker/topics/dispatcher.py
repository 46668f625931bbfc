"""Delivery for one persistent subscription: which entry goes to which consumer, and when.

One dispatcher task per subscription (spec/wire-protocol.md §7): it sleeps on an
``anyio.Event`` that publish, FLOW, acks, redeliveries and membership changes set (those that
leave the round nothing to do set nothing: ``Dispatcher.wake``), then runs a *round*: a plain
synchronous loop that pushes as many entries as permits allow into the consumers' non-blocking
sinks, reading sections from storage in ranges of ``dispatcherMaxReadBatchSize``. There is no
``await`` per message.

Rules of a round, in order:

1. Delayed entries whose ``deliver_at_time`` has passed move to the replay set.
2. The replay set (redeliveries, entries of blocked Key_Shared consumers, released delayed
   entries) is delivered first, in entry order (§7.4).
3. Then new entries from the read position. Acknowledged entries are skipped (they exist after a
   reload or a redelivery); a partly batch-acked entry carries its still-unacked bitmap as
   ``ack_set`` and is charged only those messages (§8.3).

Which consumer gets an entry is decided by ``selection.ConsumerSet`` (per-type rules). Key_Shared
parks the entries of consumers without room in the replay set so that other keys keep flowing,
and also those of *draining* hashes (``draining``): keys that moved to a joining consumer while
an older one still holds some of their entries unacked wait in the replay set until those are
acked or released.

Throttled reads (spec/pulsar-behaviour.md §1.2), as Pulsar's persistent dispatchers do:

* A read the limiters refuse schedules **one** retry 1000 ms later (``reScheduleRead`` guarded by
  ``isRescheduleReadInProgress``); a refusal while a retry is scheduled leaves it where it is.
  The retry round clears it first, so its own refusal schedules the next one.
* While refused, no read is outstanding: a publish wakes nobody. A FLOW (or a consumer joining,
  a redelivery) runs a round, which asks the limiters again (a refusal counts a throttle event)
  and reads if they allow it. An ACK runs nothing, unless it unblocked a consumer held by the
  unacked limit (that returns its permits, a FLOW in Pulsar).
"""

from __future__ import annotations

import heapq
import logging
from operator import attrgetter
from typing import TYPE_CHECKING

import anyio

from emubroker.topics.draining import DrainingHashes
from emubroker.topics.managed_ledger import CacheMiss
from emubroker.topics.pickers import key_hash
from emubroker.topics.throttling import CURSOR_BACKLOGGED_THRESHOLD
from storage_stub.client import StorageError

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from emubroker.topics.acks import Acknowledgements
    from emubroker.topics.consumer import Consumer
    from emubroker.topics.entry import EntryInfo
    from emubroker.topics.managed_ledger import ManagedLedger
    from emubroker.topics.selection import ConsumerSet
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.stats import TopicCounters
    from emubroker.topics.subscription_throttle import SubscriptionThrottle
    from protocol.clock import Clock
    from protocol.commands import KeySharedMeta, SubType

__all__ = ["Dispatcher"]

logger = logging.getLogger(__name__)

MAX_READS_PER_ROUND = 10
"""Storage reads one round may do before it yields to the event loop and continues in the next
round, so one subscription with a deep backlog cannot starve every other task."""

_NUM_MESSAGES = attrgetter("num_messages")

MAX_REPLAY_ENTRIES = 10_000
"""Key_Shared stops reading new entries while this many are parked for blocked consumers, so a
consumer that never grants permits cannot make the broker buffer the whole topic."""


class Dispatcher:
    """The delivery engine of one subscription (see the module docstring).

    Args:
        ledger: The topic's entries.
        members: The subscription's consumers and the rules of its type (``selection``).
        acks: The subscription's acknowledgement state (its owner: every delivery, ack and
            redelivery is recorded there).
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
        members: ConsumerSet[Consumer],
        acks: Acknowledgements,
        partition: int,
        clock: Clock,
        settings: TopicSettings,
        counters: TopicCounters,
        read_position: int,
    ) -> None:
        self._ledger = ledger
        self._acks = acks
        self._partition = partition
        self._clock = clock
        self._settings = settings
        self._counters = counters
        # This subscription's own share of the topic's out counters (admin stats, metrics).
        self.msg_out = 0
        self.bytes_out = 0
        self.entries_out = 0
        self._round_ms = 0  # epoch ms of the current round: its consumers' lastConsumedTimestamp
        self.read_position = read_position
        # Dispatch throttling (``throttling``; set by the topic): None or inactive = the plain
        # path below, untouched. See "Throttled reads" in the module docstring.
        self.throttle: SubscriptionThrottle | None = None
        self._retry_at: float | None = None  # the scheduled retry of a refused read
        self._limited = False  # the last round stopped at a limiter: no read is outstanding
        self._unblocked = False  # an ack unblocked a consumer held by the unacked limit
        self._members = members
        # Key_Shared AUTO_SPLIT: hashes that moved away from a consumer still holding some of
        # their entries; filled when a consumer joins, emptied as those entries go.
        self._draining: DrainingHashes[Consumer] = DrainingHashes()
        self._replay: list[int] = []
        self._replay_set: set[int] = set()
        # Key_Shared parks entries of blocked consumers; rescanning them only pays off after
        # something that can unblock one (permits, acks, membership, new replays), not after
        # every publish.
        self._replay_dirty = False
        self._delayed: list[tuple[int, int]] = []  # (deliver_at_time ms, index)
        self._wake = anyio.Event()
        self._requested = False  # a round was asked for (not only a new deadline to sleep until)
        self._scope = anyio.CancelScope()
        self._closed = False

    # ---- membership ---------------------------------------------------------------------------

    def check_join(
        self, subscription: str, sub_type: SubType, key_shared_meta: KeySharedMeta | None
    ) -> None:
        """Refuse a consumer the current ones exclude, else (re)set the type if it is alone.

        Raises:
            ConsumerBusyError: A second Exclusive consumer, or another type or Key_Shared mode.
        """
        self._members.check_join(subscription, sub_type, key_shared_meta)
        if not self._members.rules.delayed_delivery:
            # This type delivers delayed messages at once: hand them over now.
            while self._delayed:
                self._push_replay(heapq.heappop(self._delayed)[1])

    def add_consumer(self, consumer: Consumer, key_shared_meta: KeySharedMeta | None) -> None:
        """Attach a consumer.

        Raises:
            ConsumerAssignError: Its Key_Shared STICKY ranges overlap taken ones.
        """
        members = self._members
        self._demoted(members.add(consumer, key_shared_meta))
        # The subscription's type is fixed while it has consumers: so are these (``selection``).
        self._acks.limit_unacked(members.block_at, members.unblock_at)
        picker = members.picker
        if picker.drains_hashes:
            info = self._ledger.info
            self._draining.reassign(
                members.consumers, picker.owner, lambda index: key_hash(info(index))
            )
        self.wake()

    def remove_consumer(self, consumer: Consumer, *, redeliver: bool = True) -> None:
        """Detach a consumer; with ``redeliver`` its unacked entries go back for redelivery.

        As in Pulsar, a replay after a consumer left is not a redelivery request: counts stay.
        The last consumer leaving forgets them all (``clearComponentsAfterRemovedAllConsumers``).
        """
        if consumer not in self._members.consumers:
            return
        if redeliver:
            self._replay_all(self._acks.release(consumer))
        else:
            self._acks.forget(consumer)
        self._demoted(self._members.remove(consumer))
        if not self._members.consumers:
            self._acks.forget_redeliveries()
        self.wake()

    def _demoted(self, old_active: Consumer | None) -> None:
        if old_active is not None:
            # Failover switch: what the old active holds unacked goes to the new one, as Pulsar
            # rewinds the cursor on an active-consumer change (not a redelivery).
            self._replay_all(self._acks.release(old_active))

    # ---- acknowledgements, redelivery, seek ---------------------------------------------------

    def redeliver(self, consumer: Consumer, indexes: list[int] | None) -> None:
        """Move entries pending on ``consumer`` (all of them for None) back for redelivery.

        Only the types that count redeliveries do (``subtypes``): Pulsar's single-active-consumer
        dispatcher has its redelivery tracker disabled, so Exclusive and Failover consumers
        always see ``redelivery_count`` 0.
        """
        count = self._members.rules.counts_redeliveries
        self._replay_all(self._acks.redeliver(consumer, indexes, count=count))
        self._request()

    def reset(self, read_position: int) -> None:
        """Seek: forget what waits for delivery and restart reading at ``read_position``.

        The acknowledgement state was reset first (``Acknowledgements.reset``).
        """
        self._draining.clear()
        self._replay.clear()
        self._replay_set.clear()
        self._delayed.clear()
        self.read_position = read_position
        self._request()

    def release_all(self) -> None:
        """Unload: every unacked delivery goes back to be delivered again by the next owner.

        Redelivery counts live in the dispatcher in Pulsar, so a reloaded topic starts them
        from 0.
        """
        for consumer in self._members.consumers:
            self._replay_all(self._acks.release(consumer))
        self._acks.forget_redeliveries()

    def _replay_all(self, indexes: list[int]) -> None:
        for index in indexes:
            self._push_replay(index)

    def _push_replay(self, index: int, *, dirty: bool = True) -> None:
        if dirty:
            self._replay_dirty = True
        if index not in self._replay_set:
            self._replay_set.add(index)
            heapq.heappush(self._replay, index)

    # ---- the task -----------------------------------------------------------------------------

    def wake(self) -> None:
        """Ask for a dispatch round (FLOW, a consumer joining or leaving, a redelivery, a seek).

        These are the events that start a read in Pulsar. While a throttled read waits for its
        retry the round runs too, as Pulsar's ``readMoreEntries`` does: it asks the limiters
        again (a refusal counts as a throttle event) and reads if they allow it, but never
        moves the scheduled retry.

        A round that would find nothing to do is not asked for: every entry read and sent,
        nothing parked for replay or delayed, no throttling, no retry scheduled. Then the
        round would send nothing, and change nothing the task waits on (its deadlines come
        from a retry or delayed entries); a publish dispatches new entries itself
        (``notify_new_entries``). This is the usual FLOW and ACK of a consumer that keeps up
        (one per ~3 entries of a batched producer): without it each cost a task step.
        """
        self._replay_dirty = True
        if (
            self.read_position >= self._ledger.count
            and not self._replay
            and not self._delayed
            and self._retry_at is None
            and not self._limited
            and (self.throttle is None or not self.throttle.active)
        ):
            return
        self._request()

    def acks_applied(self, unblocked: bool) -> None:
        """An ACK was applied; ``unblocked``: it unblocked a consumer held by the unacked limit.

        A round runs only where it may start a read.

        Pulsar's dispatchers start no read on an ACK, except through a consumer the ack
        unblocked from the unacked limit (``flowConsumerBlockedPermits``: a FLOW), and
        Key_Shared's rescan of parked entries, which waits behind a throttling retry
        (``reScheduleReadInMs`` shares the ``isRescheduleReadInProgress`` guard). So while a
        throttled read waits for its retry only an unblocking ack runs a round; otherwise a
        round here finds nothing to read that it would not read on the next event anyway.
        """
        unblocked = unblocked or self._unblocked
        self._unblocked = False
        if self._limited and not unblocked:
            self._replay_dirty = True  # the retry rescans the parked entries
            return
        self.wake()

    def acks_changed(self, unblocked: bool) -> None:
        """Acks came from elsewhere (skip, expiry, compaction); the caller decides about a round.

        A consumer they unblocked counts for the next ACK's decision (:meth:`acks_applied`).
        """
        self._unblocked = self._unblocked or unblocked

    def _request(self) -> None:
        self._requested = True
        self._wake.set()

    def notify_new_entries(self) -> None:
        """Entries were appended (the publish path): run a dispatch round right away.

        The round is what the task would run on this wake-up; running it here saves a task
        switch per publish, so a read's SENDs, their receipts and their MESSAGEs leave in one
        write. A round that has more to do than it may (``MAX_READS_PER_ROUND``) wakes the task
        for the rest, as in the task; so does a round that meets entries not in the cache
        (bookie mode): only the task may wait for the stub.
        """
        if self._closed or self._limited:
            # Throttled: Pulsar has no read outstanding, so new entries wake nobody; the read
            # is retried when the backoff ends (or on a FLOW).
            return
        retry_at = self._retry_at
        delayed = self._delayed
        first_due = delayed[0][0] if delayed else None
        try:
            self.dispatch()
        except CacheMiss:
            self._request()  # the task's round meets the same miss and loads the entries
        except Exception:
            # As in run(): a bug in one subscription must not fail the publish.
            logger.exception("dispatch round failed; consumers: %s", self._members.consumers)
        if self._retry_at is not None and self._retry_at != retry_at:
            # The round was throttled: the task must sleep until the retry, not until the next
            # event (it may be waiting for none at all).
            self._wake.set()
        if delayed and (first_due is None or delayed[0][0] < first_due):
            # The round parked a delayed entry due before any the task sleeps for: wake it so
            # it sleeps until that one instead (it may be waiting for no deadline at all).
            self._wake.set()

    def close(self) -> None:
        """Stop the task (also before it started: ``run`` checks the flag first)."""
        self._closed = True
        self._scope.cancel()
        self._wake.set()

    @property
    def replay_count(self) -> int:
        """Entries waiting to be sent again (Pulsar's ``msgInReplay``)."""
        return len(self._replay_set)

    def draining_summary(self) -> tuple[dict[Consumer, tuple[int, int, int]], int]:
        """Per consumer its draining-hash counts, and the hashes cleared in all (stats)."""
        return self._draining.summary(), self._draining.cleared_total

    @property
    def delayed_count(self) -> int:
        """Entries read and held back until their ``deliver_at_time`` (Pulsar's ``msgDelayed``)."""
        return len(self._delayed)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Dispatch rounds until closed: one per requested wake-up or reached deadline."""
        with self._scope:
            task_status.started()
            while not self._closed:
                deadline_reached = await self._wait()
                self._wake = anyio.Event()
                if not (deadline_reached or self._requested):
                    continue  # only woken to sleep until a new deadline
                self._requested = False
                try:
                    self.dispatch()
                except CacheMiss as miss:
                    # Bookie mode: evicted entries come back from the stub (``managed_ledger``).
                    await self._load(miss)
                except Exception:
                    # A bug in one subscription must not take the broker's task group down.
                    logger.exception(
                        "dispatch round failed; consumers: %s", self._members.consumers
                    )

    async def _load(self, miss: CacheMiss) -> None:
        try:
            await self._ledger.load(miss.first, miss.last)
        except StorageError as exc:
            # The stub is away: consumers wait; retry after a pause (never skip entries).
            logger.warning("reading entries %s..%s failed: %s", miss.first, miss.last, exc)
            await self._clock.sleep(1.0)
        self._request()

    async def _wait(self) -> bool:
        """Wait for a wake-up or the next deadline; True if the deadline was reached."""
        deadline = self._retry_at
        if self._delayed and self._members.consumers:
            wait_ms = self._delayed[0][0] - self._clock.wall_ms()
            due = self._clock.now() + max(wait_ms, 0) / 1000
            deadline = due if deadline is None else min(deadline, due)
        if deadline is None:
            await self._wake.wait()
            return False
        reached = False

        async def sleep_then_cancel(scope: anyio.CancelScope) -> None:
            nonlocal reached
            await self._clock.sleep_until(deadline)
            reached = True
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleep_then_cancel, tg.cancel_scope)
            await self._wake.wait()
            tg.cancel_scope.cancel()
        return reached

    # ---- a round ------------------------------------------------------------------------------

    def dispatch(self) -> None:
        """Run one dispatch round (see the module docstring)."""
        if not self._members.consumers or self._closed:
            return
        self._round_ms = now_ms = self._clock.wall_ms()  # one read per round
        if self._delayed:
            while self._delayed and self._delayed[0][0] <= now_ms:
                self._push_replay(heapq.heappop(self._delayed)[1])
        throttle = self.throttle
        if throttle is not None and throttle.active:
            self._dispatch_throttled(throttle)
            return
        self._retry_at = None
        self._limited = False
        if self._replay and (self._replay_dirty or not self._members.rules.routes_by_key):
            self._replay_dirty = False
            if not self._dispatch_replay():
                return
        self._dispatch_new()

    def _dispatch_throttled(self, throttle: SubscriptionThrottle) -> None:
        """A round under dispatch throttling: plan -> read -> send -> charge, per read (§1.2/3).

        Every read is sized by ``throttle.plan`` (consulting broker -> topic -> subscription);
        an exhausted level stops the round and schedules one retry 1000 ms later, unless one is
        scheduled already (see "Throttled reads" in the module docstring). Entries of a read all
        go out even when their messages exceed the message tokens (a batch counts as one entry
        in the plan, as in Pulsar): that over-delivery is carried into later periods.
        """
        clock = self._clock
        ledger = self._ledger
        members = self._members
        retry_at = self._retry_at
        if retry_at is not None and clock.now() >= retry_at:
            self._retry_at = None  # this round is the retry (Pulsar clears its flag first)
        self._limited = False
        for _ in range(MAX_READS_PER_ROUND):
            end = ledger.count
            replay = bool(self._replay) and (self._replay_dirty or not members.rules.routes_by_key)
            if not replay and self.read_position >= end:
                return
            # Entries to come back from the stub first: load them before asking the limiters,
            # which Pulsar asks once per read (the round is run again after the load).
            first = self._replay[0] if replay else self.read_position
            ledger.require(first, end - 1)
            now = clock.now()
            active = end - self.read_position <= CURSOR_BACKLOGGED_THRESHOLD
            count = ledger.count
            plan = throttle.plan(
                members.picker.permits(),
                now,
                cursor_active=active,
                avg_entry_size=self._counters.bytes_in / count if count else 0.0,
            )
            if plan.backoff_until is not None:
                throttle.throttled(plan, now, cursor_active=active)
                self._limited = True
                if self._retry_at is None:  # reScheduleRead: once per throttling episode
                    self._retry_at = plan.backoff_until
                return
            if plan.max_entries == 0:
                return  # no permits: the next FLOW wakes us
            entries, messages, size = self.entries_out, self.msg_out, self.bytes_out
            position = self.read_position
            if replay:
                self._replay_dirty = False
                more = self._dispatch_replay(plan.max_entries)
            else:
                self._dispatch_new(plan.max_entries)
                more = True
            entries = self.entries_out - entries
            if entries == 0:
                if replay or self.read_position == position:
                    return
                continue  # the read held only acked or delayed entries: read on
            single = members.active if members.rules.single_active else None
            throttle.sent(
                entries,
                self.msg_out - messages,
                self.bytes_out - size,
                now,
                cursor_active=active,
                replay=replay,
                consumer="" if single is None else single.name,
                consumer_id=-1 if single is None else single.consumer_id,
            )
            if not more and entries < plan.max_entries:
                return
        self._request()  # more to do: continue in the next round, after a yield

    def _dispatch_replay(self, limit: int = 0) -> bool:
        """Deliver parked entries in order; True if new entries may be read afterwards.

        With ``limit`` (throttled rounds), at most that many entries are sent.
        """
        replay = self._replay
        needs_delivery = self._acks.needs_delivery
        infos, base = self._ledger.infos, self._ledger.base
        picker = self._members.picker
        by_key = self._members.rules.routes_by_key
        draining = self._draining if self._draining else None
        parked: list[int] = []
        capacity: bool | None = None  # "some consumer has room"; only a send can change it
        while replay:
            index = replay[0]
            if index < base or not needs_delivery(index):  # acknowledged, or trimmed
                heapq.heappop(replay)
                self._replay_set.discard(index)
                continue
            info = infos[index - base]
            consumer = picker.select(info)
            if (
                consumer is not None
                and draining is not None
                and draining.blocks(consumer, key_hash(info))
            ):
                consumer = None  # its key still drains from another consumer: park it
            if consumer is None:
                if capacity is None:
                    capacity = by_key and picker.has_capacity()
                if capacity:
                    parked.append(heapq.heappop(replay))  # its consumer is blocked, others not
                    continue
                break
            ledger_id, entry_id, sections = self._ledger.read(index, index)  # may miss: keep it
            heapq.heappop(replay)
            self._replay_set.discard(index)
            self._count_out(
                1,
                self._send(consumer, index, ledger_id, entry_id, info, sections[0]),
                len(sections[0]),
            )
            capacity = None
            if limit:
                limit -= 1
                if not limit:
                    # A throttled round ran out here: the next one resumes in the replay set
                    # rather than reading on past a key's older, still parked entries.
                    self._replay_dirty = bool(replay)
                    break
        for index in parked:
            heapq.heappush(replay, index)
        return by_key or not replay

    def _dispatch_new(self, limit: int = 0) -> None:
        """Read and deliver new entries; with ``limit`` (throttled rounds), one read that big."""
        ledger = self._ledger
        cursor = self._acks.cursor
        infos, base = ledger.infos, ledger.base
        end = ledger.count
        if self.read_position < base:
            # A non-durable cursor's entries were trimmed under it (the durable ones hold trims
            # back): read on from the first entry still stored, as Pulsar's cursor skips to the
            # next valid position.
            self.read_position = base
        batch = limit or max(1, self._settings.dispatcher_max_read_batch_size)
        members = self._members
        picker = members.picker
        rules = members.rules
        by_key = rules.routes_by_key
        draining = self._draining if self._draining else None
        single_active = rules.single_active
        delayed = self._settings.delayed_delivery_enabled and rules.delayed_delivery
        now_ms = self._clock.wall_ms() if delayed else 0
        reads = 0
        capacity: bool | None = None  # as in _dispatch_replay
        while self.read_position < end:
            if not picker.has_capacity():
                return
            if by_key and len(self._replay_set) >= MAX_REPLAY_ENTRIES:
                return
            if reads == MAX_READS_PER_ROUND:
                self._request()  # more to do: continue in the next round, after a yield
                return
            reads += 1
            first = self.read_position
            ledger_id, first_entry, sections = ledger.read(first, min(end, first + batch) - 1)
            acked = cursor.acked_among(first, first + len(sections))
            if single_active and not delayed and not acked and self._acks.plain:
                # The common case: every entry of the read is new to one consumer, sent as a
                # run while it has permits and its connection takes more (as below, at once).
                consumer = picker.active
                sent = messages = size = 0
                if consumer is not None and consumer.permits > 0 and consumer.sink.writable:
                    run_infos = infos[first - base : first - base + len(sections)]
                    sent, messages, size = self._send_run(
                        consumer, first, ledger_id, first_entry, sections, run_infos
                    )
                self._count_out(sent, messages, size)
                self.read_position = first + sent
                if sent < len(sections) or limit:
                    return
                continue
            sent = messages = size = 0  # this read's deliveries, counted once (_count_out)
            for offset, section in enumerate(sections):
                index = first + offset
                if index in acked:  # after a reload, a redelivery, a skip
                    continue
                info = infos[index - base]
                at = info.deliver_at_time
                if delayed and at is not None and at > now_ms:
                    heapq.heappush(self._delayed, (at, index))
                    continue
                if single_active:  # picker.select, without the call per entry
                    consumer = picker.active
                    if consumer is not None and (
                        consumer.permits <= 0 or not consumer.sink.writable
                    ):
                        consumer = None
                else:
                    consumer = picker.select(info)
                    if (
                        consumer is not None
                        and draining is not None
                        and draining.blocks(consumer, key_hash(info))
                    ):
                        consumer = None  # as in _dispatch_replay
                if consumer is None:
                    if capacity is None:
                        capacity = by_key and picker.has_capacity()
                    if capacity:
                        # Park it for its blocked consumer; that alone unblocks nobody, so the
                        # parked set is not marked for a rescan.
                        self._push_replay(index, dirty=False)
                        continue
                    self.read_position = index
                    self._count_out(sent, messages, size)
                    return
                messages += self._send(
                    consumer, index, ledger_id, first_entry + offset, info, section
                )
                size += len(section)
                sent += 1
                capacity = None
            self._count_out(sent, messages, size)
            self.read_position = first + len(sections)
            if limit:
                return

    def _send(
        self,
        consumer: Consumer,
        index: int,
        ledger_id: int,
        entry_id: int,
        info: EntryInfo,
        section: bytes,
    ) -> int:
        """Deliver one entry; its messages charged (the caller adds them up: ``_count_out``)."""
        charged, ack_set, redelivery_count = self._acks.deliver(consumer, index, info.num_messages)
        consumer.permits -= charged
        consumer.sink.send_message(
            consumer.consumer_id,
            ledger_id,
            entry_id,
            self._partition,
            redelivery_count,
            ack_set,
            section,
        )
        consumer.msg_out += charged  # per consumer, for admin stats
        consumer.bytes_out += len(section)
        consumer.last_consumed = self._round_ms
        return charged

    def _send_run(
        self,
        consumer: Consumer,
        first: int,
        ledger_id: int,
        first_entry: int,
        sections: list[bytes],
        infos: list[EntryInfo],
    ) -> tuple[int, int, int]:
        """Deliver new entries from ``first`` on to one consumer: ``_send`` of each in turn.

        Entries go while the consumer has permits left before each and its connection takes
        more (``ConsumerSink.send_messages``); the caller checked that none is acknowledged,
        partly acknowledged or counted as redelivered (``Acknowledgements.plain``).

        Returns:
            ``(entries sent, messages charged, bytes)``.
        """
        charges = list(map(_NUM_MESSAGES, infos))
        charged = sum(charges)
        if consumer.permits < charged:  # the permits run out within the run: where?
            permits = consumer.permits
            count = 0
            for messages in charges:
                if permits <= 0:
                    break
                permits -= messages
                count += 1
            del charges[count:]
            sections = sections[:count]
            charged = sum(charges)
        sent = consumer.sink.send_messages(
            consumer.consumer_id, ledger_id, first_entry, self._partition, sections
        )
        if sent < len(charges):
            del charges[sent:]
            sections = sections[:sent]
            charged = sum(charges)
        self._acks.deliver_run(consumer, first, charges)
        size = sum(map(len, sections))
        consumer.permits -= charged
        consumer.msg_out += charged  # per consumer, for admin stats
        consumer.bytes_out += size
        consumer.last_consumed = self._round_ms
        return sent, charged, size

    def _count_out(self, entries: int, messages: int, size: int) -> None:
        """Add a run of deliveries to the subscription's and the topic's out counters.

        Once per read rather than once per entry: the loops add up locals instead.
        """
        counters = self._counters
        counters.msg_out += messages
        counters.bytes_out += size
        self.msg_out += messages
        self.bytes_out += size
        self.entries_out += entries
