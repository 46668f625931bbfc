"""Pulsar's modular load-manager data model, one class per Pulsar class (spec §2.1).

Field names are Pulsar's in snake_case; the JSON names (``emubroker.loadbalance.model.codec``) are
Pulsar's camelCase ones. The classes are mutable, like Pulsar's: a broker updates its
``LocalBrokerData`` in place, the leader adds samples to ``BundleData`` in place. Every field
has a default so that a test can build exactly the partial objects Pulsar's tests build.

The bundle-side classes (``NamespaceBundleStats``, ``TimeAverageMessageData``, ``BundleData``,
``TimeAverageBrokerData``) live in ``bundle_stats`` and are re-exported here.

Time: Pulsar stamps ``lastUpdate``/``startTimestamp`` with ``System.currentTimeMillis()`` in
constructors; ours default to 0 and callers pass the time (milliseconds), as pure code should.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from emubroker.loadbalance.model.bundle_stats import (
    DEFAULT_MESSAGE_RATE,
    DEFAULT_MESSAGE_THROUGHPUT,
    NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
    SYSTEM_NAMESPACE,
    BundleData,
    NamespaceBundleStats,
    TimeAverageBrokerData,
    TimeAverageMessageData,
    bundle_namespace,
    default_bundle_stats,
    is_sla_or_heartbeat_namespace,
    is_system_service_namespace,
)
from emubroker.loadbalance.model.javaorder import hash_map_order
from emubroker.loadbalance.model.usage import (
    NO_USAGE,
    ResourceUsage,
    SystemResourceUsage,
    f32,
    max_with_weights,
    resource_weights,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from emubroker.config import BrokerConfig

__all__ = [
    "DEFAULT_MESSAGE_RATE",
    "DEFAULT_MESSAGE_THROUGHPUT",
    "NUM_LONG_SAMPLES",
    "NUM_SHORT_SAMPLES",
    "SYSTEM_NAMESPACE",
    "AdvertisedListener",
    "BrokerData",
    "BundleData",
    "LoadData",
    "LocalBrokerData",
    "NamespaceBundleStats",
    "TimeAverageBrokerData",
    "TimeAverageMessageData",
    "bundle_namespace",
    "default_bundle_stats",
    "is_sla_or_heartbeat_namespace",
    "is_system_service_namespace",
    "weighted_max_usage",
]


class AdvertisedListener(msgspec.Struct, rename="camel", omit_defaults=True):
    """A named listener's URLs (``policies.data.loadbalancer.AdvertisedListener``)."""

    broker_service_url: str | None = None
    broker_service_url_tls: str | None = None
    broker_http_url: str | None = None
    broker_https_url: str | None = None


