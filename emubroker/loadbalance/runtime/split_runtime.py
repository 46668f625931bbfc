"""The leader's automatic bundle split, performed: decisions, split calls, log lines, trace rows.

Pulsar's modular leader runs ``checkNamespaceBundleSplit`` at the end of every ``updateAll``,
that is each time the brokers' load reports changed (``loadBalancerSplitIntervalMinutes`` is
the extensible manager's key). The decisions are
``ModularLoadManager.check_namespace_bundle_split``'s (``strategies.modular_manager``;
``loadBalancerAutoBundleSplitEnabled``, the
``loadBalancerNamespaceBundleMax*`` thresholds, ``loadBalancerNamespaceMaximumBundles``, the unload
flag of ``loadBalancerAutoUnloadSplitBundlesEnabled`` and the namespace policies);
:class:`SplitRunner` carries each out through an injected :class:`BundleSplitRequest`, Pulsar's
admin call ``splitNamespaceBundle(namespace, range, unload, null)`` that reaches the owner, which
splits with its ``defaultNamespaceBundleSplitAlgorithm``. For every split it writes:

- a log line with the numbers that decided it (topics, sessions, long-term rate and throughput
  against their limits), and ``Successfully split namespace bundle`` or the failure;
- a ``split`` row in the load-balancer trace (docs/load-balancer-trace.md);
- Pulsar's ``pulsar_lb_bundles_split_total`` (``updateBundleSplitMetrics``): splits that went
  through, shown once this broker ran a check as the leader.

As Pulsar does, a chosen bundle's data is dropped from the leader's load data and from
``/loadbalance/bundle-data`` before the call. One departure: a bundle no longer in its
namespace's layout as the leader knows it (a report written before a split the leader already
made) is not chosen again; Pulsar would send the split and log its failure.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any, Protocol

from emubroker.loadbalance.strategies.isolation import namespace_of
from emubroker.loadbalance.strategies.split import MIB
from emubroker.loadbalance.trace.records import split_record

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import BundleData, LoadData
    from emubroker.loadbalance.runtime.aggregation import LeaderAggregation
    from emubroker.loadbalance.strategies.split import SplitDecision
    from emubroker.loadbalance.trace.records import TraceSink
    from protocol.clock import Clock

__all__ = [
    "BundleSplitRequest",
    "NamespaceLayout",
    "SplitRunner",
    "layout_from",
    "split_numbers",
]

log = logging.getLogger(__name__)


class BundleSplitRequest(Protocol):
    """Split a bundle at its owner with the default algorithm; returns the children's names.

    Raises if the split did not go through (the leader logs it and carries on).
    """

    async def __call__(self, bundle: str, unload: bool) -> Sequence[str]:
        """Split ``bundle``; unload the children afterwards when ``unload``."""
        ...


class NamespaceLayout(Protocol):
    """The namespaces' current bundles as the leader knows them."""

    def bundle_count(self, namespace: str) -> int:
        """How many bundles ``namespace`` has."""
        ...

    def has_bundle(self, bundle: str) -> bool:
        """Whether ``bundle`` is one of its namespace's current bundles."""
        ...


def split_numbers(
    load_data: LoadData,
    bundle_data: Mapping[str, BundleData],
    broker: str,
    bundle: str,
    conf: BrokerConfig,
) -> dict[str, Any]:
    """The figures the split condition compared for ``bundle``, and the first that held.

    Args:
        load_data: The leader's load data (the owner's report).
        bundle_data: The bundle data as it was before the check dropped the chosen bundles.
        broker: The bundle's owner.
        bundle: The bundle.
        conf: The configuration.
    """
    broker_data = load_data.broker_data.get(broker)
    stats = None if broker_data is None else broker_data.local_data.last_stats.get(bundle)
    topics = sessions = 0
    if stats is not None:
        topics, sessions = stats.topics, stats.consumer_count + stats.producer_count
    data = bundle_data.get(bundle)
    rate = 0.0 if data is None else data.long_term_data.total_msg_rate()
    throughput = 0.0 if data is None else data.long_term_data.total_msg_throughput()
    max_sessions = conf.loadBalancerNamespaceBundleMaxSessions
    conditions: list[tuple[str, bool, float]] = [
        ("topics", topics > conf.loadBalancerNamespaceBundleMaxTopics,
         conf.loadBalancerNamespaceBundleMaxTopics),
        ("sessions", max_sessions > 0 and sessions > max_sessions, max_sessions),
        ("msg_rate", rate > conf.loadBalancerNamespaceBundleMaxMsgRate,
         conf.loadBalancerNamespaceBundleMaxMsgRate),
        ("bandwidth", throughput > conf.loadBalancerNamespaceBundleMaxBandwidthMbytes * MIB,
         conf.loadBalancerNamespaceBundleMaxBandwidthMbytes * MIB),
    ]  # fmt: skip
    reason, threshold = next(((r, t) for r, held, t in conditions if held), ("", -1.0))
    return {
        "reason": reason,
        "threshold": float(threshold),
        "bundle_topics": topics,
        "bundle_msg_rate": rate,
        "bundle_throughput": throughput,
        "sessions": sessions,
    }


