"""The modular load manager's broker selection pipeline (``ModularLoadManagerImpl.selectBroker``).

Spec §3.2, in order:

1. candidates = available brokers allowed by namespace isolation policies (primaries, plus
   secondaries on failover; without a policy, the shared brokers), that accept the topic kind;
2. drop brokers above ``loadBalancerBrokerMaxTopics`` (unless that drops all);
3. keep the brokers owning the fewest namespaces of the bundle's anti-affinity group (per
   failure domain first, with ``failureDomainsEnabled``);
4. with ``loadBalancerDistributeBundlesEvenlyEnabled`` (or for ``pulsar/system``), keep the
   brokers owning the fewest bundles of the bundle's namespace;
5. the filters (load manager class, then version with ``preferLaterVersions``); a filter error
   or an empty result goes back to the step-1 candidates;
6. ``loadBalancerSheddingExcludedNamespaces`` use round robin, all others the placement
   strategy;
7. if the chosen broker's weighted usage exceeds the overload threshold, ask the placement
   strategy again over the step-1 candidates and take its answer.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from emubroker.loadbalance.model.data import SYSTEM_NAMESPACE, weighted_max_usage
from emubroker.loadbalance.strategies.filters import (
    BrokerFilterError,
    filter_brokers_with_large_topic_count,
    filter_by_load_manager_class,
    filter_by_version,
)
from emubroker.loadbalance.strategies.isolation import namespace_of

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from emubroker.config import BrokerConfig
    from emubroker.loadbalance.model.data import BundleData, LoadData
    from emubroker.loadbalance.strategies.isolation import BundleRangeCache, PlacementPolicies
    from emubroker.loadbalance.strategies.placement import (
        ModularLoadManagerStrategy,
        RoundRobinBrokerSelector,
    )

__all__ = [
    "apply_namespace_policies",
    "filter_anti_affinity_group_owned_brokers",
    "remove_most_servicing_brokers_for_namespace",
    "select_broker",
    "should_anti_affinity_namespace_unload",
]

log = logging.getLogger(__name__)

DEFAULT_DOMAIN = "default"


def _broker_host(broker: str) -> str | None:
    index = broker.rfind(":")  # the last colon, so IPv6 hosts keep theirs
    return broker[:index] if index != -1 else None


def apply_namespace_policies(
    bundle: str,
    available_brokers: Collection[str],
    load_data: LoadData,
    policies: PlacementPolicies,
    *,
    non_persistent: bool = False,
) -> list[str]:
    """Step 1: the brokers namespace isolation policies allow for ``bundle``.

    Args:
        bundle: ``tenant/ns/range``.
        available_brokers: Registered broker ids (``host:port``; others are skipped).
        load_data: For each broker's persistent/non-persistent topic support.
        policies: The isolation policies.
        non_persistent: The lookup is for a non-persistent topic.
    """
    namespace = namespace_of(bundle)
    isolation = policies.isolation
    policy = isolation.policy_for(namespace)
    primaries: list[str] = []
    secondaries: list[str] = []
    for broker in available_brokers:
        host = _broker_host(broker)
        if host is None:
            log.error("Unable to parse host from %s", broker)
            continue
        if policy is not None:
            if policy.is_primary_broker(host):
                primaries.append(broker)
            elif policy.is_secondary_broker(host):
                secondaries.append(broker)
            continue
        data = load_data.broker_data.get(broker)
        local = data.local_data if data is not None else None
        if non_persistent and (local is None or not local.non_persistent_topics_enabled):
            continue
        if not non_persistent and (local is None or not local.persistent_topics_enabled):
            continue
        if isolation.is_shared_broker(host):
            secondaries.append(broker)
    if policy is None:
        return secondaries
    if policy.should_failover(len(primaries)):
        return primaries + [b for b in secondaries if b not in primaries]
    return primaries


def filter_anti_affinity_group_owned_brokers(
    bundle: str,
    candidates: list[str],
    ranges: BundleRangeCache,
    policies: PlacementPolicies,
    conf: BrokerConfig,
) -> list[str]:
    """Step 3: prefer domains and brokers with the fewest namespaces of the bundle's group."""
    if not candidates:
        return candidates
    counts = policies.anti_affinity_counts(namespace_of(bundle), ranges)
    if counts is None:
        return candidates
    if conf.failureDomainsEnabled and policies.failure_domains:
        domains = policies.failure_domains
        per_domain: dict[str, int] = {}
        for broker in candidates:
            domain = domains.get(broker, DEFAULT_DOMAIN)
            per_domain[domain] = per_domain.get(domain, 0) + counts.get(broker, 0)
        least_domain = min(per_domain.values())
        candidates = [
            b for b in candidates if per_domain[domains.get(b, DEFAULT_DOMAIN)] == least_domain
        ]
    least = min((counts.get(b, 0) for b in candidates), default=0)
    if least == 0:
        return [b for b in candidates if counts.get(b, 0) == 0]
    return [b for b in candidates if counts.get(b) == least]