class LocalBrokerData(msgspec.Struct, rename="camel"):
    """A broker's load report, stored at ``/loadbalance/brokers/<broker>`` (spec §2.1).

    Equality in Pulsar compares only the four URLs (the report doubles as the broker's lock);
    ours compares all fields, and :meth:`same_broker` is Pulsar's comparison.
    """

    web_service_url: str | None = None
    web_service_url_tls: str | None = None
    pulsar_service_url: str | None = None
    pulsar_service_url_tls: str | None = None
    persistent_topics_enabled: bool = True
    non_persistent_topics_enabled: bool = True
    cpu: ResourceUsage = NO_USAGE
    memory: ResourceUsage = NO_USAGE
    direct_memory: ResourceUsage = NO_USAGE
    bandwidth_in: ResourceUsage = NO_USAGE
    bandwidth_out: ResourceUsage = NO_USAGE
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    last_update: int = 0
    last_stats: dict[str, NamespaceBundleStats] = msgspec.field(default_factory=dict)
    num_topics: int = 0
    num_bundles: int = 0
    num_consumers: int = 0
    num_producers: int = 0
    bundles: set[str] = msgspec.field(default_factory=set)
    last_bundle_gains: set[str] = msgspec.field(default_factory=set)
    last_bundle_losses: set[str] = msgspec.field(default_factory=set)
    broker_version_string: str | None = None
    protocols: dict[str, str] = msgspec.field(default_factory=dict)
    advertised_listeners: dict[str, AdvertisedListener] = msgspec.field(default_factory=dict)
    load_manager_class_name: str | None = None
    start_timestamp: int = 0

    def same_broker(self, other: LocalBrokerData) -> bool:
        """Pulsar's ``equals``: the same four URLs."""
        return (
            self.web_service_url == other.web_service_url
            and self.web_service_url_tls == other.web_service_url_tls
            and self.pulsar_service_url == other.pulsar_service_url
            and self.pulsar_service_url_tls == other.pulsar_service_url_tls
        )

    def update(
        self, usage: SystemResourceUsage, bundle_stats: dict[str, NamespaceBundleStats]
    ) -> None:
        """Take new resource usages and bundle stats; recompute the sums and gains/losses."""
        self._set_usage(
            usage.cpu, usage.memory, usage.direct_memory, usage.bandwidth_in, usage.bandwidth_out
        )
        self._update_bundle_data(bundle_stats)
        self.last_stats = bundle_stats

    def update_from(self, other: LocalBrokerData) -> None:
        """Take another report's usages and stats (``update(LocalBrokerData)``)."""
        self._set_usage(
            other.cpu, other.memory, other.direct_memory, other.bandwidth_in, other.bandwidth_out
        )
        self._update_bundle_data(other.last_stats)
        self.last_stats = other.last_stats

    def _set_usage(self, *usages: ResourceUsage) -> None:
        self.cpu, self.memory, self.direct_memory, self.bandwidth_in, self.bandwidth_out = usages

    def _update_bundle_data(self, bundle_stats: Mapping[str, NamespaceBundleStats]) -> None:
        lost = self.bundles - bundle_stats.keys()
        self.last_bundle_losses |= lost
        self.bundles -= lost
        gained = bundle_stats.keys() - self.bundles
        self.last_bundle_gains |= gained
        self.bundles |= gained
        rates = [0.0, 0.0, 0.0, 0.0]
        topics = consumers = producers = 0
        for stats in bundle_stats.values():
            rates[0] += stats.msg_throughput_in
            rates[1] += stats.msg_throughput_out
            rates[2] += stats.msg_rate_in
            rates[3] += stats.msg_rate_out
            topics += stats.topics
            consumers += stats.consumer_count
            producers += stats.producer_count
        self.msg_throughput_in, self.msg_throughput_out, self.msg_rate_in, self.msg_rate_out = rates
        self.num_topics = topics
        self.num_bundles = len(bundle_stats)
        self.num_consumers = consumers
        self.num_producers = producers

    def clean_deltas(self) -> None:
        """Forget gained and lost bundles (after the report was written)."""
        self.last_bundle_gains.clear()
        self.last_bundle_losses.clear()

    def max_resource_usage(self) -> float:
        """``max(cpu, direct memory, bandwidth in/out)% / 100``, memory ignored, in float32.

        Pulsar picks its ``float`` overload of ``max`` here, so the division is float32 too.
        """
        percents = (
            self.cpu.percent_usage(),
            self.direct_memory.percent_usage(),
            self.bandwidth_in.percent_usage(),
            self.bandwidth_out.percent_usage(),
        )
        best = -float("inf")
        for value in percents:
            if value > best:
                best = value
        return f32(best / f32(100.0))

    def max_resource_usage_with_weight(
        self,
        cpu_weight: float,
        direct_memory_weight: float,
        bandwidth_in_weight: float,
        bandwidth_out_weight: float,
    ) -> float:
        """``max(resource% * weight) / 100`` over CPU, direct memory and bandwidth (spec §0.2)."""
        return max_with_weights(
            (self.cpu, cpu_weight),
            (self.direct_memory, direct_memory_weight),
            (self.bandwidth_in, bandwidth_in_weight),
            (self.bandwidth_out, bandwidth_out_weight),
        )

    def print_resource_usage(self) -> str:
        """The usages as Pulsar logs them."""
        return (
            f"cpu: {self.cpu.percent_usage():.2f}%, "
            f"memory: {self.memory.percent_usage():.2f}%, "
            f"directMemory: {self.direct_memory.percent_usage():.2f}%, "
            f"bandwidthIn: {self.bandwidth_in.percent_usage():.2f}%, "
            f"bandwidthOut: {self.bandwidth_out.percent_usage():.2f}%"
        )


def weighted_max_usage(local_data: LocalBrokerData, conf: BrokerConfig) -> float:
    """A report's usage with the configured weights (the number every modular strategy uses)."""
    weights = resource_weights(conf)
    return local_data.max_resource_usage_with_weight(
        weights.cpu, weights.direct_memory, weights.bandwidth_in, weights.bandwidth_out
    )


class BrokerData(msgspec.Struct):
    """What the leader knows of a broker: its report, time averages and preallocated bundles."""

    local_data: LocalBrokerData = msgspec.field(default_factory=LocalBrokerData)
    time_average_data: TimeAverageBrokerData = msgspec.field(default_factory=TimeAverageBrokerData)
    preallocated_bundle_data: dict[str, BundleData] = msgspec.field(default_factory=dict)


class LoadData(msgspec.Struct):
    """Everything the leader's decisions read (``loadbalance.LoadData``).

    Pulsar keeps these maps in ``ConcurrentHashMap``s; strategies that let iteration order
    decide a tie or the rounding of a sum iterate them in that map's order
    (:meth:`brokers_in_java_order`), so the dicts' own order does not matter.

    Attributes:
        broker_data: Broker id -> its data.
        bundle_data: Bundle name -> its averages.
        recently_unloaded_bundles: Bundle name -> when it was unloaded (ms).
    """

    broker_data: dict[str, BrokerData] = msgspec.field(default_factory=dict)
    bundle_data: dict[str, BundleData] = msgspec.field(default_factory=dict)
    recently_unloaded_bundles: dict[str, int] = msgspec.field(default_factory=dict)

    def brokers_in_java_order(self) -> list[tuple[str, BrokerData]]:
        """``broker_data`` entries in the order Pulsar's ``ConcurrentHashMap`` yields them."""
        broker_data = self.broker_data
        return [(b, broker_data[b]) for b in hash_map_order(broker_data, concurrent=True)]

    def bundle_data_for_load_shedding(self) -> dict[str, BundleData]:
        """``bundle_data`` without heartbeat and SLA-monitor bundles, in Pulsar's order.

        Pulsar collects the ``ConcurrentHashMap`` into a new ``HashMap``; the result iterates
        in that ``HashMap``'s order.
        """
        bundle_data = self.bundle_data
        kept = [
            b
            for b in hash_map_order(bundle_data, concurrent=True)
            if not is_sla_or_heartbeat_namespace(bundle_namespace(b))
        ]
        return {b: bundle_data[b] for b in hash_map_order(kept)}
