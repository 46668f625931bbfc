"""The extensible load manager's TransferShedder (spec §4.7), as a pure object.

It balances ``BrokerLoadData.weighted_max_ema`` across brokers: while the population standard
deviation of the loads exceeds ``loadBalancerBrokerLoadTargetStd`` (or the least loaded broker
is underloaded, or the most loaded overloaded), it pairs the most loaded broker with the least
loaded one and moves top bundles from the first to the second, enough to close half the gap,
optionally swapping bundles back. Decisions name the destination in transfer mode
(``loadBalancerTransferEnabled``). Like Pulsar, the running deviation is updated as if each
transfer had already happened, so one cycle pairs up to
``loadBalancerMaxNumberOfBrokerSheddingPerCycle`` brokers.

The one piece of state between cycles is the consecutive-hit counter of the shedding condition
(``loadBalancerSheddingConditionHitCountThreshold``). Quirk kept from Pulsar: bundles swapped
from the idle broker count as gained traffic only when ``loadBalancerDebugModeEnabled``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from emubroker.loadbalance.model.data import bundle_namespace
from emubroker.loadbalance.model.extensible_data import (
    BrokerLoadData,
    Label,
    LoadManagerContext,
    Reason,
    Unload,
    UnloadCounter,
    UnloadDecision,
)
from emubroker.loadbalance.model.usage import java_div
from emubroker.loadbalance.strategies.filters import BrokerFilterError
from emubroker.loadbalance.strategies.load_stats import LoadStats

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, MutableMapping


__all__ = [
    "LoadStats",  # re-exported from load_stats
    "TransferPolicies",
    "TransferShedder",
]

log = logging.getLogger(__name__)


class TransferPolicies(Protocol):
    """The namespace policies a transfer must respect (isolation, anti-affinity, filters)."""

    def has_isolation_policy(self, namespace: str) -> bool:
        """Whether the namespace has a namespace isolation policy."""
        ...

    def has_anti_affinity_group_policy(self, bundle: str) -> bool:
        """Whether the bundle's namespace belongs to an anti-affinity group."""
        ...

    def filter_brokers(self, brokers: set[str], bundle: str) -> set[str]:
        """The brokers that may own ``bundle`` (the broker filter pipeline).

        Raises:
            BrokerFilterError: A filter failed; the bundle is then not transferable.
        """
        ...