class SplitRunner:
    """Carries out the leader's split decisions (see the module docstring).

    Args:
        clock: Stamps the trace rows.
        broker_id: The leader's id (the rows' ``broker``).
        split: Performs one split at the bundle's owner.
        trace: Where ``split`` rows go, if anywhere.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        broker_id: str,
        split: BundleSplitRequest,
        trace: TraceSink | None = None,
    ) -> None:
        self._clock = clock
        self._broker_id = broker_id
        self._split = split
        self._trace = trace
        self.split_count = 0  # pulsar_lb_bundles_split_total
        self.failed_splits = 0
        self.checks = 0  # checks that got past the enabled and broker-count tests

    async def check(
        self,
        aggregation: LeaderAggregation,
        conf: BrokerConfig,
        layout: NamespaceLayout,
        cycle: int,
    ) -> list[SplitDecision]:
        """``checkNamespaceBundleSplit``: choose, then split each bundle at its owner.

        Returns:
            The splits that went through.
        """
        manager = aggregation.manager
        manager.conf = conf
        if not conf.loadBalancerAutoBundleSplitEnabled or len(manager.available_brokers) <= 1:
            return []
        self.checks += 1
        before = dict(manager.load_data.bundle_data)
        decisions = [
            d
            for d in manager.check_namespace_bundle_split(layout.bundle_count)
            if layout.has_bundle(d.bundle)
        ]
        done: list[SplitDecision] = []
        for decision in decisions:
            numbers = split_numbers(
                manager.load_data, before, decision.broker, decision.bundle, conf
            )
            await aggregation.delete_bundle_data([decision.bundle])
            children = await self._perform(decision, numbers)
            if children is None:
                continue
            done.append(decision)
            self.split_count += 1
            self._record(decision, children, conf, cycle, numbers)
        return done

    async def _perform(
        self, decision: SplitDecision, numbers: Mapping[str, Any]
    ) -> Sequence[str] | None:
        log.info(
            "Load-manager splitting bundle %s of %s and unloading %s: %s (topics=%d, "
            "sessions=%d, long-term msg rate=%.1f msg/s, throughput=%.1f bytes/s, limit=%.6g)",
            decision.bundle,
            decision.broker,
            decision.unload,
            numbers["reason"],
            numbers["bundle_topics"],
            numbers["sessions"],
            numbers["bundle_msg_rate"],
            numbers["bundle_throughput"],
            numbers["threshold"],
        )
        try:
            children = await self._split(decision.bundle, decision.unload)
        except Exception as exc:
            # The split belongs to the owner; Pulsar logs "Failed to split namespace bundle".
            self.failed_splits += 1
            log.error("Failed to split namespace bundle %s: %s", decision.bundle, exc)
            return None
        log.info(
            "Successfully split namespace bundle %s into %s",
            decision.bundle,
            ", ".join(children) or "(no boundary found: not split)",
        )
        return children

    def _record(
        self,
        decision: SplitDecision,
        children: Sequence[str],
        conf: BrokerConfig,
        cycle: int,
        numbers: Mapping[str, Any],
    ) -> None:
        if self._trace is None:
            return
        fields = {k: v for k, v in numbers.items() if k != "sessions"}
        self._trace.append(
            split_record(
                decision,
                list(children),
                wall_ns=self._clock.wall_ns(),
                monotonic=self._clock.now(),
                broker=self._broker_id,
                cycle=cycle,
                strategy=conf.defaultNamespaceBundleSplitAlgorithm,
                **fields,
            )
        )


def layout_from(boundaries: Callable[[str], Sequence[int]]) -> NamespaceLayout:
    """A :class:`NamespaceLayout` over ``namespace -> boundaries`` (``OwnershipTable``)."""
    return _BoundaryLayout(boundaries)


class _BoundaryLayout:
    def __init__(self, boundaries: Callable[[str], Sequence[int]]) -> None:
        self._boundaries = boundaries

    def bundle_count(self, namespace: str) -> int:
        try:
            return max(0, len(self._boundaries(namespace)) - 1)
        except ValueError:  # not a namespace name: nothing of ours to split
            return 0

    def has_bundle(self, bundle: str) -> bool:
        lower, _, upper = bundle.rpartition("/")[2].partition("_")
        try:
            low, high = int(lower, 16), int(upper, 16)
            edges = list(self._boundaries(namespace_of(bundle)))
        except ValueError:
            return False
        return any(a == low and b == high for a, b in itertools.pairwise(edges))
