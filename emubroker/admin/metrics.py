"""``GET /metrics``: Prometheus text exposition with Pulsar's metric names and labels.

DESIGN.md decision 4: never invent a name Pulsar has under another name. Everything here is what
a Pulsar broker exports with ``exposeTopicLevelMetricsInPrometheus=true`` (its default):

* namespace level: ``pulsar_topics_count``;
* topic level (labels ``cluster``, ``namespace``, ``topic``): ``pulsar_subscriptions_count``,
  ``pulsar_producers_count``, ``pulsar_consumers_count``, ``pulsar_rate_in``/``_out`` (msg/s),
  ``pulsar_throughput_in``/``_out`` (bytes/s), ``pulsar_msg_backlog``,
  ``pulsar_in_messages_total``, ``pulsar_in_bytes_total``, ``pulsar_out_messages_total``,
  ``pulsar_out_bytes_total``;
* subscription level (plus ``subscription``): ``pulsar_subscription_back_log``,
  ``pulsar_subscription_msg_rate_out``, ``pulsar_subscription_msg_throughput_out``,
  ``pulsar_subscription_unacked_messages``, ``pulsar_subscription_consumers_count``,
  ``pulsar_subscription_msg_rate_expired``, ``pulsar_subscription_total_msg_expired``,
  ``pulsar_subscription_msg_drop_rate`` (non-persistent messages dropped per second),
  ``pulsar_subscription_dispatch_throttled_msg_events`` and ``..._bytes_events`` (counters with a
  ``reason`` label, ``broker``/``topic``/``subscription``: reads the level's limiter cut).

Pulsar's broker exports nothing about the leader election (only its functions worker has
``pulsar_function_worker_is_leader``, about workers), so the election's two figures carry our own
prefix: ``emubroker_leader_election_is_leader`` (gauge, 1 on the leader) and
``emubroker_leader_election_changes_total`` (counter: times this broker saw the leader become a
different broker, the first leader included).

The load manager's ``pulsar_lb_*`` usages (and ``pulsar_bundle_*``) come from
``metrics_loadbalance``.

Pulsar computes rates from counter deltas over its stats interval. :class:`RateTracker` takes the
delta between two samples at least ``min_interval`` apart, reusing the last rates for samples that
come sooner, so rates do not jitter when several scrapers poll; the REST ``stats`` endpoints read
the same tracker, so ``msgRateIn`` and ``pulsar_rate_in`` agree. The same windows give the
per-producer and per-consumer rates of the REST ``stats`` (Pulsar's ``PublisherStats`` and
``ConsumerStats`` rates, computed at each stats update in Pulsar too).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final, NamedTuple

from emubroker.loadbalance.leader.election import LeaderElectionState

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from emubroker.loadbalance.leader.election import LeaderElectionStatistics
    from emubroker.topics.stats import ServiceStats, SubscriptionStats, TopicStats
    from protocol.clock import Clock

__all__ = [
    "CONTENT_TYPE",
    "MetricsCollector",
    "RateTracker",
    "Rates",
    "render_leader_metrics",
    "render_metrics",
]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus' text exposition format, version 0.0.4."""


class Rates(NamedTuple):
    """Per-second rates over the last sampling window.

    ``msg_redeliver`` and ``msg_ack`` (messages redelivered on request, messages acknowledged)
    are kept for consumers only, ``msg_expired`` (entries expired by the message TTL, Pulsar's
    ``msgRateExpired``) and ``msg_dropped`` (non-persistent messages dropped, ``msgDropRate``)
    for subscriptions only.
    """

    msg_in: float = 0.0
    msg_out: float = 0.0
    bytes_in: float = 0.0
    bytes_out: float = 0.0
    msg_redeliver: float = 0.0
    msg_ack: float = 0.0
    msg_expired: float = 0.0
    msg_dropped: float = 0.0


_ZERO: Final = Rates()
_NO_COUNTS: Final = (0,) * len(Rates._fields)

# A tracker key: (topic, subscription or "", producer/consumer ``stats_key`` or 0). Topics have
# ("t", "", 0), subscriptions ("t", "s", 0), consumers ("t", "s", k), producers ("t", "", k):
# subscription names are never empty and ``stats_key`` starts at 1.
_Key = tuple[str, str, int]