def remove_most_servicing_brokers_for_namespace(
    bundle: str, candidates: list[str], ranges: BundleRangeCache
) -> list[str]:
    """Step 4: keep the brokers with the fewest bundles of the bundle's namespace."""
    if not candidates:
        return candidates
    namespace = namespace_of(bundle)
    least = min(ranges.bundle_range_count(b, namespace) for b in candidates)
    return [b for b in candidates if ranges.bundle_range_count(b, namespace) <= least]


def should_anti_affinity_namespace_unload(
    current_broker: str, candidates: Collection[str], counts: Mapping[str, int] | None
) -> bool:
    """Whether unloading a group's namespace from ``current_broker`` can land elsewhere."""
    if not counts:
        return True
    least = min((counts.get(b, 0) for b in candidates), default=2**31 - 1)
    current = counts.get(current_broker, 0) if current_broker in candidates else 0
    if least == 0 or current > least:
        return True
    owners_of_least = sum(1 for b in candidates if counts.get(b, 0) == least)
    return len(candidates) != owners_of_least


def select_broker(
    bundle: str,
    bundle_data: BundleData,
    load_data: LoadData,
    available_brokers: Collection[str],
    conf: BrokerConfig,
    *,
    placement: ModularLoadManagerStrategy,
    round_robin: RoundRobinBrokerSelector,
    policies: PlacementPolicies,
    ranges: BundleRangeCache,
    non_persistent: bool = False,
    considered: list[str] | None = None,
) -> str | None:
    """Choose a broker for ``bundle`` through the whole pipeline (module docstring).

    ``considered``, if given, is filled with the candidates the strategy chose among (for the
    caller's log and trace).

    Returns:
        The broker id, or ``None`` when no broker is available.
    """

    def policy_candidates() -> list[str]:
        return apply_namespace_policies(
            bundle, available_brokers, load_data, policies, non_persistent=non_persistent
        )

    candidates = policy_candidates()
    candidates = filter_brokers_with_large_topic_count(
        candidates, load_data, conf.loadBalancerBrokerMaxTopics
    )
    candidates = filter_anti_affinity_group_owned_brokers(
        bundle, candidates, ranges, policies, conf
    )
    namespace = namespace_of(bundle)
    if conf.loadBalancerDistributeBundlesEvenlyEnabled or namespace == SYSTEM_NAMESPACE:
        candidates = remove_most_servicing_brokers_for_namespace(bundle, candidates, ranges)
    log.info("%d brokers being considered for assignment of %s", len(candidates), bundle)
    try:
        candidates = filter_by_load_manager_class(candidates, load_data, conf)
        candidates = filter_by_version(candidates, load_data, conf)
    except BrokerFilterError as exc:
        log.warning("broker filter failed for %s: %s; using all policy candidates", bundle, exc)
        candidates = policy_candidates()
    if not candidates:
        candidates = policy_candidates()
    if considered is not None:
        considered[:] = candidates
    as_set = set(candidates)
    if namespace in conf.loadBalancerSheddingExcludedNamespaces:
        broker = round_robin.select_broker(as_set, bundle_data, load_data, conf)
    else:
        broker = placement.select_broker(as_set, bundle_data, load_data, conf)
    if broker is None:
        return None
    threshold = conf.loadBalancerBrokerOverloadedThresholdPercentage / 100.0
    chosen = load_data.broker_data.get(broker)
    if chosen is not None and weighted_max_usage(chosen.local_data, conf) > threshold:
        # Every filtered broker was overloaded: look again among all allowed brokers.
        retry = placement.select_broker(set(policy_candidates()), bundle_data, load_data, conf)
        if retry is not None:
            broker = retry
    return broker
