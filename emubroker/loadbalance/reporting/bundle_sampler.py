"""A broker's per-bundle traffic (``NamespaceBundleStats``), sampled from its topics' counters.

Pulsar's ``PulsarStats.updateStats`` runs every ``statsUpdateFrequencyInSecs`` over the loaded
topics grouped by bundle and, per bundle, counts its topics and sums each topic's producers,
consumers and in/out message and byte rates (spec/pulsar-behaviour.md §2.1). Only bundles with a
loaded topic appear, so they are the ``bundles`` a load report lists. The rates are counter deltas
over the time since the previous sample; a topic seen for the first time contributes its counts,
not rates, until the next sample (its counters may carry totals from before it was loaded here).
``cacheSize`` (the managed ledger's entry cache) is not sampled and stays 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from emubroker.loadbalance.model.bundle_stats import NamespaceBundleStats

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["BundleStatsSampler", "TopicTraffic"]


class TopicTraffic(NamedTuple):
    """One loaded topic's running counters, with the bundle it belongs to.

    Attributes:
        name: The complete topic name.
        bundle: Its bundle, ``tenant/ns/0x..._0x...``.
        msg_in: Messages published (since it was loaded; never decreasing while loaded).
        bytes_in: Bytes published.
        msg_out: Messages delivered.
        bytes_out: Bytes delivered.
        producers: Attached producers.
        consumers: Attached consumers over all subscriptions.
    """

    name: str
    bundle: str
    msg_in: int
    bytes_in: int
    msg_out: int
    bytes_out: int
    producers: int
    consumers: int


class BundleStatsSampler:
    """Turns successive topic snapshots into per-bundle rates."""

    def __init__(self) -> None:
        self._time: float | None = None
        self._counters: dict[str, tuple[int, int, int, int]] = {}

    def sample(self, now: float, topics: Iterable[TopicTraffic]) -> dict[str, NamespaceBundleStats]:
        """The bundles' stats over the window since the previous sample.

        Args:
            now: The time (seconds, the broker's clock).
            topics: Every loaded topic.

        Returns:
            Bundle name -> its stats, for every bundle with at least one topic.
        """
        elapsed = 0.0 if self._time is None else now - self._time
        counters: dict[str, tuple[int, int, int, int]] = {}
        stats: dict[str, NamespaceBundleStats] = {}
        for topic in topics:
            current = (topic.msg_in, topic.bytes_in, topic.msg_out, topic.bytes_out)
            counters[topic.name] = current
            bundle = stats.get(topic.bundle)
            if bundle is None:
                bundle = stats[topic.bundle] = NamespaceBundleStats()
            bundle.topics += 1
            bundle.producer_count += topic.producers
            bundle.consumer_count += topic.consumers
            previous = self._counters.get(topic.name)
            if previous is None or elapsed <= 0:
                continue
            # A topic reloaded in between restarts its counters: a negative delta counts as 0.
            msg_in, bytes_in, msg_out, bytes_out = (
                max(new - old, 0) / elapsed for new, old in zip(current, previous, strict=True)
            )
            bundle.msg_rate_in += msg_in
            bundle.msg_throughput_in += bytes_in
            bundle.msg_rate_out += msg_out
            bundle.msg_throughput_out += bytes_out
        self._time = now
        self._counters = counters
        return stats
