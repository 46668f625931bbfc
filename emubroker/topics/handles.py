"""What the network side and the admin API hold from the topic layer: handles.

:class:`TopicHandle`, :class:`SubscriptionView` and :class:`ConsumerHandle` are Protocols: the
face both topic kinds show (persistent ``topic.Topic``, ``nonpersistent.NonPersistentTopic``),
so that callers never ask which kind they hold. What only a stored topic has (its managed
ledger, cursors, compaction, expiry) is reached through :meth:`TopicHandle.as_persistent`.
``ProducerHandle`` is one concrete record (see ``producer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from emubroker.naming import TopicName
    from emubroker.topics.dedup import Pending
    from emubroker.topics.limits import CountLimits
    from emubroker.topics.producer import OnWaiting, ProducerHandle
    from emubroker.topics.requests import ProducerRequest, SubscribeRequest
    from emubroker.topics.sinks import ConsumerSink, Notify, ProducerSink
    from emubroker.topics.stats import TopicLoad, TopicStats
    from emubroker.topics.topic import Topic
    from protocol.commands import AckType, MessageIdData

__all__ = ["ConsumerHandle", "SubscriptionView", "TopicHandle"]


class ConsumerHandle(Protocol):
    """One attached consumer, as the session sees it (spec/wire-protocol.md §7)."""

    @property
    def consumer_id(self) -> int:
        """The client-chosen consumer id."""
        ...

    @property
    def name(self) -> str:
        """The consumer name."""
        ...

    @property
    def closed(self) -> bool:
        """True once closed by the client, the broker (seek, unload) or an unsubscribe."""
        ...

    def flow(self, permits: int) -> None:
        """Grant ``permits`` more messages (FLOW); a batch of N takes N."""
        ...

    def resume_delivery(self) -> None:
        """Its connection is writable again: deliver what was held back while it was not."""
        ...

    def ack(self, ack_type: AckType, ids: Sequence[MessageIdData]) -> None:
        """Apply an ACK; odd ids (before the first entry, unknown ledgers) are no-ops."""
        ...

    def redeliver(self, ids: Sequence[MessageIdData] | None) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES; None or empty means all unacked of this consumer."""
        ...

    async def seek(
        self, *, message_id: MessageIdData | None = None, publish_time: int | None = None
    ) -> None:
        """SEEK; closes every consumer of the subscription before returning."""
        ...

    def last_message_id(self) -> tuple[tuple[int, int, int], tuple[int, int]]:
        """``((ledger, entry, batch_index) of the topic's last entry, mark-delete position)``.

        Raises:
            BrokerError: The topic cannot tell (non-persistent topics, as in Pulsar).
        """
        ...

    async def close(self) -> None:
        """Detach (CLOSE_CONSUMER or connection drop); unacked messages become redeliverable."""
        ...

    async def unsubscribe(self) -> None:
        """Delete the subscription.

        Raises:
            MetadataError: Other consumers are still attached (Pulsar's answer).
        """
        ...


class SubscriptionView(Protocol):
    """A subscription of either topic kind, as the admin API looks at it."""

    @property
    def name(self) -> str:
        """The subscription name."""
        ...

    @property
    def consumers(self) -> Sequence[ConsumerHandle]:
        """Attached consumers, in join order."""
        ...

    @property
    def active_consumer(self) -> ConsumerHandle | None:
        """The one consumer a single-active-consumer type delivers to, else None."""
        ...


class TopicHandle(Protocol):
    """A loaded topic of either kind: what the handlers and the admin API call."""

    @property
    def name(self) -> TopicName:
        """A non-partitioned topic or one partition."""
        ...

    @property
    def closed(self) -> bool:
        """True once unloaded or closed with the service."""
        ...

    @property
    def producer_count(self) -> int:
        """Attached producers."""
        ...

    @property
    def consumer_count(self) -> int:
        """Attached consumers over all subscriptions."""
        ...

    def as_persistent(self) -> Topic | None:
        """This topic with its stored state (ledger, cursors), or None when nothing is stored."""
        ...

    def limits(self) -> CountLimits:
        """The count limits in force now (``limits``)."""
        ...

    async def add_producer(
        self, request: ProducerRequest, sink: ProducerSink, *, on_waiting: OnWaiting = None
    ) -> ProducerHandle:
        """Attach a producer (``producer``); ``on_waiting`` hears that it waits (§6.1).

        Raises:
            ProducerBusyError: Name in use, an exclusive producer holds the topic, or the
                producer limit is reached.
            ProducerFencedError: Exclusive access conflict or stale topic epoch.
            ServiceNotReadyError: The topic is being unloaded.
        """
        ...

    async def remove_producer(self, producer: ProducerHandle) -> None:
        """Detach a producer (CLOSE_PRODUCER or connection drop)."""
        ...

    async def publish_many(
        self, producer: ProducerHandle, entries: Sequence[Pending]
    ) -> list[tuple[int, int]]:
        """Publish a run of SENDs in order; the ``(ledger, entry)`` of each (§6.2).

        Raises:
            PersistenceError: Storage refused the first entry.
            ServiceNotReadyError: The producer or the topic was closed: drop the SENDs.
        """
        ...

    def publish_many_nowait(
        self, producer: ProducerHandle, entries: Sequence[Pending]
    ) -> list[tuple[int, int]]:
        """``publish_many`` without waiting.

        Raises:
            WouldBlock: Storage must be awaited: use ``publish_many``.
            PersistenceError: Storage refused the first entry.
            ServiceNotReadyError: The producer or the topic was closed: drop the SENDs.
        """
        ...

    async def subscribe(self, request: SubscribeRequest, sink: ConsumerSink) -> ConsumerHandle:
        """Attach a consumer, creating the subscription if needed (§7.1).

        Raises:
            ConsumerBusyError: Exclusive taken, type mismatch, or a consumer limit reached.
            NotAllowedError: Durable/non-durable clash, or another refusal of the topic kind.
            ConsumerAssignError: Key_Shared STICKY range conflict.
            ServiceNotReadyError: The topic is being unloaded.
        """
        ...

    def subscriptions(self) -> list[str]:
        """Names of the subscriptions, sorted."""
        ...

    def subscription(self, name: str) -> SubscriptionView | None:
        """A subscription by name."""
        ...

    def delete_subscription(self, name: str, *, force: bool = False) -> None:
        """Delete a subscription; with ``force`` its consumers are disconnected first.

        Raises:
            SubscriptionNotFoundError: No such subscription.
            ConsumerBusyError: Consumers are attached and ``force`` is false.
        """
        ...

    def producers(self) -> list[ProducerHandle]:
        """The attached producers, oldest first."""
        ...

    def last_message_id(self) -> tuple[int, int, int]:
        """``(ledger, entry, batch_index)`` of the last entry; entry -1 when there is none."""
        ...

    def stats(self) -> TopicStats:
        """A snapshot for metrics and admin."""
        ...

    def load(self) -> TopicLoad:
        """Its running counters and attachments (the load report's sample)."""
        ...

    async def close(self, *, notify: Notify = True) -> None:
        """Close; every producer and consumer is told as ``notify`` says (CLOSE_*, §9)."""
        ...
