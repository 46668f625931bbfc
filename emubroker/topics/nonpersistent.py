"""Non-persistent topics (``non-persistent://``): nothing stored, delivered as published.

Pulsar's ``NonPersistentTopic``: a published entry gets the next id of the topic's fixed ledger
and goes at once to the consumer its subscription's type picks; if that consumer has no permits
(or, for Shared, no consumer has any) the message is dropped and counted as dropped. Subscriptions
exist only while consumers are attached; acks and redelivery requests have nothing to act on, and
SEEK is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubroker.topics.entry import NONE_KEY
from emubroker.topics.keyshared import (
    AutoSplitSelector,
    KeySelector,
    StickySelector,
    sticky_key_hash,
)
from emubroker.topics.producer import ProducerHandle, ProducerRegistry
from emubroker.topics.stats import SubscriptionStats, TopicCounters, TopicStats
from emubroker.topics.subscription import SUB_TYPE_NAMES
from protocol.commands import KeySharedMode, SubType
from protocol.errors import ConsumerBusyError, NotAllowedError, ServiceNotReadyError
from protocol.framing import payload_section

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from emubroker.naming import TopicName
    from emubroker.topics.entry import EntryInfo
    from emubroker.topics.settings import TopicSettings
    from emubroker.topics.sinks import ConsumerSink, ProducerSink
    from protocol.commands import (
        AccessMode,
        AckType,
        InitialPosition,
        KeySharedMeta,
        MessageIdData,
    )

__all__ = ["NonPersistentConsumer", "NonPersistentSubscription", "NonPersistentTopic"]


class NonPersistentConsumer:
    """A consumer of a non-persistent subscription (implements ``ConsumerHandle``)."""

    __slots__ = ("_subscription", "closed", "consumer_id", "name", "permits", "priority", "sink")

    def __init__(
        self,
        consumer_id: int,
        name: str,
        sink: ConsumerSink,
        priority: int,
        subscription: NonPersistentSubscription,
    ) -> None:
        self.consumer_id = consumer_id
        self.name = name
        self.sink = sink
        self.priority = priority
        self.permits = 0
        self.closed = False
        self._subscription = subscription

    def flow(self, permits: int) -> None:
        """Add permits."""
        if not self.closed and permits > 0:
            self.permits += permits

    def ack(self, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        """Nothing is stored, so there is nothing to acknowledge."""

    def redeliver(self, ids: Sequence[MessageIdData] | None) -> None:
        """Nothing is stored, so there is nothing to redeliver."""

    async def seek(
        self, *, message_id: MessageIdData | None = None, publish_time: int | None = None
    ) -> None:
        """Refused.

        Raises:
            NotAllowedError: Always; a non-persistent topic has nothing to seek in.
        """
        raise NotAllowedError("seek is not supported on non-persistent topics")

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """The topic's last id, also as mark-delete: nothing is ever pending in storage."""
        last = self._subscription.topic.last_message_id()
        return last, (last[0], last[1])

    async def close(self) -> None:
        """Detach."""
        if not self.closed:
            self._subscription.remove(self)

    async def unsubscribe(self) -> None:
        """Detach and end the subscription.

        Raises:
            ConsumerBusyError: Other consumers are attached.
        """
        self._subscription.unsubscribe(self)


