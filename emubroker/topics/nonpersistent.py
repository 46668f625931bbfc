"""Non-persistent topics (``non-persistent://``): nothing stored, delivered as published.

Pulsar's ``NonPersistentTopic``: a published entry gets the next id of the topic's fixed ledger
and goes at once to the consumer its subscription's type picks. That consumer must have permits
and a *writable* connection (``ConsumerSink.writable``: not more than a high water mark of bytes
waiting to be written to it), as Pulsar's non-persistent dispatchers check ``getAvailablePermits()
> 0 && isWritable()``; for Shared the next such consumer in turn. Otherwise the message is dropped
for that subscription and counted (its ``msgDropRate``); a Key_Shared key no consumer's range
covers is skipped without counting, as Pulsar releases it. So a consumer that stops reading its
socket costs the broker a bounded buffer, not every message published after it stopped.
Subscriptions exist only while consumers are attached; acks and redelivery requests have nothing
to act on, and SEEK succeeds without effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.base import TopicBase
from emubroker.topics.consumer import ConsumerRecord
from emubroker.topics.limits import (
    LimitResolver,
    check_subscription_consumers,
    check_topic_consumers,
)
from emubroker.topics.selection import ConsumerSet
from emubroker.topics.sinks import consumer_closed
from emubroker.topics.stats import (
    ConsumerStats,
    SubscriptionStats,
    TopicCounters,
    TopicStats,
)
from protocol.commands import SubType
from protocol.errors import (
    ConsumerBusyError,
    MetadataError,
    UnknownError,
)
from protocol.framing import payload_section

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emubroker.naming import TopicName
    from emubroker.topics.dedup import Pending
    from emubroker.topics.entry import EntryInfo
    from emubroker.topics.producer import ProducerHandle
    from emubroker.topics.requests import SubscribeRequest
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.sinks import ConsumerSink, Notify
    from protocol.clock import Clock
    from protocol.commands import AckType, KeySharedMeta, MessageIdData

__all__ = ["NonPersistentConsumer", "NonPersistentSubscription", "NonPersistentTopic"]


class NonPersistentConsumer(ConsumerRecord):
    """A consumer of a non-persistent subscription (implements ``ConsumerHandle``).

    Nothing is acknowledged or redelivered here, so of its ``ConsumerActivity`` only
    ``last_acked`` moves on the ACK side, ``unacked`` stays 0 and it never blocks.
    """

    __slots__ = ("_subscription",)

    def __init__(
        self,
        request: SubscribeRequest,
        sink: ConsumerSink,
        stats_key: int,
        subscription: NonPersistentSubscription,
    ) -> None:
        super().__init__(request, sink, stats_key)
        self._subscription = subscription

    def flow(self, permits: int) -> None:
        """Add permits."""
        if not self.closed and permits > 0:
            subscription = self._subscription
            self.flowed(subscription.topic.wall_ms())
            subscription.last_flow = self.last_flow
            self.permits += permits

    def resume_delivery(self) -> None:
        """Nothing was held back: what could not be sent was dropped."""

    def ack(self, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        """Nothing is stored, so there is nothing to acknowledge; only the time is noted."""
        if not self.closed:
            self.last_acked = self._subscription.topic.wall_ms()

    def redeliver(self, ids: Sequence[MessageIdData] | None) -> None:
        """Nothing is stored, so there is nothing to redeliver."""

    async def seek(
        self, *, message_id: MessageIdData | None = None, publish_time: int | None = None
    ) -> None:
        """Nothing is stored, so nothing moves; SEEK still succeeds and nobody is disconnected.

        Pulsar's ``NonPersistentSubscription.resetCursor`` (both overloads) is a no-op that
        completes, and ``ServerCnx.handleSeek`` then answers SUCCESS.
        """
        del message_id, publish_time

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """Refused, as Pulsar refuses it (so a reader's ``has_message_available`` fails too).

        Raises:
            UnknownError: Always: ``NonPersistentTopic.getLastDispatchablePosition`` throws
                ``UnsupportedOperationException`` and ``ServerCnx.handleGetLastMessageId``
                answers that with UnknownError.
        """
        raise UnknownError("getLastMessageId is not supported on non-persistent topic")

    async def close(self) -> None:
        """Detach."""
        if not self.closed:
            self._subscription.remove(self)

    def stats(self) -> ConsumerStats:
        """A snapshot for metrics and admin."""
        return self.snapshot(self.name, self.consumer_id, self.permits, 0)

    async def unsubscribe(self) -> None:
        """Detach and end the subscription.

        Raises:
            MetadataError: Other consumers are attached.
        """
        self._subscription.unsubscribe(self)


class NonPersistentSubscription:
    """Consumers of one subscription; the type's rules come from ``selection.ConsumerSet``."""

    def __init__(self, name: str, topic: NonPersistentTopic) -> None:
        self.name = name
        self.topic = topic
        self.last_flow = 0  # epoch ms of the last FLOW of any consumer
        self.msg_dropped = 0  # messages no consumer could take (Pulsar's msgDrop)
        # Nothing is ever pending, so the unacked limit cannot apply: 0 disables it. Failover
        # on a non-partitioned topic takes partition 0 (the first consumer in name order), not
        # the persistent topics' hash ring: NonPersistentSubscription "assume[s] index 0".
        self.members: ConsumerSet[NonPersistentConsumer] = ConsumerSet(
            topic=str(topic.name),
            partition=max(topic.partition, 0),
            max_unacked=0,
            auto_split=topic.settings.key_shared_auto_split,
            writable_only=True,
        )

    @property
    def consumers(self) -> list[NonPersistentConsumer]:
        """Attached consumers, in join order."""
        return self.members.consumers

    @property
    def active_consumer(self) -> NonPersistentConsumer | None:
        """The one consumer an Exclusive or Failover subscription delivers to, else None."""
        return self.members.active

    @property
    def sub_type(self) -> SubType:
        """The subscription type."""
        return self.members.sub_type

    def add(
        self,
        consumer: NonPersistentConsumer,
        sub_type: SubType,
        key_shared_meta: KeySharedMeta | None,
        max_consumers: int = 0,
    ) -> None:
        """Attach a consumer; ``max_consumers`` is the subscription's limit (0: none).

        Raises:
            ConsumerBusyError: Exclusive taken, another type / Key_Shared mode in use, or the
                consumer limit reached (``limits``).
            ConsumerAssignError: Key_Shared STICKY range conflict.
        """
        members = self.members
        members.check_join(self.name, sub_type, key_shared_meta)
        check_subscription_consumers(max_consumers, members.rules, len(members.consumers))
        members.add(consumer, key_shared_meta)

    def remove(self, consumer: NonPersistentConsumer) -> None:
        """Detach a consumer; the subscription ends with its last consumer."""
        consumer.closed = True
        self.members.remove(consumer)
        if not self.members.consumers:
            self.topic.subscription_ended(self)

    def unsubscribe(self, consumer: NonPersistentConsumer) -> None:
        """End the subscription.

        Raises:
            MetadataError: Other consumers are attached (as ``NonPersistentSubscription.
                doUnsubscribe`` answers).
        """
        if any(c is not consumer for c in self.members.consumers):
            raise MetadataError("Unconnected or shared consumer attempting to unsubscribe")
        self.remove(consumer)


class NonPersistentTopic(TopicBase[NonPersistentSubscription]):
    """A loaded ``non-persistent://`` topic.

    Args:
        name: The topic.
        ledger_id: The fixed ledger id of its message ids (unique per load, increasing).
        settings: Topic settings.
        producer_names: Generates names for producers that bring none.
        clock: For the stats timestamps.
        limits: Where its count limits come from (``limits``); None: the broker's only. Pulsar
            has no subscription-count check on non-persistent topics, so none here either.
    """

    def __init__(
        self,
        name: TopicName,
        *,
        ledger_id: int,
        settings: TopicSettings,
        producer_names: Callable[[], str],
        clock: Clock,
        limits: LimitResolver | None = None,
    ) -> None:
        self.counters = TopicCounters(created_ms=clock.wall_ms())
        super().__init__(name, settings, self.counters, producer_names, limits)
        self._clock = clock
        self._now_ms = 0  # of the SENDs being delivered: their consumers' lastConsumedTimestamp
        self.partition = name.partition_index
        self._ledger_id = ledger_id
        self._next_entry = 0
        self._last_batch_index = -1

    def as_persistent(self) -> None:
        """None: nothing of a non-persistent topic is stored (``handles.TopicHandle``)."""
        return None

    def wall_ms(self) -> int:
        """The clock's wall time in epoch milliseconds (stats timestamps)."""
        return self._clock.wall_ms()

    async def publish(
        self, producer: ProducerHandle, entry: bytes, entry_checksum: int | None, info: EntryInfo
    ) -> tuple[int, int]:
        """Deliver one entry to whoever can take it now; drop it for the others.

        Returns:
            The id given to the entry, ``(ledger_id, entry_id)``.

        Raises:
            ServiceNotReadyError: The producer or the topic was closed; drop the SEND.
        """
        return self.publish_many_nowait(producer, ((entry, entry_checksum, info),))[0]

    async def publish_many(
        self, producer: ProducerHandle, entries: Sequence[Pending]
    ) -> list[tuple[int, int]]:
        """``publish`` for a run of SENDs, in order (see ``Topic.publish_many``).

        Returns:
            The id given to each entry.

        Raises:
            ServiceNotReadyError: The producer or the topic was closed; drop the SENDs.
        """
        return self.publish_many_nowait(producer, entries)

    def publish_many_nowait(
        self, producer: ProducerHandle, entries: Sequence[Pending]
    ) -> list[tuple[int, int]]:
        """``publish_many`` without waiting (see ``Topic.publish_many_nowait``); the only path.

        Raises:
            ServiceNotReadyError: The producer or the topic was closed; drop the SENDs.
        """
        self._check_producer(producer)
        self._now_ms = self.wall_ms()  # one clock read per run of SENDs
        self.counters.last_publish_ms = self._now_ms
        deliver = self._deliver
        positions = [deliver(entry, crc, info) for entry, crc, info in entries]
        for entry, _, info in entries:
            producer.msg_in += info.num_messages
            producer.bytes_in += len(entry)
        return positions

    def _deliver(
        self, entry: bytes, entry_checksum: int | None, info: EntryInfo
    ) -> tuple[int, int]:
        entry_id = self._next_entry
        self._next_entry += 1
        self._last_batch_index = info.num_messages - 1 if info.batched else -1
        counters = self.counters
        n = info.num_messages
        counters.msg_in += n
        counters.bytes_in += len(entry)
        section: bytes | None = None
        for sub in self._subs.values():
            members = sub.members
            consumer = members.select(info)
            if consumer is None:
                if not members.picker.routes_nowhere(info):
                    counters.msg_dropped += n
                    sub.msg_dropped += n
                continue
            if section is None:
                section = payload_section(entry, entry_checksum)
            consumer.permits -= n
            consumer.sink.send_message(
                consumer.consumer_id, self._ledger_id, entry_id, self.partition, 0, (), section
            )
            counters.msg_out += n
            counters.bytes_out += len(section)
            consumer.msg_out += n
            consumer.bytes_out += len(section)
            consumer.last_consumed = self._now_ms
        return self._ledger_id, entry_id

    async def subscribe(
        self, request: SubscribeRequest, sink: ConsumerSink
    ) -> NonPersistentConsumer:
        """Attach a consumer; it receives only what is published from now on.

        Of the request, durability, positions and ``read_compacted`` mean nothing here.

        Raises:
            ConsumerBusyError: Exclusive taken, type mismatch, or a consumer limit reached.
            ConsumerAssignError: Key_Shared STICKY range conflict.
            ServiceNotReadyError: The topic is being unloaded.
        """
        self._check_open()
        limits = self.limits()
        check_topic_consumers(limits, self.consumer_count)
        name = request.subscription
        sub = self._subs.get(name)
        created = sub is None
        if sub is None:
            sub = NonPersistentSubscription(name, self)
        consumer = NonPersistentConsumer(request, sink, self.counters.next_handle_key(), sub)
        sub.add(
            consumer,
            request.sub_type,
            request.key_shared_meta,
            limits.max_consumers_per_subscription,
        )
        if created:
            self._subs[name] = sub
        return consumer

    def subscription_ended(self, sub: NonPersistentSubscription) -> None:
        """Forget a subscription whose last consumer left."""
        if self._subs.get(sub.name) is sub:
            del self._subs[sub.name]

    def last_message_id(self) -> tuple[int, int, int]:
        """The id of the last published entry; ``(ledger, -1, -1)`` before the first."""
        if self._next_entry == 0:
            return self._ledger_id, -1, -1
        return self._ledger_id, self._next_entry - 1, self._last_batch_index

    def delete_subscription(self, name: str, *, force: bool = False) -> None:
        """Delete a subscription (admin API); with ``force`` its consumers get CLOSE_CONSUMER.

        Raises:
            SubscriptionNotFoundError: No such subscription.
            ConsumerBusyError: Consumers are attached and ``force`` is false.
        """
        sub = self._existing(name)
        if sub.consumers and not force:
            raise ConsumerBusyError("Subscription has active connected consumers")
        for consumer in list(sub.consumers):
            sub.remove(consumer)
            consumer.sink.close_consumer(consumer.consumer_id)
        self._subs.pop(name, None)

    def stats(self) -> TopicStats:
        """A snapshot for metrics and admin."""
        c = self.counters
        last = (self._ledger_id, self._next_entry - 1)
        subs = tuple(
            SubscriptionStats(
                name=name,
                type=sub.members.rules.name,
                durable=False,
                consumers=len(sub.consumers),
                backlog=0,
                unacked=0,
                mark_delete=last,
                last_flow=sub.last_flow,
                consumer_stats=tuple(c.stats() for c in sub.consumers),
                msg_dropped=sub.msg_dropped,
            )
            for name, sub in sorted(self._subs.items())
        )
        return TopicStats(
            name=str(self.name),
            namespace=str(self.name.namespace),
            persistent=False,
            producers=self.producer_count,
            consumers=self.consumer_count,
            msg_in=c.msg_in,
            bytes_in=c.bytes_in,
            msg_out=c.msg_out,
            bytes_out=c.bytes_out,
            msg_dropped=c.msg_dropped,
            entries=0,
            backlog=0,
            subscriptions=subs,
            publisher_stats=tuple(p.stats() for p in self._producers.producers),
            created_ms=c.created_ms,
            last_publish_ms=c.last_publish_ms,
        )

    async def close(self, *, notify: Notify = True) -> None:
        """Close; every producer and consumer is told as ``notify`` says (CLOSE_*, §9)."""
        if self._closed:
            return
        self._closed = True
        self._producers.close_all(notify=notify)
        for sub in list(self._subs.values()):
            for consumer in list(sub.consumers):
                consumer.closed = True
                consumer_closed(notify, consumer.sink, consumer.consumer_id)
        self._subs.clear()
