"""The extensible load manager's broker selection (spec §4.7, last paragraph).

:func:`select_extensible_broker` is ``ExtensibleLoadManagerImpl.selectAsync`` (the filter
pipeline, then the strategy); :class:`LeastResourceUsageWithWeight` is its default strategy.

``LeastResourceUsageWithWeight`` here is Pulsar's ``extensions.strategy`` class, not the
modular one of the same name: it reads each broker's own ``weighted_max_ema`` instead of
keeping averages, and brokers without load data are left out of the mean and of the best set
but stay in the random fallback.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

from emubroker.loadbalance.model.data import BundleData, default_bundle_stats
from emubroker.loadbalance.strategies.filters import (
    BrokerFilterError,
    filter_by_load_manager_class,
    filter_by_max_topic_count,
    filter_by_version,
)
from emubroker.loadbalance.strategies.isolation import namespace_of
from emubroker.loadbalance.strategies.placement import in_java_order
from emubroker.loadbalance.strategies.selection import (
    apply_namespace_policies,
    filter_anti_affinity_group_owned_brokers,
)

if TYPE_CHECKING:
    from collections.abc import Collection

    from emubroker.loadbalance.model.data import LoadData
    from emubroker.loadbalance.model.extensible_data import LoadManagerContext
    from emubroker.loadbalance.strategies.isolation import BundleRangeCache, PlacementPolicies
    from emubroker.loadbalance.strategies.placement import RoundRobinBrokerSelector

__all__ = ["LeastResourceUsageWithWeight", "select_extensible_broker"]

log = logging.getLogger(__name__)


class LeastResourceUsageWithWeight:
    """Pick at random among brokers whose load is at least the threshold below the mean.

    Args:
        rng: Source of the random choice (seeded for reproducible runs).
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random(0)

    def select(
        self, candidates: Collection[str], bundle_to_assign: object, context: LoadManagerContext
    ) -> str | None:
        """The broker for ``bundle_to_assign`` (unused, as in Pulsar); ``None`` if no candidate."""
        ordered = in_java_order(candidates)
        if not ordered:
            log.warning("no broker candidates for %s", bundle_to_assign)
            return None
        conf = context.broker_configuration
        store = context.broker_load_data_store
        threshold = conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
        with_data = [b for b in ordered if b in store]
        total = 0.0
        for broker in with_data:
            load = store[broker].weighted_max_ema
            if load > threshold:
                log.warning("broker %s is overloaded: %.1f%%", broker, 100 * load)
            total += load
        best: list[str] = []
        if with_data:
            mean = total / len(with_data)
            margin = conf.loadBalancerAverageResourceUsageDifferenceThresholdPercentage / 100.0
            best = [b for b in with_data if store[b].weighted_max_ema + margin <= mean]
        if not best:
            best = ordered
        return best[self._rng.randrange(len(best))]


def select_extensible_broker(
    bundle: str,
    registered: Collection[str],
    context: LoadManagerContext,
    *,
    load_data: LoadData,
    policies: PlacementPolicies,
    ranges: BundleRangeCache,
    strategy: LeastResourceUsageWithWeight,
    round_robin: RoundRobinBrokerSelector,
    considered: list[str] | None = None,
) -> str | None:
    """``ExtensibleLoadManagerImpl.selectAsync``: the filter pipeline, then the strategy.

    Filters, in Pulsar's order: load manager class, max topic count (inclusive), version (with
    ``preferLaterVersions``), anti-affinity group, isolation policies. A filter that fails
    leaves the candidates as the filters before it left them (Pulsar logs the error and goes
    on); no candidate left: no broker. Shedding-excluded namespaces use round robin.

    Args:
        bundle: ``tenant/ns/range``.
        registered: The registered brokers.
        context: The brokers' ``BrokerLoadData`` and the configuration.
        load_data: The brokers' reports (load manager class, version, topic kinds).
        policies: Isolation policies and anti-affinity groups.
        ranges: Broker -> namespace -> bundle ranges (anti-affinity counts).
        strategy: The extensible ``LeastResourceUsageWithWeight``.
        round_robin: The selector of shedding-excluded namespaces.
        considered: Filled with the final candidates, for the caller's log and trace.
    """
    conf = context.broker_configuration
    candidates = list(registered)
    try:
        candidates = filter_by_load_manager_class(candidates, load_data, conf)
        candidates = filter_by_max_topic_count(candidates, context.broker_load_data_store, conf)
        candidates = filter_by_version(candidates, load_data, conf)
        candidates = filter_anti_affinity_group_owned_brokers(
            bundle, candidates, ranges, policies, conf
        )
        allowed = set(apply_namespace_policies(bundle, candidates, load_data, policies))
        candidates = [b for b in candidates if b in allowed]
    except BrokerFilterError as exc:
        log.error("Failed to filter out brokers when select bundle: %s: %s", bundle, exc)
    if considered is not None:
        considered[:] = candidates
    if not candidates:
        return None
    if namespace_of(bundle) in conf.loadBalancerSheddingExcludedNamespaces:
        bundle_data = load_data.bundle_data.get(bundle) or BundleData.initial(
            default_stats=default_bundle_stats()
        )
        return round_robin.select_broker(set(candidates), bundle_data, load_data, conf)
    return strategy.select(candidates, bundle, context)