class NonPersistentSubscription:
    """Consumers of one subscription and the type-specific choice among them."""

    def __init__(self, name: str, topic: NonPersistentTopic, sub_type: SubType) -> None:
        self.name = name
        self.topic = topic
        self.sub_type = sub_type
        self.key_shared_mode: KeySharedMode | None = None
        self.consumers: list[NonPersistentConsumer] = []
        self._selector: KeySelector[NonPersistentConsumer] | None = None
        self._active: NonPersistentConsumer | None = None
        self._rr = 0

    def add(
        self,
        consumer: NonPersistentConsumer,
        sub_type: SubType,
        key_shared_meta: KeySharedMeta | None,
    ) -> None:
        """Attach a consumer.

        Raises:
            ConsumerBusyError: Exclusive taken or another type / Key_Shared mode in use.
            ConsumerAssignError: Key_Shared STICKY range conflict.
        """
        mode = key_shared_meta.key_shared_mode if key_shared_meta else KeySharedMode.AUTO_SPLIT
        if self.consumers:
            if sub_type != self.sub_type or (
                sub_type is SubType.KEY_SHARED and mode != self.key_shared_mode
            ):
                raise ConsumerBusyError(
                    f"Subscription '{self.name}' is of type {SUB_TYPE_NAMES[self.sub_type]}"
                )
            if sub_type is SubType.EXCLUSIVE:
                raise ConsumerBusyError(
                    f"Exclusive consumer is already connected to subscription '{self.name}'"
                )
        else:
            self.sub_type = sub_type
            self._selector = None
            self.key_shared_mode = None
            if sub_type is SubType.KEY_SHARED:
                self.key_shared_mode = mode
                self._selector = (
                    StickySelector()
                    if mode is KeySharedMode.STICKY
                    else AutoSplitSelector(self.topic.settings.key_shared_hash_points)
                )
        if self._selector is not None:
            ranges = key_shared_meta.hash_ranges if key_shared_meta else ()
            self._selector.add(consumer, consumer.name, ranges)
        self.consumers.append(consumer)
        self._update_active(joined=consumer)

    def remove(self, consumer: NonPersistentConsumer) -> None:
        """Detach a consumer; the subscription ends with its last consumer."""
        consumer.closed = True
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            if self._selector is not None:
                self._selector.remove(consumer)
            self._update_active()
        if not self.consumers:
            self.topic.subscription_ended(self)

    def unsubscribe(self, consumer: NonPersistentConsumer) -> None:
        """End the subscription.

        Raises:
            ConsumerBusyError: Other consumers are attached.
        """
        if any(c is not consumer for c in self.consumers):
            raise ConsumerBusyError(
                f"Unsubscribe of '{self.name}' refused: other consumers are connected"
            )
        self.remove(consumer)

    def _update_active(self, joined: NonPersistentConsumer | None = None) -> None:
        if self.sub_type not in (SubType.EXCLUSIVE, SubType.FAILOVER):
            return
        active: NonPersistentConsumer | None = None
        if self.consumers:
            ordered = sorted(self.consumers, key=lambda c: (c.priority, c.name))
            partition = self.topic.partition
            active = ordered[partition % len(ordered) if partition >= 0 else 0]
            if self.sub_type is SubType.EXCLUSIVE:
                active = self.consumers[0]
        failover = self.sub_type is SubType.FAILOVER
        if active is not self._active:
            self._active = active
            if failover:
                for c in self.consumers:
                    c.sink.active_consumer_change(c.consumer_id, c is active)
        elif failover and joined is not None:
            joined.sink.active_consumer_change(joined.consumer_id, joined is active)

    def pick(self, info: EntryInfo) -> NonPersistentConsumer | None:
        """The consumer that gets this entry now, or None to drop it."""
        if self._selector is not None:
            chosen = self._selector.select(sticky_key_hash(info.key or NONE_KEY))
        elif self.sub_type is SubType.SHARED:
            consumers = self.consumers
            n = len(consumers)
            for k in range(n):
                c = consumers[(self._rr + k) % n]
                if c.permits > 0:
                    self._rr = (self._rr + k + 1) % n
                    return c
            return None
        else:
            chosen = self._active
        return chosen if chosen is not None and chosen.permits > 0 else None