_TOPIC_GAUGES: Final[tuple[tuple[str, Callable[[TopicStats], float]], ...]] = (
    ("pulsar_subscriptions_count", lambda t: len(t.subscriptions)),
    ("pulsar_producers_count", lambda t: t.producers),
    ("pulsar_consumers_count", lambda t: t.consumers),
    ("pulsar_msg_backlog", lambda t: t.backlog),
)
_TOPIC_COUNTERS: Final[tuple[tuple[str, Callable[[TopicStats], float]], ...]] = (
    ("pulsar_in_messages_total", lambda t: t.msg_in),
    ("pulsar_in_bytes_total", lambda t: t.bytes_in),
    ("pulsar_out_messages_total", lambda t: t.msg_out),
    ("pulsar_out_bytes_total", lambda t: t.bytes_out),
)
_TOPIC_RATES: Final[tuple[tuple[str, Callable[[Rates], float]], ...]] = (
    ("pulsar_rate_in", lambda r: r.msg_in),
    ("pulsar_rate_out", lambda r: r.msg_out),
    ("pulsar_throughput_in", lambda r: r.bytes_in),
    ("pulsar_throughput_out", lambda r: r.bytes_out),
)
_SUB_GAUGES: Final[tuple[tuple[str, Callable[[SubscriptionStats, Rates], float]], ...]] = (
    ("pulsar_subscription_back_log", lambda s, r: s.backlog),
    ("pulsar_subscription_msg_rate_out", lambda s, r: r.msg_out),
    ("pulsar_subscription_msg_throughput_out", lambda s, r: r.bytes_out),
    ("pulsar_subscription_unacked_messages", lambda s, r: s.unacked),
    ("pulsar_subscription_consumers_count", lambda s, r: s.consumers),
    ("pulsar_subscription_msg_rate_expired", lambda s, r: r.msg_expired),
    ("pulsar_subscription_total_msg_expired", lambda s, r: s.msg_expired),
    ("pulsar_subscription_msg_drop_rate", lambda s, r: r.msg_dropped),
)


class RateTracker:
    """Rates of every topic and subscription from successive statistics snapshots.

    Args:
        clock: Measures the time between samples.
        min_interval: Seconds a sampling window lasts at least.
    """

    def __init__(self, *, clock: Clock, min_interval: float = 1.0) -> None:
        self._clock = clock
        self._min_interval = min_interval
        self._time: float | None = None
        self._counters: dict[_Key, tuple[int, ...]] = {}
        self._rates: dict[_Key, Rates] = {}

    def sample(self, stats: ServiceStats) -> None:
        """Take a snapshot; rates change once ``min_interval`` passed since the last window."""
        now = self._clock.now()
        counters: dict[_Key, tuple[int, ...]] = {}
        for topic in stats.topics:
            name = topic.name
            counters[name, "", 0] = (
                topic.msg_in,
                topic.msg_out,
                topic.bytes_in,
                topic.bytes_out,
                0,
                0,
                0,
                0,
            )
            for p in topic.publisher_stats:
                counters[name, "", p.key] = (p.msg_in, 0, p.bytes_in, 0, 0, 0, 0, 0)
            for sub in topic.subscriptions:
                counters[name, sub.name, 0] = (
                    0,
                    sub.msg_out,
                    0,
                    sub.bytes_out,
                    0,
                    0,
                    sub.msg_expired,
                    sub.msg_dropped,
                )
                for c in sub.consumer_stats:
                    counters[name, sub.name, c.key] = (
                        0,
                        c.msg_out,
                        0,
                        c.bytes_out,
                        c.msg_redeliver,
                        c.msg_acked,
                        0,
                        0,
                    )
        if self._time is None:
            self._time, self._counters = now, counters
            return
        elapsed = now - self._time
        if elapsed < self._min_interval:
            return
        rates: dict[_Key, Rates] = {}
        for key, new in counters.items():
            old = self._counters.get(key, _NO_COUNTS)
            # Counters restart when a subscription is reloaded: a negative delta counts as 0.
            rates[key] = Rates(*(max(n - o, 0) / elapsed for n, o in zip(new, old, strict=True)))
        self._time, self._counters, self._rates = now, counters, rates

    def topic(self, name: str) -> Rates:
        """A topic's rates (zero before two samples)."""
        return self._rates.get((name, "", 0), _ZERO)

    def subscription(self, topic: str, name: str) -> Rates:
        """A subscription's out, expiry and drop rates (its in rates are always zero)."""
        return self._rates.get((topic, name, 0), _ZERO)

    def publisher(self, topic: str, key: int) -> Rates:
        """A producer's in rates, by its ``stats_key`` (zero until it was in two samples)."""
        return self._rates.get((topic, "", key), _ZERO)

    def consumer(self, topic: str, subscription: str, key: int) -> Rates:
        """A consumer's out, redelivery and ack rates, by its ``stats_key``."""
        return self._rates.get((topic, subscription, key), _ZERO)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _number(value: int | float) -> str:
    """A sample value as the text format spells it: Go's float syntax, ``+Inf``/``-Inf``/``NaN``.

    Python's ``repr`` gives ``inf``/``-inf``/``nan``, which the exposition format does not name.
    """
    if not isinstance(value, float):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def render_metrics(stats: ServiceStats, *, cluster: str, rates: RateTracker | None = None) -> str:
    """Render a statistics snapshot as Prometheus text.

    Args:
        stats: ``TopicService.statistics()``.
        cluster: The ``cluster`` label (``clusterName``).
        rates: Where rates come from; without it every rate is 0.

    Returns:
        The exposition text, one ``# TYPE`` line per metric family.
    """
    lines: list[str] = []
    by_namespace: dict[str, int] = {}
    for topic in stats.topics:
        by_namespace[topic.namespace] = by_namespace.get(topic.namespace, 0) + 1
    lines.append("# TYPE pulsar_topics_count gauge")
    for namespace, count in sorted(by_namespace.items()):
        lines.append(f"pulsar_topics_count{_labels(cluster=cluster, namespace=namespace)} {count}")

    def family(name: str, kind: str, values: Iterable[tuple[str, float]]) -> None:
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{labels} {_number(value)}" for labels, value in values)

    topic_labels = [
        (topic, _labels(cluster=cluster, namespace=topic.namespace, topic=topic.name))
        for topic in stats.topics
    ]
    for name, get in _TOPIC_GAUGES:
        family(name, "gauge", ((labels, get(topic)) for topic, labels in topic_labels))
    for name, rate in _TOPIC_RATES:
        family(
            name,
            "gauge",
            (
                (labels, rate(rates.topic(topic.name) if rates else _ZERO))
                for topic, labels in topic_labels
            ),
        )
    for name, get in _TOPIC_COUNTERS:
        family(name, "counter", ((labels, get(topic)) for topic, labels in topic_labels))
    subs = [
        (
            topic,
            sub,
            _labels(
                cluster=cluster, namespace=topic.namespace, topic=topic.name, subscription=sub.name
            ),
        )
        for topic in stats.topics
        for sub in topic.subscriptions
    ]
    for name, value in _SUB_GAUGES:
        family(
            name,
            "gauge",
            (
                (labels, value(sub, rates.subscription(topic.name, sub.name) if rates else _ZERO))
                for topic, sub, labels in subs
            ),
        )
    throttled = [(topic, sub) for topic, sub, _ in subs if sub.throttle is not None]
    for name, fields in _THROTTLE_EVENTS:
        family(
            name,
            "counter",
            (
                (
                    _labels(
                        cluster=cluster,
                        namespace=topic.namespace,
                        topic=topic.name,
                        subscription=sub.name,
                        reason=reason,
                    ),
                    getattr(sub.throttle, field),
                )
                for topic, sub in throttled
                for reason, field in fields
            ),
        )
    lines.append("")
    return "\n".join(lines)


