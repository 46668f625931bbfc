"""Counters and frozen statistics snapshots of topics and the topic service (for ``/metrics``).

Counters are running totals (Prometheus counters); rates are the scraper's business. Counters of a
persistent topic live with its stored state, so they survive unloads and never go backwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import msgspec

from emubroker.ratelimit.readsize import ThrottleStats
from emubroker.topics.requests import ClientInfo

if TYPE_CHECKING:
    from emubroker.naming import TopicName

__all__ = [
    "ConsumerActivity",
    "ConsumerStats",
    "PublisherStats",
    "ServiceStats",
    "SubscriptionStats",
    "TopicCounters",
    "TopicLoad",
    "TopicStats",
]


class TopicCounters:
    """Mutable running totals of one topic, updated on the hot path."""

    __slots__ = (
        "_handles",
        "bytes_in",
        "bytes_out",
        "created_ms",
        "last_publish_ms",
        "msg_dropped",
        "msg_in",
        "msg_out",
    )

    def __init__(self, created_ms: int = 0) -> None:
        # Epoch ms of the injected clock: when this broker created or first opened the topic's
        # state, and when a message was last stored (admin stats' topicCreationTimeStamp and
        # lastPublishTimeStamp; 0: never).
        self.created_ms = created_ms
        self.last_publish_ms = 0
        self.msg_in = 0
        self.bytes_in = 0
        self.msg_out = 0
        self.bytes_out = 0
        self.msg_dropped = 0
        self._handles = 0

    def next_handle_key(self) -> int:
        """A number no other producer or consumer of this topic had (the key of its rates).

        It lives with the counters, so it keeps counting across unloads of a persistent topic:
        a consumer of the reloaded topic never inherits the rate window of an older one.
        """
        self._handles += 1
        return self._handles


class ConsumerStats(msgspec.Struct, frozen=True, kw_only=True):
    """One consumer (Pulsar's ``ConsumerStatsImpl`` counters).

    Attributes:
        key: Unique among the topic's producers and consumers (``TopicCounters``); keys rates.
        name: The consumer name.
        consumer_id: The client-chosen id.
        permits: Messages it may still receive (never below 0).
        unacked: Messages delivered to it and not yet acknowledged.
        msg_out: Messages delivered to it, redeliveries included.
        bytes_out: Bytes delivered to it.
        msg_redeliver: Messages it asked to have redelivered (Shared and Key_Shared only).
        msg_acked: Messages its ACKs settled (a cumulative ACK counts 1, as in Pulsar).
        last_consumed: Epoch ms of the last dispatch to it, 0 before the first.
        last_acked: Epoch ms of its last ACK, 0 before the first.
        last_flow: Epoch ms of its last FLOW, 0 before the first.
        first_flow: Epoch ms of its first FLOW, 0 before the first.
        metadata: ``CommandSubscribe.metadata``.
        client: Who opened it.
        blocked_on_unacked: It gets nothing until acks take it down to half of
            ``maxUnackedMessagesPerConsumer`` (Pulsar's ``blockedConsumerOnUnackedMsgs``).
        draining: Key_Shared draining hashes it holds, their pending messages and the hashes it
            cleared (``DrainingHashes.summary``; Pulsar's ``drainingHashes*`` counts).
    """

    key: int
    name: str
    consumer_id: int
    permits: int
    unacked: int
    msg_out: int = 0
    bytes_out: int = 0
    msg_redeliver: int = 0
    msg_acked: int = 0
    last_consumed: int = 0
    last_acked: int = 0
    last_flow: int = 0
    first_flow: int = 0
    metadata: dict[str, str] = {}
    blocked_on_unacked: bool = False
    draining: tuple[int, int, int] = (0, 0, 0)
    client: ClientInfo = ClientInfo()


class ConsumerActivity:
    """What one consumer did, for admin stats: counters and epoch-ms timestamps.

    The base of both consumer classes (persistent and non-persistent); the dispatchers add to
    ``msg_out`` and ``bytes_out`` directly, once per entry.

    Attributes:
        metadata: ``CommandSubscribe.metadata`` (admin stats echo it).
        client: Who opened it (admin stats).
        stats_key: Unique among its topic's producers and consumers (keys its rates).
        msg_out: Messages delivered to it, redeliveries included.
        bytes_out: Bytes delivered to it.
        last_consumed: Epoch ms of the dispatch round that last sent it something, else 0.
        msg_redeliver: Messages it asked to have redelivered (Shared and Key_Shared only).
        msg_acked: Messages its ACKs settled (a cumulative ACK counts 1, as in Pulsar).
        last_acked: Epoch ms of its last ACK, else 0.
        first_flow: Epoch ms of its first FLOW, else 0.
        last_flow: Epoch ms of its last FLOW, else 0.
    """

    __slots__ = (
        "bytes_out",
        "client",
        "first_flow",
        "last_acked",
        "last_consumed",
        "last_flow",
        "metadata",
        "msg_acked",
        "msg_out",
        "msg_redeliver",
        "stats_key",
    )

    def __init__(self) -> None:
        self.metadata: dict[str, str] = {}
        self.client = ClientInfo()
        self.stats_key = 0
        self.msg_out = 0
        self.bytes_out = 0
        self.last_consumed = 0
        self.msg_redeliver = 0
        self.msg_acked = 0
        self.last_acked = 0
        self.first_flow = 0
        self.last_flow = 0

    def flowed(self, now_ms: int) -> None:
        """Note a FLOW at ``now_ms``."""
        self.first_flow = self.first_flow or now_ms
        self.last_flow = now_ms

    def snapshot(
        self,
        name: str,
        consumer_id: int,
        permits: int,
        unacked: int,
        *,
        blocked_on_unacked: bool = False,
        draining: tuple[int, int, int] = (0, 0, 0),
    ) -> ConsumerStats:
        """The counters with the consumer's identity and state, for metrics and admin."""
        return ConsumerStats(
            key=self.stats_key,
            name=name,
            consumer_id=consumer_id,
            permits=max(permits, 0),
            unacked=unacked,
            msg_out=self.msg_out,
            bytes_out=self.bytes_out,
            msg_redeliver=self.msg_redeliver,
            msg_acked=self.msg_acked,
            last_consumed=self.last_consumed,
            last_acked=self.last_acked,
            last_flow=self.last_flow,
            first_flow=self.first_flow,
            metadata=self.metadata,
            blocked_on_unacked=blocked_on_unacked,
            draining=draining,
            client=self.client,
        )


class PublisherStats(msgspec.Struct, frozen=True, kw_only=True):
    """One producer (Pulsar's ``PublisherStatsImpl`` counters).

    Attributes:
        key: Unique among the topic's producers and consumers (``TopicCounters``); keys rates.
        name: The producer name.
        producer_id: The client-chosen id.
        msg_in: Messages it published (a batch of N counts N).
        bytes_in: Entry bytes it published.
    """

    key: int
    name: str
    producer_id: int
    msg_in: int = 0
    bytes_in: int = 0


class SubscriptionStats(msgspec.Struct, frozen=True, kw_only=True):
    """One subscription.

    Attributes:
        name: Subscription name.
        type: ``Exclusive``, ``Shared``, ``Failover`` or ``Key_Shared``.
        durable: False for readers.
        consumers: Attached consumers.
        backlog: Entries not yet acknowledged (Pulsar's ``msgBacklog``).
        unacked: Messages its consumers hold unacknowledged (Shared and Key_Shared; 0 otherwise).
        mark_delete: ``(ledger, entry)`` of the mark-delete position.
        msg_out: Messages delivered by this subscription, redeliveries included (since load).
        bytes_out: Bytes delivered by this subscription (since load).
        throttle: Dispatch-throttle events per level (``ratelimit.readsize.ThrottleStats``,
            Pulsar's ``SubscriptionStats`` names); None when throttling is not wired.
        delayed: Entries held back for their ``deliver_at_time`` (Pulsar's ``msgDelayed``).
        last_flow: Epoch ms of the last FLOW of any consumer, 0 before the first.
        last_mark_delete_advanced: Epoch ms the mark-delete position last moved on an ACK.
        consumer_stats: Per-consumer snapshots, in join order.
        msg_expired: Entries expired by the message TTL or ``expireMessages`` (``expiry``).
        last_expire: Epoch ms of the last expiry run on it, 0 before the first.
        msg_dropped: Non-persistent messages dropped because no consumer could take them (no
            permits, or its connection not writable); Pulsar's ``msgDrop``, behind
            ``msgDropRate``.
        in_replay: Entries waiting in the dispatcher's replay set (Pulsar's ``msgInReplay``).
        draining: Key_Shared draining hashes, their pending messages, and the hashes cleared
            since the subscription opened (Pulsar's ``drainingHashes*`` counts).
    """

    name: str
    type: str
    durable: bool
    consumers: int
    backlog: int
    unacked: int
    mark_delete: tuple[int, int]
    msg_out: int = 0
    bytes_out: int = 0
    throttle: ThrottleStats | None = None
    delayed: int = 0
    last_flow: int = 0
    last_mark_delete_advanced: int = 0
    consumer_stats: tuple[ConsumerStats, ...] = ()
    msg_expired: int = 0
    last_expire: int = 0
    msg_dropped: int = 0
    in_replay: int = 0
    draining: tuple[int, int, int] = (0, 0, 0)


class TopicLoad(NamedTuple):
    """A loaded topic's running counters and attachments: what the load report samples.

    A snapshot of every topic's full statistics (subscriptions, backlogs, consumers) each
    minute cost the load reporter of a broker with hundreds of partitions most of its time.
    """

    name: TopicName
    msg_in: int
    bytes_in: int
    msg_out: int
    bytes_out: int
    producers: int
    consumers: int


class TopicStats(msgspec.Struct, frozen=True, kw_only=True):
    """One topic.

    Attributes:
        name: The complete topic name.
        namespace: ``tenant/namespace``.
        persistent: False for ``non-persistent://`` topics.
        producers: Attached producers.
        consumers: Attached consumers over all subscriptions.
        msg_in: Messages published (a batch of N counts N).
        bytes_in: Entry bytes published.
        msg_out: Messages delivered, redeliveries included.
        bytes_out: Bytes delivered.
        msg_dropped: Non-persistent messages dropped, summed over the subscriptions.
        entries: Entries stored.
        backlog: Sum of the subscriptions' backlogs.
        subscriptions: Per-subscription snapshots.
        publisher_stats: Per-producer snapshots, oldest first.
        created_ms: When the topic's state was created or first opened here (epoch ms).
        last_publish_ms: When a message was last published (epoch ms, 0: never).
    """

    name: str
    namespace: str
    persistent: bool
    producers: int
    consumers: int
    msg_in: int
    bytes_in: int
    msg_out: int
    bytes_out: int
    msg_dropped: int
    entries: int
    backlog: int
    subscriptions: tuple[SubscriptionStats, ...]
    publisher_stats: tuple[PublisherStats, ...] = ()
    created_ms: int = 0
    last_publish_ms: int = 0


class ServiceStats(msgspec.Struct, frozen=True, kw_only=True):
    """Every loaded topic of a topic service.

    Attributes:
        topics_count: Loaded topics.
        producers: Attached producers.
        consumers: Attached consumers.
        subscriptions: Subscriptions of loaded topics.
        topics: Per-topic snapshots, sorted by name.
    """

    topics_count: int
    producers: int
    consumers: int
    subscriptions: int
    topics: tuple[TopicStats, ...]
