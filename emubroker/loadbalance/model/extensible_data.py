"""The extensible load manager's data (PIP-192, spec §4.7): broker loads, top bundles, decisions.

``BrokerLoadData`` is what each broker publishes about itself; its ``weighted_max_ema`` is the
load TransferShedder balances. ``TopBundlesLoadData`` lists a broker's heaviest bundles in
ascending order. ``UnloadDecision`` is TransferShedder's output: a bundle, its source broker and,
in transfer mode, its destination. ``UnloadCounter`` keeps the per-reason counts Pulsar exports
as ``brk_lb_unload_broker_breakdown_total``.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, TypeVar

import msgspec

from emubroker.loadbalance.model.data import (
    NamespaceBundleStats,
    bundle_namespace,
    is_system_service_namespace,
)
from emubroker.loadbalance.model.javaorder import java_sort
from emubroker.loadbalance.model.usage import (
    NO_USAGE,
    ResourceUsage,
    SystemResourceUsage,
    max_with_weights,
)
from emubroker.loadbalance.model.usage import resource_weights as _weights

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from emubroker.config import BrokerConfig

T = TypeVar("T")

__all__ = [
    "BrokerLoadData",
    "BundleLoadData",
    "Label",
    "LoadManagerContext",
    "Reason",
    "TopBundlesLoadData",
    "Unload",
    "UnloadCounter",
    "UnloadDecision",
    "partition_sort",
    "top_k_bundles",
]

DEFAULT_RESOURCE_USAGE: Final = 1.0
"""``BrokerLoadData`` reports full usage until its first update."""


class BrokerLoadData(msgspec.Struct, rename="camel", dict=True):
    """A broker's load as the extensible load manager sees it (``extensions.data``).

    The resource usages start at :data:`~emubroker.loadbalance.model.usage.NO_USAGE`, as Pulsar's
    constructor has them (see :mod:`~emubroker.loadbalance.model.usage` for the defaults).
    """

    cpu: ResourceUsage = NO_USAGE
    memory: ResourceUsage = NO_USAGE
    direct_memory: ResourceUsage = NO_USAGE
    bandwidth_in: ResourceUsage = NO_USAGE
    bandwidth_out: ResourceUsage = NO_USAGE
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    bundle_count: int = 0
    topics: int = 0
    max_resource_usage: float = DEFAULT_RESOURCE_USAGE
    weighted_max_ema: float = msgspec.field(default=DEFAULT_RESOURCE_USAGE, name="weightedMaxEMA")
    msg_throughput_ema: float = msgspec.field(default=0.0, name="msgThroughputEMA")
    updated_at: int = 0
    reported_at: int = 0

    def update(
        self,
        usage: SystemResourceUsage,
        msg_throughput_in: float,
        msg_throughput_out: float,
        msg_rate_in: float,
        msg_rate_out: float,
        bundle_count: int,
        topics: int,
        conf: BrokerConfig,
        now: int,
    ) -> None:
        """Take a new measurement at ``now`` (ms) and move the moving averages.

        The first update sets both averages to the new values; later ones keep
        ``loadBalancerHistoryResourcePercentage`` of the old value. Departure: Pulsar tells the
        first update by ``updatedAt == 0``, which a run whose clock starts at the epoch (the
        simulator's) would meet at every update of its first millisecond; here the object
        remembers that it was updated (an attribute the JSON does not carry).
        """
        self.cpu, self.memory, self.direct_memory = usage.cpu, usage.memory, usage.direct_memory
        self.bandwidth_in, self.bandwidth_out = usage.bandwidth_in, usage.bandwidth_out
        self.msg_throughput_in = msg_throughput_in
        self.msg_throughput_out = msg_throughput_out
        self.msg_rate_in = msg_rate_in
        self.msg_rate_out = msg_rate_out
        self.bundle_count = bundle_count
        self.topics = topics
        self.max_resource_usage = max_with_weights(
            (self.cpu, 1.0),
            (self.direct_memory, 1.0),
            (self.bandwidth_in, 1.0),
            (self.bandwidth_out, 1.0),
        )
        history = conf.loadBalancerHistoryResourcePercentage
        weighted_max = self.max_resource_usage_with_weight(conf)
        throughput = msg_throughput_in + msg_throughput_out
        first = not self.__dict__.get("sampled", False)
        self.weighted_max_ema = (
            weighted_max
            if first
            else self.weighted_max_ema * history + (1 - history) * weighted_max
        )
        self.msg_throughput_ema = (
            throughput if first else self.msg_throughput_ema * history + (1 - history) * throughput
        )
        self.updated_at = now
        self.__dict__["sampled"] = True

    def update_from(self, other: BrokerLoadData) -> None:
        """Copy every field of ``other`` (``update(BrokerLoadData)``)."""
        for name in self.__struct_fields__:
            setattr(self, name, getattr(other, name))
        self.__dict__["sampled"] = other.__dict__.get("sampled", False)

    def max_resource_usage_with_weight(self, conf: BrokerConfig) -> float:
        """``max(resource% * weight) / 100``, memory included with its (deprecated) weight."""
        w = _weights(conf)
        return max_with_weights(
            (self.cpu, w.cpu),
            (self.memory, w.memory),
            (self.direct_memory, w.direct_memory),
            (self.bandwidth_in, w.bandwidth_in),
            (self.bandwidth_out, w.bandwidth_out),
        )

    def clear(self) -> None:
        """Back to the state of a new object."""
        self.update_from(BrokerLoadData())

    def to_string(self, conf: BrokerConfig) -> str:
        """The one-line description Pulsar logs (``toString(ServiceConfiguration)``)."""
        w = _weights(conf)
        return (
            f"cpu= {self.cpu.percent_usage():.2f}%, memory= {self.memory.percent_usage():.2f}%, "
            f"directMemory= {self.direct_memory.percent_usage():.2f}%, "
            f"bandwidthIn= {self.bandwidth_in.percent_usage():.2f}%, "
            f"bandwidthOut= {self.bandwidth_out.percent_usage():.2f}%, "
            f"cpuWeight= {w.cpu:f}, memoryWeight= {w.memory:f}, "
            f"directMemoryWeight= {w.direct_memory:f}, "
            f"bandwidthInResourceWeight= {w.bandwidth_in:f}, "
            f"bandwidthOutResourceWeight= {w.bandwidth_out:f}, "
            f"msgThroughputIn= {self.msg_throughput_in:.2f}, "
            f"msgThroughputOut= {self.msg_throughput_out:.2f}, "
            f"msgRateIn= {self.msg_rate_in:.2f}, msgRateOut= {self.msg_rate_out:.2f}, "
            f"bundleCount= {self.bundle_count}, "
            f"maxResourceUsage= {self.max_resource_usage * 100:.2f}%, "
            f"weightedMaxEMA= {self.weighted_max_ema * 100:.2f}%, "
            f"msgThroughputEMA= {self.msg_throughput_ema:.2f}, "
            f"updatedAt= {self.updated_at}, reportedAt= {self.reported_at}"
        )


class BundleLoadData(msgspec.Struct, frozen=True, rename="camel"):
    """One entry of a broker's top bundles: the bundle and its latest stats."""

    bundle_name: str
    stats: NamespaceBundleStats = msgspec.field(default_factory=NamespaceBundleStats)


class TopBundlesLoadData(msgspec.Struct, rename="camel"):
    """A broker's heaviest bundles, in ascending order of load."""

    top_bundles_load_data: list[BundleLoadData] = msgspec.field(default_factory=list)


def top_k_bundles(
    bundle_stats: Mapping[str, NamespaceBundleStats],
    k: int,
    conf: BrokerConfig,
    *,
    has_policies: Callable[[str], bool] = lambda _bundle: False,
) -> TopBundlesLoadData:
    """A broker's top-``k`` bundles as ``TopKBundles.update`` publishes them.

    Bundles without throughput, of system namespaces, of ``loadBalancerSheddingExcludedNamespaces``
    and (unless ``loadBalancerSheddingBundlesWithPoliciesEnabled``) with isolation or
    anti-affinity policies are left out. The ``k`` largest by ``NamespaceBundleStats`` ranking
    are found with Pulsar's partial quicksort and listed in ascending order.

    Args:
        bundle_stats: The broker's bundles and their stats, in the broker's map order.
        k: How many to keep (``loadBalancerMaxNumberOfBundlesInBundleLoadReport``).
        conf: The broker configuration.
        has_policies: Whether a bundle's namespace has isolation or anti-affinity policies.
    """
    with_policies = conf.loadBalancerSheddingBundlesWithPoliciesEnabled
    excluded = conf.loadBalancerSheddingExcludedNamespaces
    entries: list[tuple[str, NamespaceBundleStats]] = []
    for bundle, stats in bundle_stats.items():
        if stats.msg_throughput_in + stats.msg_throughput_out == 0:
            continue
        namespace = bundle_namespace(bundle)
        if is_system_service_namespace(namespace):
            continue
        if not with_policies and has_policies(bundle):
            continue
        if namespace in excluded:
            continue
        entries.append((bundle, stats))
    if not entries:
        return TopBundlesLoadData()
    k = min(k, len(entries))
    partition_sort(entries, k, lambda a, b: a[1].compare_to(b[1]))
    return TopBundlesLoadData([BundleLoadData(b, s) for b, s in reversed(entries[:k])])


def partition_sort(items: list[T], k: int, compare: Callable[[T, T], int]) -> None:
    """Move the ``k`` largest items to the front, largest first (``TopKBundles.partitionSort``).

    A three-way quickselect around the last element, then a sort of the part before the
    ``k``-th position, exactly as Pulsar does it (so near-equal items end up where Pulsar's
    end up).
    """
    start, end, target = 0, len(items) - 1, k - 1
    while start < end:
        lo, hi, mid = start, end, start
        pivot = items[hi]
        while mid <= hi:
            cmp = compare(pivot, items[mid])
            if cmp < 0:
                items[lo], items[mid] = items[mid], items[lo]
                lo += 1
                mid += 1
            elif cmp > 0:
                items[mid], items[hi] = items[hi], items[mid]
                hi -= 1
            else:
                mid += 1
        if lo <= target < mid:
            end = lo
            break
        if target < lo:
            end = lo - 1
        else:
            start = mid
    items[:end] = java_sort(items[:end], lambda a, b: compare(b, a))


class LoadManagerContext(msgspec.Struct):
    """What one unload cycle of the extensible load manager reads (``LoadManagerContext``).

    Attributes:
        broker_configuration: The leader's configuration.
        broker_load_data_store: Broker -> its latest ``BrokerLoadData``.
        top_bundle_load_data_store: Broker -> its latest top bundles.
        available_brokers: The registered brokers, or ``None`` if the registry could not be
            read (the cycle then fails, as in Pulsar).
        now: The current time in ms (Pulsar reads ``System.currentTimeMillis()``).
    """

    broker_configuration: BrokerConfig
    broker_load_data_store: dict[str, BrokerLoadData] = msgspec.field(default_factory=dict)
    top_bundle_load_data_store: dict[str, TopBundlesLoadData] = msgspec.field(default_factory=dict)
    available_brokers: frozenset[str] | None = frozenset()
    now: int = 0


class Label(enum.StrEnum):
    """``UnloadDecision.Label``."""

    Success = "Success"
    Skip = "Skip"
    Failure = "Failure"


class Reason(enum.StrEnum):
    """``UnloadDecision.Reason``."""

    Overloaded = "Overloaded"
    Underloaded = "Underloaded"
    HitCount = "HitCount"
    NoBundles = "NoBundles"
    CoolDown = "CoolDown"
    OutDatedData = "OutDatedData"
    NoLoadData = "NoLoadData"
    NoBrokers = "NoBrokers"
    Admin = "Admin"
    Unknown = "Unknown"


class Unload(msgspec.Struct, frozen=True, rename="camel"):
    """Move ``service_unit`` off ``source_broker``, to ``dest_broker`` when one is named."""

    source_broker: str
    service_unit: str
    dest_broker: str | None = None
    force: bool = False


class UnloadDecision(msgspec.Struct, frozen=True):
    """One decision of an unload cycle (``extensions.models.UnloadDecision``)."""

    unload: Unload
    label: Label = Label.Success
    reason: Reason = Reason.Unknown


class UnloadCounter:
    """Decision counts by label and reason, and the last load average and deviation."""

    _COUNTED: Final = {
        Label.Success: (Reason.Overloaded, Reason.Underloaded, Reason.Admin),
        Label.Skip: (
            Reason.HitCount,
            Reason.NoBundles,
            Reason.CoolDown,
            Reason.OutDatedData,
            Reason.NoLoadData,
            Reason.NoBrokers,
            Reason.Unknown,
        ),
        Label.Failure: (Reason.Unknown,),
    }

    def __init__(self) -> None:
        self.unload_broker_count = 0
        self.unload_bundle_count = 0
        self.breakdown_counters: dict[Label, dict[Reason, int]] = {
            label: dict.fromkeys(reasons, 0) for label, reasons in self._COUNTED.items()
        }
        self.load_avg = 0.0
        self.load_std = 0.0

    def update(self, label: Label, reason: Reason) -> None:
        """Count one decision (a success also counts one unloaded bundle).

        Raises:
            KeyError: Pulsar has no counter for this label and reason.
        """
        if label is Label.Success:
            self.unload_bundle_count += 1
        self.breakdown_counters[label][reason] += 1

    def update_load_data(self, load_avg: float, load_std: float) -> None:
        """Record the cycle's load average and standard deviation."""
        self.load_avg, self.load_std = load_avg, load_std