_THROTTLE_EVENTS: Final = (
    (
        "pulsar_subscription_dispatch_throttled_msg_events",
        (
            ("broker", "dispatchThrottledMsgEventsByBrokerLimit"),
            ("topic", "dispatchThrottledMsgEventsByTopicLimit"),
            ("subscription", "dispatchThrottledMsgEventsBySubscriptionLimit"),
        ),
    ),
    (
        "pulsar_subscription_dispatch_throttled_bytes_events",
        (
            ("broker", "dispatchThrottledBytesEventsByBrokerLimit"),
            ("topic", "dispatchThrottledBytesEventsByTopicLimit"),
            ("subscription", "dispatchThrottledBytesEventsBySubscriptionLimit"),
        ),
    ),
)


def render_leader_metrics(stats: LeaderElectionStatistics, *, cluster: str) -> str:
    """The leader election's figures as Prometheus text (see the module docstring)."""
    labels = _labels(cluster=cluster)
    leading = int(stats.state is LeaderElectionState.LEADING)
    return (
        "# TYPE emubroker_leader_election_is_leader gauge\n"
        f"emubroker_leader_election_is_leader{labels} {leading}\n"
        "# TYPE emubroker_leader_election_changes_total counter\n"
        f"emubroker_leader_election_changes_total{labels} {stats.leader_changes}\n"
    )


class MetricsCollector:
    """Turns statistics snapshots into Prometheus text with rates between samples.

    Args:
        statistics: Returns the current ``ServiceStats`` (``TopicService.statistics``).
        clock: Measures the time between samples (for a tracker of its own).
        cluster: The ``cluster`` label.
        min_interval: Seconds between rate samples (for a tracker of its own).
        tracker: A rate tracker shared with the REST stats; by default one of its own.
        leader_election: Returns the leader election's statistics, when the broker runs one.
        load_balancing: Renders the load manager's figures (``metrics_loadbalance``).
    """

    def __init__(
        self,
        statistics: Callable[[], ServiceStats],
        *,
        clock: Clock,
        cluster: str,
        min_interval: float = 1.0,
        tracker: RateTracker | None = None,
        leader_election: Callable[[], LeaderElectionStatistics] | None = None,
        load_balancing: Callable[[], str] | None = None,
    ) -> None:
        self._statistics = statistics
        self._cluster = cluster
        self._leader_election = leader_election
        self._load_balancing = load_balancing
        self.tracker = tracker or RateTracker(clock=clock, min_interval=min_interval)

    def render(self) -> str:
        """Take a snapshot and render it (see :func:`render_metrics`)."""
        stats = self._statistics()
        self.tracker.sample(stats)
        text = render_metrics(stats, cluster=self._cluster, rates=self.tracker)
        if self._leader_election is not None:
            text += render_leader_metrics(self._leader_election(), cluster=self._cluster)
        if self._load_balancing is not None:
            text += self._load_balancing()
        return text
