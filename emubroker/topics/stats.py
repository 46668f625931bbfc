"""Counters and frozen statistics snapshots of topics and the topic service (for ``/metrics``).

Counters are running totals (Prometheus counters); rates are the scraper's business. Counters of a
persistent topic live with its stored state, so they survive unloads and never go backwards.
"""

from __future__ import annotations

import msgspec

from emubroker.ratelimit.readsize import ThrottleStats

__all__ = ["ServiceStats", "SubscriptionStats", "TopicCounters", "TopicStats"]


class TopicCounters:
    """Mutable running totals of one topic, updated on the hot path."""

    __slots__ = ("bytes_in", "bytes_out", "msg_dropped", "msg_in", "msg_out")

    def __init__(self) -> None:
        self.msg_in = 0
        self.bytes_in = 0
        self.msg_out = 0
        self.bytes_out = 0
        self.msg_dropped = 0


class SubscriptionStats(msgspec.Struct, frozen=True, kw_only=True):
    """One subscription.

    Attributes:
        name: Subscription name.
        type: ``Exclusive``, ``Shared``, ``Failover`` or ``Key_Shared``.
        durable: False for readers.
        consumers: Attached consumers.
        backlog: Entries not yet acknowledged (Pulsar's ``msgBacklog``).
        unacked: Entries delivered and not yet acknowledged.
        mark_delete: ``(ledger, entry)`` of the mark-delete position.
        msg_out: Messages delivered by this subscription, redeliveries included (since load).
        bytes_out: Bytes delivered by this subscription (since load).
        throttle: Dispatch-throttle events per level (``ratelimit.readsize.ThrottleStats``,
            Pulsar's ``SubscriptionStats`` names); None when throttling is not wired.
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
        msg_dropped: Non-persistent messages dropped for consumers without permits.
        entries: Entries stored.
        backlog: Sum of the subscriptions' backlogs.
        subscriptions: Per-subscription snapshots.
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
