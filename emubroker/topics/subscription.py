"""A persistent subscription: who may join, acks, redelivery, seek and the end of its life.

Rules (spec/wire-protocol.md §7):

1. A subscription with consumers keeps its type: a consumer asking for another type (or another
   Key_Shared mode) fails with ``ConsumerBusyError``, and so does a second Exclusive consumer.
   Without consumers the type may change.
2. Durable and non-durable (reader) subscriptions of one name do not mix: ``NotAllowedError``.
3. A durable subscription lives until unsubscribed; its cursor outlives the topic object
   (unload). A non-durable one disappears with its last consumer, except when a SEEK closed
   them: the client comes back to the reset cursor (Pulsar's ``isResetCursor``).
4. Acks apply to the subscription whichever consumer sends them; ids that name no entry of the
   topic (a reader's cumulative ack of entry -1, ids from another ledger) are no-ops.
5. SEEK resets the cursor, forgets every delivery, sends CLOSE_CONSUMER to every consumer and
   detaches them; the clients resubscribe (§7.5).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.consumer import Consumer
from emubroker.topics.cursor import mask_from_words
from emubroker.topics.dispatcher import Dispatcher
from emubroker.topics.expiry import ExpiryCounters
from emubroker.topics.limits import check_subscription_consumers
from emubroker.topics.selection import SUB_TYPE_NAMES
from emubroker.topics.stats import SubscriptionStats
from protocol.commands import AckType, SubType
from protocol.errors import ConsumerBusyError, MetadataError, NotAllowedError
from protocol.ids import is_latest

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from anyio.abc import TaskGroup

    from emubroker.topics.compacted import CompactedView
    from emubroker.topics.cursor import Cursor
    from emubroker.topics.managed_ledger import ManagedLedger
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.sinks import ConsumerSink
    from emubroker.topics.stats import TopicCounters
    from protocol.clock import Clock
    from protocol.commands import KeySharedMeta, MessageIdData

__all__ = ["Subscription"]

# Where acks are individual, and so where Pulsar tracks each consumer's unacked messages.
_INDIVIDUAL_ACK_TYPES = frozenset({SubType.SHARED, SubType.KEY_SHARED})


class Subscription:
    """One subscription of a persistent topic.

    Args:
        name: The subscription name.
        ledger: The topic's entries.
        cursor: Its acknowledgement state (kept by the service for durable subscriptions).
        topic: The full topic name.
        partition: The topic's partition index (-1 if none).
        clock: For delayed delivery.
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
        self.cursor = cursor
        self._ledger = ledger
        self._on_remove = on_remove
        self._on_consumed = on_consumed
        self._closed = False
        self._clock = clock
        self._counters = counters
        # Epoch ms of the last FLOW of any consumer, and of the last ACK that moved the
        # mark-delete position (Pulsar's lastConsumedFlowTimestamp, lastMarkDeleteAdvanced...).
        self.last_flow = 0
        self.last_mark_delete_advanced = 0
        self.expiry = ExpiryCounters()  # message TTL statistics (``expiry``)
        # The compacted view its read_compacted consumers see (set by the topic), else None.
        self.compacted: CompactedView | None = None
        self.dispatcher = Dispatcher(
            ledger=ledger,
            cursor=cursor,
            topic=topic,
            partition=partition,
            clock=clock,
            settings=settings,
            counters=counters,
            read_position=read_position,
        )

    def start(self, task_group: TaskGroup) -> None:
        """Start the dispatcher task."""
        task_group.start_soon(self.dispatcher.run, name=f"dispatcher {self.name}")

    @property
    def durable(self) -> bool:
        """False for readers."""
        return self.cursor.durable

    @property
    def consumers(self) -> list[Consumer]:
        """Attached consumers, in join order."""
        return self.dispatcher.consumers

    @property
    def active_consumer(self) -> Consumer | None:
        """The one consumer an Exclusive or Failover subscription delivers to, else None."""
        return self.dispatcher.active_consumer

    @property
    def closed(self) -> bool:
        """True once unsubscribed, emptied (readers) or closed with its topic."""
        return self._closed

    def wake(self) -> None:
        """Ask the dispatcher for a round."""
        self.dispatcher.wake()

    def wall_ms(self) -> int:
        """The clock's wall time in epoch milliseconds (stats timestamps)."""
        return self._clock.wall_ns() // 1_000_000

    # ---- membership ---------------------------------------------------------------------------

    def add_consumer(
        self,
        *,
        consumer_id: int,
        sink: ConsumerSink,
        consumer_name: str,
        priority_level: int,
        sub_type: SubType,
        durable: bool,
        key_shared_meta: KeySharedMeta | None,
        metadata: Mapping[str, str] | None = None,
        max_consumers: int = 0,
    ) -> Consumer:
        """Attach a consumer (rules 1 and 2); ``metadata`` is ``CommandSubscribe.metadata``.

        ``max_consumers`` is the subscription's consumer limit (``limits``; 0: none).

        Raises:
            ConsumerBusyError: Exclusive taken, another type / Key_Shared mode in use, or the
                consumer limit reached.
            NotAllowedError: Durability differs from the existing subscription.
            ConsumerAssignError: Key_Shared STICKY ranges overlap.
        """
        if durable != self.durable:
            kind = "durable" if self.durable else "non-durable"
            raise NotAllowedError(f"A {kind} subscription named '{self.name}' already exists")
        dispatcher = self.dispatcher
        dispatcher.check_join(self.name, sub_type, key_shared_meta)
        check_subscription_consumers(max_consumers, sub_type, len(dispatcher.consumers))
        consumer = Consumer(consumer_id, consumer_name, sink, priority_level, self)
        consumer.metadata = dict(metadata or {})
        consumer.stats_key = self._counters.next_handle_key()
        dispatcher.add_consumer(consumer, key_shared_meta)
        return consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach a consumer; its unacked entries become redeliverable (§7.7)."""
        consumer.closed = True
        self.dispatcher.remove_consumer(consumer, redeliver=True)
        if not self.durable and not self.dispatcher.consumers:
            self._end(deleted=False)

    def unsubscribe(self, consumer: Consumer) -> None:
        """Delete the subscription (UNSUBSCRIBE).

        Raises:
            MetadataError: Other consumers are attached (Pulsar's ``PersistentSubscription.
                doUnsubscribe`` fails with ``ServerMetadataException``, code MetadataError).
        """
        if any(c is not consumer for c in self.dispatcher.consumers):
            raise MetadataError("Unconnected or shared consumer attempting to unsubscribe")
        consumer.closed = True
        self.dispatcher.remove_consumer(consumer, redeliver=False)
        self._end(deleted=True)

    def close(self, *, notify: bool) -> None:
        """Close with the topic: unacked deliveries count as redelivered, consumers detached.

        Args:
            notify: Send CLOSE_CONSUMER to each consumer (unload, §9).
        """
        dispatcher = self.dispatcher
        dispatcher.release_all()
        for consumer in list(dispatcher.consumers):
            consumer.closed = True
            dispatcher.remove_consumer(consumer, redeliver=False)
            if notify:
                consumer.sink.close_consumer(consumer.consumer_id)
        self._closed = True
        dispatcher.close()

    def _end(self, *, deleted: bool) -> None:
        self._closed = True
        self.dispatcher.close()
        self._on_remove(self, deleted)

    # ---- acknowledgements and redelivery ------------------------------------------------------

    def ack(self, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        """Apply an ACK (rule 4; batch-index acks per §7.3)."""
        mark_delete = self.cursor.mark_delete
        self._ack(ack_type, ids)
        if self.cursor.mark_delete != mark_delete:
            self.last_mark_delete_advanced = self.wall_ms()
            if self.cursor.mark_delete >= self._ledger.oldest_closed_last:
                self._on_consumed()  # a whole ledger is consumed here: maybe by everyone

    def _ack(self, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        ledger = self._ledger
        cursor = self.cursor
        dispatcher = self.dispatcher
        infos = ledger.infos
        index_of = ledger.index_of
        if ack_type is AckType.INDIVIDUAL:
            # The ACK hot path (the client groups up to 1000 ids per ACK): whole entries are
            # acknowledged in one pass over the cursor and one over the dispatcher.
            whole: list[int] = []
            for mid in ids:
                index = index_of(mid.ledger_id, mid.entry_id)
                if index is None:
                    continue
                if mid.ack_set and infos[index].batched:
                    info = infos[index]
                    mask = mask_from_words(mid.ack_set, info.num_messages)
                    if cursor.ack_batch(index, mask, info.num_messages):
                        dispatcher.acked(index)
                else:
                    whole.append(index)
            if whole:
                dispatcher.acked_many(cursor.ack_many(whole))
            dispatcher.acks_applied()
            return
        for mid in ids:  # cumulative
            index = index_of(mid.ledger_id, mid.entry_id)
            if index is None:
                continue
            info = infos[index]
            partial = bool(mid.ack_set) and info.batched
            upto = index - 1 if partial else index
            if upto >= 0 and cursor.ack_cumulative(upto):
                dispatcher.acked_up_to(upto)
            if partial:
                mask = mask_from_words(mid.ack_set, info.num_messages)
                if cursor.ack_batch(index, mask, info.num_messages):
                    dispatcher.acked(index)
        # Acks may unblock consumers held by the unacked limit or parked Key_Shared entries.
        dispatcher.acks_applied()

    def redeliver(self, consumer: Consumer, ids: Sequence[MessageIdData] | None) -> None:
        """Redeliver entries pending on ``consumer`` (all of them when ``ids`` is empty)."""
        if not ids:
            self.dispatcher.redeliver(consumer, None)
            return
        ledger = self._ledger
        indexes = [
            index
            for mid in ids
            if (index := ledger.index_of(mid.ledger_id, mid.entry_id)) is not None
        ]
        self.dispatcher.redeliver(consumer, sorted(set(indexes)))

    # ---- seek and positions -------------------------------------------------------------------

    async def seek(
        self,
        consumer: Consumer,
        *,
        message_id: MessageIdData | None = None,
        publish_time: int | None = None,
    ) -> None:
        """Reset the cursor and close every consumer (rule 5).

        Raises:
            NotAllowedError: The consumer is closed, or neither target was given.
        """
        if consumer.closed:
            raise NotAllowedError(f"consumer {consumer.consumer_id} is closed")
        index = self._seek_index(message_id, publish_time)
        self.cursor.reset(index)
        self.dispatcher.reset(index)
        for c in list(self.dispatcher.consumers):
            c.closed = True
            self.dispatcher.remove_consumer(c, redeliver=False)
            c.sink.close_consumer(c.consumer_id)

    def _seek_index(self, message_id: MessageIdData | None, publish_time: int | None) -> int:
        ledger = self._ledger
        if message_id is not None:
            if message_id.ledger_id < 0:
                return 0  # the earliest sentinel (-1, -1)
            if is_latest(message_id):
                return ledger.count
            return ledger.index_at_or_after(message_id.ledger_id, message_id.entry_id)
        if publish_time is not None:
            # Publish times of several producers interleave, so scan rather than bisect.
            for index, info in enumerate(ledger.infos):
                if info.publish_time >= publish_time:
                    return index
            return ledger.count
        raise NotAllowedError("SEEK needs a message id or a publish time")

    # ---- admin operations (REST API) ----------------------------------------------------------

    def delete(self, *, force: bool = False) -> None:
        """Delete the subscription; with ``force``, consumers get CLOSE_CONSUMER first.

        Raises:
            ConsumerBusyError: Consumers are attached and ``force`` is false.
        """
        if self.dispatcher.consumers and not force:
            raise ConsumerBusyError("Subscription has active connected consumers")
        self._disconnect_all()
        self._end(deleted=True)

    def skip(self, count: int | None = None) -> int:
        """Acknowledge the next ``count`` unacknowledged entries; all of them for None.

        Returns:
            How many entries were skipped.
        """
        cursor, dispatcher, end = self.cursor, self.dispatcher, self._ledger.count
        if count is not None and not cursor.acked and not cursor.partial:
            # Nothing acknowledged out of order: skipping is one cumulative ack, however far
            # (the admin API passes any count; a walk would hold the event loop).
            count = min(count, end - 1 - cursor.mark_delete)
            if count > 0 and cursor.ack_cumulative(cursor.mark_delete + count):
                dispatcher.acked_up_to(cursor.mark_delete)
            dispatcher.wake()
            return max(count, 0)
        if count is None:
            skipped = cursor.backlog(end)
            if end and cursor.ack_cumulative(end - 1):
                dispatcher.acked_up_to(end - 1)
        else:
            skipped = 0
            index = cursor.mark_delete + 1
            while index < end and skipped < count:
                if cursor.ack(index):
                    dispatcher.acked(index)
                    skipped += 1
                index += 1
        dispatcher.wake()
        return skipped

    def reset_cursor(
        self, *, message_id: MessageIdData | None = None, publish_time: int | None = None
    ) -> None:
        """Move the cursor as SEEK does (rule 5), without a consumer asking.

        Raises:
            NotAllowedError: Neither target was given.
        """
        index = self._seek_index(message_id, publish_time)
        self.cursor.reset(index)
        self.dispatcher.reset(index)
        self._disconnect_all()

    def _disconnect_all(self) -> None:
        dispatcher = self.dispatcher
        for consumer in list(dispatcher.consumers):
            consumer.closed = True
            dispatcher.remove_consumer(consumer, redeliver=False)
            consumer.sink.close_consumer(consumer.consumer_id)

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """The topic's last entry with batch index, and this subscription's mark-delete."""
        ledger = self._ledger
        last = ledger.last_message_id()
        if self.compacted is not None:
            # Compacted reads end at the last compacted message while nothing follows the
            # horizon (``compacted`` rule 3).
            last = self.compacted.last_message_id(ledger) or last
        return last, ledger.position(self.cursor.mark_delete)

    def stats(self) -> SubscriptionStats:
        """A snapshot for metrics and admin.

        As in Pulsar, unacknowledged messages are tracked (and reported) only where acks are
        individual, Shared and Key_Shared; there the subscription's count is its consumers' sum.
        """
        tracked = self.dispatcher.sub_type in _INDIVIDUAL_ACK_TYPES
        consumer_stats = tuple(c.stats(unacked_tracked=tracked) for c in self.dispatcher.consumers)
        return SubscriptionStats(
            name=self.name,
            type=SUB_TYPE_NAMES[self.dispatcher.sub_type],
            durable=self.durable,
            consumers=len(self.dispatcher.consumers),
            backlog=self.cursor.backlog(self._ledger.count),
            unacked=sum(c.unacked for c in consumer_stats),
            mark_delete=self._ledger.position(self.cursor.mark_delete),
            msg_out=self.dispatcher.msg_out,
            bytes_out=self.dispatcher.bytes_out,
            throttle=None if self.dispatcher.throttle is None else self.dispatcher.throttle.stats(),
            delayed=self.dispatcher.delayed_count,
            last_flow=self.last_flow,
            last_mark_delete_advanced=self.last_mark_delete_advanced,
            consumer_stats=consumer_stats,
            msg_expired=self.expiry.total,
            last_expire=self.expiry.last_expire,
        )
