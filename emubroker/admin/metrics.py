"""``GET /metrics``: Prometheus text exposition with Pulsar's metric names and labels.

DESIGN.md decision 4: never invent a name Pulsar has under another name. Everything here is what
a Pulsar broker exports with ``exposeTopicLevelMetricsInPrometheus=true`` (its default):

* namespace level: ``pulsar_topics_count``;
* topic level (labels ``cluster``, ``namespace``, ``topic``): ``pulsar_subscriptions_count``,
  ``pulsar_producers_count``, ``pulsar_consumers_count``, ``pulsar_rate_in``/``_out`` (msg/s),
  ``pulsar_throughput_in``/``_out`` (bytes/s), ``pulsar_msg_backlog``,
  ``pulsar_in_messages_total``, ``pulsar_in_bytes_total``, ``pulsar_out_messages_total``,
  ``pulsar_out_bytes_total``;
* subscription level (plus ``subscription``): ``pulsar_subscription_back_log``.

Pulsar computes rates from counter deltas over its stats interval; we take the delta between two
samples at least ``min_interval`` apart (scrape to scrape), reusing the last rates for scrapes that
come sooner, so rates do not jitter when several scrapers poll.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from emubroker.topics.stats import ServiceStats, TopicStats
    from protocol.clock import Clock

__all__ = ["CONTENT_TYPE", "MetricsCollector", "render_metrics"]

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus' text exposition format, version 0.0.4."""

_TOPIC_GAUGES: Final = (
    ("pulsar_subscriptions_count", lambda t: len(t.subscriptions)),
    ("pulsar_producers_count", lambda t: t.producers),
    ("pulsar_consumers_count", lambda t: t.consumers),
    ("pulsar_msg_backlog", lambda t: t.backlog),
)
_TOPIC_COUNTERS: Final = (
    ("pulsar_in_messages_total", lambda t: t.msg_in),
    ("pulsar_in_bytes_total", lambda t: t.bytes_in),
    ("pulsar_out_messages_total", lambda t: t.msg_out),
    ("pulsar_out_bytes_total", lambda t: t.bytes_out),
)
_RATES: Final = (
    "pulsar_rate_in",
    "pulsar_rate_out",
    "pulsar_throughput_in",
    "pulsar_throughput_out",
)

Rates = dict[str, tuple[float, float, float, float]]
"""Per topic name: (rate in, rate out, throughput in, throughput out)."""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def render_metrics(stats: ServiceStats, *, cluster: str, rates: Rates | None = None) -> str:
    """Render a statistics snapshot as Prometheus text.

    Args:
        stats: ``TopicService.statistics()``.
        cluster: The ``cluster`` label (``clusterName``).
        rates: Per-topic rates; topics missing here report 0.

    Returns:
        The exposition text, one ``# TYPE`` line per metric family.
    """
    rates = rates or {}
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
    zero = (0.0, 0.0, 0.0, 0.0)
    for index, name in enumerate(_RATES):
        family(
            name,
            "gauge",
            ((labels, rates.get(topic.name, zero)[index]) for topic, labels in topic_labels),
        )
    for name, get in _TOPIC_COUNTERS:
        family(name, "counter", ((labels, get(topic)) for topic, labels in topic_labels))
    family(
        "pulsar_subscription_back_log",
        "gauge",
        (
            (
                _labels(
                    cluster=cluster,
                    namespace=topic.namespace,
                    topic=topic.name,
                    subscription=sub.name,
                ),
                sub.backlog,
            )
            for topic in stats.topics
            for sub in topic.subscriptions
        ),
    )
    lines.append("")
    return "\n".join(lines)


class MetricsCollector:
    """Turns statistics snapshots into Prometheus text with rates between samples.

    Args:
        statistics: Returns the current ``ServiceStats`` (``TopicService.statistics``).
        clock: Measures the time between samples.
        cluster: The ``cluster`` label.
        min_interval: Seconds between rate samples.
    """

    def __init__(
        self,
        statistics: Callable[[], ServiceStats],
        *,
        clock: Clock,
        cluster: str,
        min_interval: float = 1.0,
    ) -> None:
        self._statistics = statistics
        self._clock = clock
        self._cluster = cluster
        self._min_interval = min_interval
        self._sample_time: float | None = None
        self._sample: dict[str, tuple[int, int, int, int]] = {}
        self._rates: Rates = {}

    def render(self) -> str:
        """Take a snapshot and render it (see :func:`render_metrics`)."""
        stats = self._statistics()
        self._update_rates(stats.topics)
        return render_metrics(stats, cluster=self._cluster, rates=self._rates)

    def _update_rates(self, topics: Iterable[TopicStats]) -> None:
        now = self._clock.now()
        counters = {t.name: (t.msg_in, t.msg_out, t.bytes_in, t.bytes_out) for t in topics}
        if self._sample_time is None:
            self._sample_time, self._sample = now, counters
            return
        elapsed = now - self._sample_time
        if elapsed < self._min_interval:
            return
        rates: Rates = {}
        for name, (msg_in, msg_out, bytes_in, bytes_out) in counters.items():
            old = self._sample.get(name, (0, 0, 0, 0))
            # Counters never go backwards (they survive unloads); clamp anyway.
            rates[name] = (
                max(msg_in - old[0], 0) / elapsed,
                max(msg_out - old[1], 0) / elapsed,
                max(bytes_in - old[2], 0) / elapsed,
                max(bytes_out - old[3], 0) / elapsed,
            )
        self._sample_time, self._sample, self._rates = now, counters, rates