class TransferShedder:
    """Pulsar's ``TransferShedder`` (``NamespaceUnloadStrategy``).

    Args:
        counter: Where skip and failure reasons are counted (a new one if omitted).
        policies: Isolation/anti-affinity policies and broker filters; without them every
            bundle is transferable (Pulsar's test constructor).
        is_owner: Whether a broker owns a bundle (the service-unit state channel); without it
            every reported bundle is owned.

    Attributes:
        stats: The load statistics of the last cycle.
        unload_condition_hit_count: Consecutive cycles the shedding condition held.
    """

    def __init__(
        self,
        counter: UnloadCounter | None = None,
        *,
        policies: TransferPolicies | None = None,
        is_owner: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.counter = counter if counter is not None else UnloadCounter()
        self.stats = LoadStats()
        self.unload_condition_hit_count = 0
        self._policies = policies
        self._is_owner = is_owner

    def find_bundles_for_unloading(
        self,
        context: LoadManagerContext,
        recently_unloaded_bundles: Mapping[str, int],
        recently_unloaded_brokers: MutableMapping[str, int],
    ) -> set[UnloadDecision]:
        """This cycle's unload decisions.

        Args:
            context: Broker loads, top bundles, registered brokers, configuration and time.
            recently_unloaded_bundles: Bundle -> when it was last unloaded (ms); skipped.
            recently_unloaded_brokers: Broker -> when it last gave up a bundle (ms); entries
                past ``loadBalanceSheddingDelayInSeconds`` are removed.
        """
        conf = context.broker_configuration
        decisions: set[UnloadDecision] = set()
        stats = self.stats
        stats.clear()
        if context.available_brokers is None:
            self.counter.update(Label.Failure, Reason.Unknown)
            log.warning("TransferShedder: failed to fetch available brokers; stop unloading")
            return decisions
        store = context.broker_load_data_store
        stats.set_load_data_store(store)
        skip = stats.update(
            store, context.available_brokers, recently_unloaded_brokers, conf, context.now
        )
        if skip is not None:
            self.counter.update(Label.Skip, skip)
            return decisions
        self.counter.update_load_data(stats.avg, stats.std)
        target_std = conf.loadBalancerBrokerLoadTargetStd
        if (
            stats.std > target_std
            or self._is_underloaded(context, stats.peek_min_broker())
            or self._is_overloaded(context, stats.peek_max_broker())
        ):
            self.unload_condition_hit_count += 1
        else:
            self.unload_condition_hit_count = 0
        if self.unload_condition_hit_count <= conf.loadBalancerSheddingConditionHitCountThreshold:
            self.counter.update(Label.Skip, Reason.HitCount)
            return decisions
        cycle = _Cycle(self, context, recently_unloaded_bundles, decisions)
        cycle.run()
        if not decisions:
            if cycle.brokers_with_empty_load_data:
                reason = Reason.NoLoadData
            elif cycle.brokers_with_few_bundles:
                reason = Reason.NoBundles
            else:
                reason = Reason.HitCount
            self.counter.update(Label.Skip, reason)
        else:
            self.unload_condition_hit_count = 0
        return decisions

    def explain(self, decision: UnloadDecision, context: LoadManagerContext) -> dict[str, Any]:
        """The numbers behind ``decision`` of the cycle just run (its log line and trace row).

        The two brokers' ``weightedMaxEMA`` (-1 when unknown), the cluster's mean load and the
        target deviation (docs/load-balancer-trace.md); the reason comes with the decision.
        """
        loads = context.broker_load_data_store
        source = loads.get(decision.unload.source_broker)
        dest = loads.get(decision.unload.dest_broker or "")
        return {
            "broker_load": source.weighted_max_ema if source else -1.0,
            "dest_load": dest.weighted_max_ema if dest else -1.0,
            "cluster_load": self.stats.avg,
            "threshold": context.broker_configuration.loadBalancerBrokerLoadTargetStd,
        }

    def _is_underloaded(self, context: LoadManagerContext, broker: str) -> bool:
        store = context.broker_load_data_store
        data = store.get(broker)
        if data is None:
            return False
        multiplier = min(
            0.5, max(0.0, context.broker_configuration.loadBalancerBrokerLoadTargetStd / 2.0)
        )
        if data.weighted_max_ema < self.stats.avg * multiplier:
            return True
        max_data = store.get(self.stats.peek_max_broker())
        if max_data is None:
            return False
        return data.msg_throughput_ema < max_data.msg_throughput_ema * multiplier

    def _is_overloaded(self, context: LoadManagerContext, broker: str) -> bool:
        data = context.broker_load_data_store.get(broker)
        if data is None:
            return False
        conf = context.broker_configuration
        threshold = conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
        load = data.weighted_max_ema
        return load > threshold and load > self.stats.avg + conf.loadBalancerBrokerLoadTargetStd

    def is_transferable(
        self, context: LoadManagerContext, bundle: str, source: str, destination: str | None
    ) -> bool:
        """Whether policies and filters let ``bundle`` leave ``source`` (for ``destination``)."""
        policies = self._policies
        if policies is None:
            return True
        if not self.sheds_bundles_with_policies(context, bundle):
            return False
        try:
            candidates = policies.filter_brokers(set(context.available_brokers or ()), bundle)
        except BrokerFilterError as exc:
            log.error("TransferShedder: broker filter failed for %s: %s", bundle, exc)
            return False
        if destination is not None and destination not in candidates:
            return False
        candidates.discard(source)
        if destination is None or not context.broker_configuration.loadBalancerTransferEnabled:
            return bool(candidates)
        return destination in candidates

    def sheds_bundles_with_policies(self, context: LoadManagerContext, bundle: str) -> bool:
        """Whether a bundle with isolation or anti-affinity policies may be shed.

        True without such policies, else ``loadBalancerSheddingBundlesWithPoliciesEnabled``
        (``isLoadBalancerSheddingBundlesWithPoliciesEnabled``).
        """
        policies = self._policies
        enabled = context.broker_configuration.loadBalancerSheddingBundlesWithPoliciesEnabled
        if policies is not None and policies.has_isolation_policy(bundle_namespace(bundle)):
            return enabled
        if policies is not None and policies.has_anti_affinity_group_policy(bundle):
            return enabled
        return True


class _Cycle:
    """The pairing loop of one ``find_bundles_for_unloading`` call."""

    def __init__(
        self,
        shedder: TransferShedder,
        context: LoadManagerContext,
        recently_unloaded_bundles: Mapping[str, int],
        decisions: set[UnloadDecision],
    ) -> None:
        self.shedder = shedder
        self.context = context
        self.conf = context.broker_configuration
        self.recent = recently_unloaded_bundles
        self.decisions = decisions
        self.brokers_with_empty_load_data = 0
        self.brokers_with_few_bundles = 0

    def run(self) -> None:
        shedder, stats, conf = self.shedder, self.shedder.stats, self.conf
        store = self.context.broker_load_data_store
        target_std = conf.loadBalancerBrokerLoadTargetStd
        while stats.has_transferable_brokers():
            if stats.std > target_std:
                reason = Reason.Overloaded
            elif shedder._is_underloaded(self.context, stats.peek_min_broker()):
                reason = Reason.Underloaded
            elif shedder._is_overloaded(self.context, stats.peek_max_broker()):
                reason = Reason.Overloaded
            else:
                break
            max_broker = stats.poll_max_broker()
            min_broker = stats.peek_min_broker()
            max_data, min_data = store.get(max_broker), store.get(min_broker)
            if max_data is None or min_data is None:
                self.brokers_with_empty_load_data += 1
                continue
            self._shed_pair(reason, max_broker, min_broker, max_data, min_data)

    def _shed_pair(
        self,
        reason: Reason,
        max_broker: str,
        min_broker: str,
        max_data: BrokerLoadData,
        min_data: BrokerLoadData,
    ) -> None:
        context, conf, stats = self.context, self.conf, self.shedder.stats
        max_load, min_load = max_data.weighted_max_ema, min_data.weighted_max_ema
        offload = (max_load - min_load) / 2
        max_throughput = max_data.msg_throughput_in + max_data.msg_throughput_out
        min_throughput = min_data.msg_throughput_in + min_data.msg_throughput_out
        offload_throughput = java_div(max_throughput * offload, max_load)
        transfer, debug = conf.loadBalancerTransferEnabled, conf.loadBalancerDebugModeEnabled
        top = context.top_bundle_load_data_store.get(max_broker)
        if top is None or not top.top_bundles_load_data:
            self.brokers_with_empty_load_data += 1
            return
        max_top = top.top_bundles_load_data
        if len(max_top) == 1:
            self.brokers_with_few_bundles += 1
            log.warning(
                "TransferShedder: sole bundle %s overloads %s", max_top[0].bundle_name, max_broker
            )
            return
        min_top = context.top_bundle_load_data_store.get(min_broker)
        min_iter = iter(min_top.top_bundles_load_data) if min_top is not None else None
        marked = gained = 0.0
        remaining = len(max_top)
        excluded = conf.loadBalancerSheddingExcludedNamespaces
        is_owner = self.shedder._is_owner
        for entry in max_top:
            bundle = entry.bundle_name
            if is_owner is not None and not is_owner(bundle, max_broker):
                continue
            if bundle_namespace(bundle) in excluded or bundle in self.recent:
                continue
            if not self.shedder.is_transferable(context, bundle, max_broker, min_broker):
                continue
            if remaining <= 1:
                break
            bundle_throughput = entry.stats.msg_throughput_in + entry.stats.msg_throughput_out
            if bundle_throughput == 0:
                continue
            swap = False
            swaps: list[Unload] = []
            swap_throughput = 0.0
            if marked - gained + bundle_throughput > offload_throughput:
                if transfer and min_iter is not None:
                    max_new = max_throughput - marked + gained - bundle_throughput
                    min_new = min_throughput + marked - gained + bundle_throughput
                    for candidate in min_iter:
                        if not self.shedder.is_transferable(
                            context, candidate.bundle_name, min_broker, max_broker
                        ):
                            continue
                        throughput = (
                            candidate.stats.msg_throughput_in + candidate.stats.msg_throughput_out
                        )
                        if throughput == 0:
                            continue
                        max_tmp, min_tmp = max_new + throughput, min_new - throughput
                        if max_tmp < max_throughput and min_tmp < max_throughput:
                            swaps.append(Unload(min_broker, candidate.bundle_name, max_broker))
                            max_new, min_new = max_tmp, min_tmp
                            swap_throughput += throughput
                            if min_new <= max_new and max_new < max_throughput * 0.75:
                                swap = True
                                break
                if not swap:
                    break
            if transfer:
                if swap:
                    for unload in swaps:
                        self.decisions.add(UnloadDecision(unload, Label.Success, reason))
                    if debug:
                        gained += swap_throughput
                unload = Unload(max_broker, bundle, min_broker)
            else:
                unload = Unload(max_broker, bundle)
            self.decisions.add(UnloadDecision(unload, Label.Success, reason))
            marked += bundle_throughput
            remaining -= 1
            log.info(
                "TransferShedder: %s %s from %s%s (%s)",
                "transferring" if transfer else "unloading",
                bundle,
                max_broker,
                f" to {min_broker}" if transfer else "",
                reason,
            )
        if marked > 0:
            stats.offload(
                max_load, min_load, java_div((marked - gained) * max_load, max_throughput)
            )
        else:
            self.brokers_with_few_bundles += 1
            log.warning(
                "TransferShedder: nothing in the top bundles of %s can be unloaded", max_broker
            )