class NonPersistentTopic:
    """A loaded ``non-persistent://`` topic.

    Args:
        name: The topic.
        ledger_id: The fixed ledger id of its message ids (unique per load, increasing).
        settings: Topic settings.
        producer_names: Generates names for producers that bring none.
    """

    def __init__(
        self,
        name: TopicName,
        *,
        ledger_id: int,
        settings: TopicSettings,
        producer_names: Callable[[], str],
    ) -> None:
        self.name = name
        self.settings = settings
        self.partition = name.partition_index
        self.counters = TopicCounters()
        self._ledger_id = ledger_id
        self._next_entry = 0
        self._last_batch_index = -1
        self._producer_names = producer_names
        self._producers = ProducerRegistry(str(name))
        self._subs: dict[str, NonPersistentSubscription] = {}
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once unloaded or closed with the service."""
        return self._closed

    async def add_producer(
        self,
        producer_id: int,
        sink: ProducerSink,
        *,
        producer_name: str | None,
        user_provided_name: bool,
        access_mode: AccessMode,
        epoch: int,
        topic_epoch: int | None,
        on_waiting: Callable[[], None] | None = None,
    ) -> ProducerHandle:
        """Attach a producer (same rules as persistent topics).

        Raises:
            ProducerBusyError: Name in use, or an exclusive producer holds the topic.
            ProducerFencedError: Exclusive access conflict.
            ServiceNotReadyError: The topic is being unloaded.
        """
        del user_provided_name
        if self._closed:
            raise ServiceNotReadyError(f"Topic {self.name} is being unloaded")
        return await self._producers.add(
            producer_id,
            sink,
            producer_name=producer_name or self._producer_names(),
            access_mode=access_mode,
            epoch=epoch,
            topic_epoch=topic_epoch,
            on_waiting=on_waiting,
        )

    async def remove_producer(self, producer: ProducerHandle) -> None:
        """Detach a producer."""
        self._producers.remove(producer)

    async def publish(
        self, producer: ProducerHandle, entry: bytes, entry_checksum: int | None, info: EntryInfo
    ) -> tuple[int, int]:
        """Deliver one entry to whoever can take it now; drop it for the others.

        Returns:
            The id given to the entry, ``(ledger_id, entry_id)``.

        Raises:
            ServiceNotReadyError: The producer or the topic was closed; drop the SEND.
        """
        if producer.closed or self._closed:
            raise ServiceNotReadyError(
                f"Producer {producer.producer_name} on {self.name} is closed; SEND dropped"
            )
        entry_id = self._next_entry
        self._next_entry += 1
        self._last_batch_index = info.num_messages - 1 if info.batched else -1
        counters = self.counters
        n = info.num_messages
        counters.msg_in += n
        counters.bytes_in += len(entry)
        section: bytes | None = None
        for sub in self._subs.values():
            consumer = sub.pick(info)
            if consumer is None:
                counters.msg_dropped += n
                continue
            if section is None:
                section = payload_section(entry, entry_checksum)
            consumer.permits -= n
            consumer.sink.send_message(
                consumer.consumer_id, self._ledger_id, entry_id, self.partition, 0, (), section
            )
            counters.msg_out += n
            counters.bytes_out += len(section)
        return self._ledger_id, entry_id

    async def subscribe(
        self,
        *,
        subscription: str,
        sub_type: SubType,
        consumer_id: int,
        sink: ConsumerSink,
        consumer_name: str,
        durable: bool,
        initial_position: InitialPosition,
        start_message_id: MessageIdData | None,
        priority_level: int,
        key_shared_meta: KeySharedMeta | None,
        read_compacted: bool,
        partition: int,
    ) -> NonPersistentConsumer:
        """Attach a consumer; it receives only what is published from now on.

        Raises:
            ConsumerBusyError: Exclusive taken, or type mismatch.
            ConsumerAssignError: Key_Shared STICKY range conflict.
            ServiceNotReadyError: The topic is being unloaded.
        """
        del durable, initial_position, start_message_id, read_compacted, partition
        if self._closed:
            raise ServiceNotReadyError(f"Topic {self.name} is being unloaded")
        sub = self._subs.get(subscription)
        created = sub is None
        if sub is None:
            sub = NonPersistentSubscription(subscription, self, sub_type)
        consumer = NonPersistentConsumer(consumer_id, consumer_name, sink, priority_level, sub)
        sub.add(consumer, sub_type, key_shared_meta)
        if created:
            self._subs[subscription] = sub
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

    def subscriptions(self) -> list[str]:
        """Names of the subscriptions, sorted."""
        return sorted(self._subs)

    @property
    def producer_count(self) -> int:
        """Attached producers."""
        return len(self._producers.producers)

    @property
    def consumer_count(self) -> int:
        """Attached consumers."""
        return sum(len(sub.consumers) for sub in self._subs.values())

    def stats(self) -> TopicStats:
        """A snapshot for metrics and admin."""
        c = self.counters
        last = (self._ledger_id, self._next_entry - 1)
        subs = tuple(
            SubscriptionStats(
                name=name,
                type=SUB_TYPE_NAMES[sub.sub_type],
                durable=False,
                consumers=len(sub.consumers),
                backlog=0,
                unacked=0,
                mark_delete=last,
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
        )

    async def close(self, *, notify: bool = True) -> None:
        """Close; with ``notify`` every producer and consumer gets CLOSE_* (§9)."""
        if self._closed:
            return
        self._closed = True
        self._producers.close_all(notify=notify)
        for sub in list(self._subs.values()):
            for consumer in list(sub.consumers):
                consumer.closed = True
                if notify:
                    consumer.sink.close_consumer(consumer.consumer_id)
        self._subs.clear()
