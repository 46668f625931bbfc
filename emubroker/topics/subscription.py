"""A persistent subscription: who may join, its consumers' commands, seek and the end of its life.

The subscription puts together its acknowledgement state (``acks``, the owner of cursor,
pending deliveries and redelivery counts), its dispatcher (``dispatcher``, who gets what when)
and its consumers. Decisions made elsewhere are applied here: which entries message expiry
expires (``expiry``) and what compaction removed (``compacted``). Rules (spec/wire-protocol.md
§7):

1. Who may join, and which type the subscription has, is ``selection``'s (its rule 1).
2. Durable and non-durable (reader) subscriptions of one name do not mix: ``NotAllowedError``.
3. A durable subscription lives until unsubscribed; its cursor outlives the topic object
   (unload). A non-durable one disappears with its last consumer, except when a SEEK closed
   them: the client comes back to the reset cursor (Pulsar's ``isResetCursor``).
4. Acks apply to the subscription whichever consumer sends them (``acks`` rule 1); the acking
   consumer's stats count what they settled (a cumulative ACK counts 1, as in Pulsar).
5. SEEK resets the cursor, forgets every delivery, sends CLOSE_CONSUMER to every consumer and
   detaches them; the clients resubscribe (§7.5).

Where the cursor goes without an ACK (SEEK, the admin's reset and skip, expiry, compaction) and
the positions it reports are the base class's,
:class:`~emubroker.topics.cursor_moves.CursorMoves`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.acks import Acknowledgements
from emubroker.topics.consumer import Consumer
from emubroker.topics.cursor_moves import CursorMoves
from emubroker.topics.dispatcher import Dispatcher
from emubroker.topics.expiry import ExpiryCounters
from emubroker.topics.limits import check_subscription_consumers
from emubroker.topics.selection import ConsumerSet
from emubroker.topics.stats import SubscriptionStats
from protocol.commands import AckType
from protocol.errors import ConsumerBusyError, MetadataError, NotAllowedError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from anyio.abc import TaskGroup

    from emubroker.topics.compacted import CompactedView
    from emubroker.topics.cursor import Cursor
    from emubroker.topics.managed_ledger import ManagedLedger
    from emubroker.topics.requests import SubscribeRequest
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.sinks import ConsumerSink, Notify
    from emubroker.topics.stats import TopicCounters
    from emubroker.topics.subtypes import SubTypeRules
    from protocol.clock import Clock
    from protocol.commands import MessageIdData

__all__ = ["Subscription"]


class Subscription(CursorMoves):
    """One subscription of a persistent topic (the ``ConsumerOwner`` of its consumers).

    Args:
        name: The subscription name.
        ledger: The topic's entries.
        cursor: Its durable acknowledgements (kept by the service for durable subscriptions).
        topic: The full topic name.
        partition: The topic's partition index (-1 if none).
        clock: For delayed delivery and stats timestamps.
        settings: Topic settings.
        counters: The topic's counters.
        read_position: First index to read.
        on_remove: Called when the subscription ends (unsubscribed, or last reader gone), with
            ``deleted=True`` for an unsubscribe.
        on_consumed: Called when an ACK moved the mark-delete position past the oldest closed
            ledger (the topic may trim it).
    """

    def __init__(
        self,
        name: str,
        *,
        ledger: ManagedLedger,
        cursor: Cursor,
        topic: str,
        partition: int,
        clock: Clock,
        settings: TopicSettings,
        counters: TopicCounters,
        read_position: int,
        on_remove: Callable[[Subscription, bool], None],
        on_consumed: Callable[[], object] = lambda: None,
    ) -> None:
        self.name = name
        self.acks = Acknowledgements(cursor, ledger, batch_index=settings.batch_index_acks)
        self.members: ConsumerSet[Consumer] = ConsumerSet(
            topic=topic,
            partition=partition,
            max_unacked=settings.max_unacked_messages_per_consumer,
            auto_split=settings.key_shared_auto_split,
            # Entries wait (in the ledger) while a consumer's connection is unwritable: its
            # session then queues no more than its high water mark (``emubroker.net.writer``).
            writable_only=True,
        )
        self._ledger = ledger
        self._on_remove = on_remove
        self._on_consumed = on_consumed
        self._closed = False
        self._clock = clock
        self._settings = settings
        self._counters = counters
        self._tg: TaskGroup | None = None  # set by ``start``
        self._announcing = False  # an ACTIVE_CONSUMER_CHANGE notice is scheduled
        # Epoch ms of the last FLOW of any consumer, and of the last ACK that moved the
        # mark-delete position (Pulsar's lastConsumedFlowTimestamp, lastMarkDeleteAdvanced...).
        self.last_flow = 0
        self.last_mark_delete_advanced = 0
        self.expiry = ExpiryCounters()  # message TTL statistics (``expiry``)
        # The compacted view its read_compacted consumers see (set by the topic), else None.
        self.compacted: CompactedView | None = None
        self.dispatcher = Dispatcher(
            ledger=ledger,
            members=self.members,
            acks=self.acks,
            partition=partition,
            clock=clock,
            settings=settings,
            counters=counters,
            read_position=read_position,
        )

    def start(self, task_group: TaskGroup) -> None:
        """Start the dispatcher task."""
        self._tg = task_group
        task_group.start_soon(self.dispatcher.run, name=f"dispatcher {self.name}")
        self._announce_later()

    def _announce_later(self) -> None:
        """Tell a Failover active-consumer change after ``active_consumer_failover_delay``.

        Pulsar's ``scheduleReadOnActiveConsumer`` notifies the consumers that long after the
        change (at once for 0), so a joining consumer hears it after its SUCCESS (the Go client
        drops a notice for a consumer it has not registered yet). One notice is pending at a
        time, and it tells the consumers the active one of its own moment.
        """
        picker = self.members.picker
        if not picker.change_unannounced or self._announcing:
            return
        delay = self._settings.active_consumer_failover_delay
        if delay <= 0:
            picker.announce_active()
        elif self._tg is not None:
            self._announcing = True
            self._tg.start_soon(self._announce_after, delay)

    async def _announce_after(self, delay: float) -> None:
        await self._clock.sleep(delay)
        self._announcing = False
        if not self._closed:
            self.members.picker.announce_active()

    @property
    def cursor(self) -> Cursor:
        """Its durable acknowledgements, to read (``acks`` changes them)."""
        return self.acks.cursor

    @property
    def durable(self) -> bool:
        """False for readers."""
        return self.acks.cursor.durable

    @property
    def rules(self) -> SubTypeRules:
        """The rules of its current type (``subtypes``)."""
        return self.members.rules

    @property
    def active_consumer(self) -> Consumer | None:
        """The one consumer an Exclusive or Failover subscription delivers to, else None."""
        return self.members.active

    @property
    def closed(self) -> bool:
        """True once unsubscribed, emptied (readers) or closed with its topic."""
        return self._closed

    def wall_ms(self) -> int:
        """The clock's wall time in epoch milliseconds (stats timestamps)."""
        return self._clock.wall_ms()

    # ---- membership ---------------------------------------------------------------------------

    def add_consumer(
        self, request: SubscribeRequest, sink: ConsumerSink, *, max_consumers: int = 0
    ) -> Consumer:
        """Attach the consumer a SUBSCRIBE asks for (rules 1 and 2).

        ``max_consumers`` is the subscription's consumer limit (``limits``; 0: none).

        Raises:
            ConsumerBusyError: Exclusive taken, another type / Key_Shared mode in use, or the
                consumer limit reached.
            NotAllowedError: Durability differs from the existing subscription.
            ConsumerAssignError: Key_Shared STICKY ranges overlap.
        """
        if request.durable != self.durable:
            kind = "durable" if self.durable else "non-durable"
            raise NotAllowedError(f"A {kind} subscription named '{self.name}' already exists")
        dispatcher = self.dispatcher
        dispatcher.check_join(self.name, request.sub_type, request.key_shared_meta)
        check_subscription_consumers(max_consumers, self.rules, len(self.consumers))
        consumer = Consumer(request, sink, self._counters.next_handle_key(), self)
        dispatcher.add_consumer(consumer, request.key_shared_meta)
        self._announce_later()
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach a consumer; its unacked entries become redeliverable (§7.7)."""
        consumer.closed = True
        self.dispatcher.remove_consumer(consumer, redeliver=True)
        self._announce_later()
        if not self.durable and not self.consumers:
            self._end(deleted=False)

    def unsubscribe(self, consumer: Consumer) -> None:
        """Delete the subscription (UNSUBSCRIBE).

        Raises:
            MetadataError: Other consumers are attached (Pulsar's ``PersistentSubscription.
                doUnsubscribe`` fails with ``ServerMetadataException``, code MetadataError).
        """
        if any(c is not consumer for c in self.consumers):
            raise MetadataError("Unconnected or shared consumer attempting to unsubscribe")
        consumer.closed = True
        self.dispatcher.remove_consumer(consumer, redeliver=False)
        self._end(deleted=True)

    def close(self, *, notify: Notify) -> None:
        """Close with the topic: unacked deliveries count as redelivered, consumers detached.

        Args:
            notify: Send CLOSE_CONSUMER to each consumer (unload, §9), now or held back
                (``sinks.Notify``).
        """
        dispatcher = self.dispatcher
        dispatcher.release_all()
        self._disconnect_all(notify=notify)
        self._closed = True
        dispatcher.close()

    def _end(self, *, deleted: bool) -> None:
        self._closed = True
        self.dispatcher.close()
        self._on_remove(self, deleted)

    # ---- the consumers' commands --------------------------------------------------------------

    def flow(self, consumer: Consumer, permits: int) -> None:
        """FLOW: ``permits`` more for ``consumer``, and a dispatch round."""
        # Pulsar's Consumer.flowPermits / PersistentSubscription.consumerFlow timestamps.
        consumer.flowed(self.wall_ms())
        self.last_flow = consumer.last_flow
        consumer.permits += permits
        self.dispatcher.wake()
        if self._ledger.terminated:
            # Pulsar's dispatcher finds nothing more to read (NoMoreEntriesToRead).
            self._check_end_of_topic()

    def resume_delivery(self, consumer: Consumer) -> None:
        """``consumer``'s connection drained: a dispatch round (the last ones skipped it)."""
        del consumer
        self.dispatcher.wake()

    def ack(self, consumer: Consumer, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        """ACK from ``consumer`` (rule 4)."""
        now_ms = consumer.last_acked = self.wall_ms()
        if ack_type is AckType.INDIVIDUAL:
            change = self.acks.ack_individual(ids)
            # Pulsar records the messages an ACK settled on the acking consumer, whichever
            # consumer they were delivered to.
            consumer.msg_acked += change.settled
        else:
            change = self.acks.ack_cumulative(ids)
            consumer.msg_acked += 1  # Pulsar's Consumer.messageAcked records 1 per cumulative
        # Acks may unblock consumers held by the unacked limit or parked Key_Shared entries.
        self.dispatcher.acks_applied(change.unblocked)
        if change.moved:
            self.last_mark_delete_advanced = now_ms
            if self.acks.cursor.mark_delete >= self._ledger.oldest_closed_last:
                self._on_consumed()  # a whole ledger is consumed here: maybe by everyone
        if self._ledger.terminated:
            self._check_end_of_topic()

    def topic_terminated(self) -> None:
        """The topic was terminated: consumers that have consumed everything hear it now."""
        self._check_end_of_topic()

    def _check_end_of_topic(self) -> None:
        """REACHED_END_OF_TOPIC to every consumer once nothing is left to acknowledge.

        As Pulsar's ``PersistentSubscription`` (on termination and after each ack) and its
        dispatchers (a read that finds no more entries): the backlog of a terminated topic is
        empty, so no message will ever come again.
        """
        if self.acks.backlog():
            return
        for consumer in self.consumers:
            consumer.sink.reached_end_of_topic(consumer.consumer_id)

    def redeliver(self, consumer: Consumer, ids: Sequence[MessageIdData] | None) -> None:
        """Redeliver entries pending on ``consumer`` (all of them when ``ids`` is empty)."""
        before = consumer.unacked
        if not ids:
            self.dispatcher.redeliver(consumer, None)
        else:
            ledger = self._ledger
            indexes = [
                index
                for mid in ids
                if (index := ledger.index_of(mid.ledger_id, mid.entry_id)) is not None
            ]
            self.dispatcher.redeliver(consumer, sorted(set(indexes)))
        if self.rules.counts_redeliveries:
            consumer.msg_redeliver += before - consumer.unacked

    # ---- admin operations (REST API) ----------------------------------------------------------

    def delete(self, *, force: bool = False) -> None:
        """Delete the subscription; with ``force``, consumers get CLOSE_CONSUMER first.

        Raises:
            ConsumerBusyError: Consumers are attached and ``force`` is false.
        """
        if self.consumers and not force:
            raise ConsumerBusyError("Subscription has active connected consumers")
        self._disconnect_all()
        self._end(deleted=True)

    def stats(self) -> SubscriptionStats:
        """A snapshot for metrics and admin.

        As in Pulsar, unacknowledged messages are tracked (and reported) only where acks are
        individual (``tracks_unacked``); there the subscription's count is its consumers' sum.
        """
        dispatcher = self.dispatcher
        rules = self.rules
        draining, cleared = dispatcher.draining_summary()
        consumer_stats = tuple(
            c.stats(unacked_tracked=rules.tracks_unacked, draining=draining.get(c, (0, 0, 0)))
            for c in self.consumers
        )
        return SubscriptionStats(
            name=self.name,
            type=rules.name if self.members.configured else "None",
            durable=self.durable,
            consumers=len(self.consumers),
            backlog=self.acks.backlog(),
            unacked=sum(c.unacked for c in consumer_stats),
            mark_delete=self._ledger.position(self.acks.cursor.mark_delete),
            msg_out=dispatcher.msg_out,
            bytes_out=dispatcher.bytes_out,
            throttle=None if dispatcher.throttle is None else dispatcher.throttle.stats(),
            delayed=dispatcher.delayed_count,
            last_flow=self.last_flow,
            last_mark_delete_advanced=self.last_mark_delete_advanced,
            consumer_stats=consumer_stats,
            msg_expired=self.expiry.total,
            last_expire=self.expiry.last_expire,
            in_replay=dispatcher.replay_count,
            draining=(
                sum(d[0] for d in draining.values()),
                sum(d[1] for d in draining.values()),
                cleared,
            ),
        )
