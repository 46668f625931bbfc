"""The modular selection pipeline (spec §3.2): policies, filters, fallbacks."""

from __future__ import annotations

import random

from emubroker.config import BrokerConfig
from emubroker.config.loadbalancer import EXTENSIBLE_LOAD_MANAGER, MODULAR_LOAD_MANAGER
from emubroker.loadbalance.model.data import BrokerData, BundleData, LoadData, LocalBrokerData
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.strategies.isolation import (
    BundleRangeCache,
    NamespaceIsolationPolicies,
    NamespaceIsolationPolicy,
    PlacementPolicies,
)
from emubroker.loadbalance.strategies.placement import (
    LeastLongTermMessageRate,
    RoundRobinBrokerSelector,
)
from emubroker.loadbalance.strategies.selection import (
    apply_namespace_policies,
    filter_anti_affinity_group_owned_brokers,
    select_broker,
    should_anti_affinity_namespace_unload,
)

BUNDLE = "t/ns/0x00000000_0x40000000"
BROKERS = ["b1:8080", "b2:8080", "b3:8080"]


def load_data(**rates: float) -> LoadData:
    data = LoadData()
    for broker in BROKERS:
        local = LocalBrokerData(load_manager_class_name=MODULAR_LOAD_MANAGER)
        data.broker_data[broker] = BrokerData(local_data=local)
        data.broker_data[broker].time_average_data.long_term_msg_rate_in = rates.get(
            broker.split(":")[0], 0.0
        )
    return data


def choose(
    data: LoadData,
    conf: BrokerConfig | None = None,
    *,
    policies: PlacementPolicies | None = None,
    ranges: BundleRangeCache | None = None,
    bundle: str = BUNDLE,
    non_persistent: bool = False,
) -> str | None:
    return select_broker(
        bundle,
        BundleData(),
        data,
        BROKERS,
        conf or BrokerConfig(),
        placement=LeastLongTermMessageRate(random.Random(0)),
        round_robin=RoundRobinBrokerSelector(),
        policies=policies or PlacementPolicies(),
        ranges=ranges or BundleRangeCache(),
        non_persistent=non_persistent,
    )


def test_least_loaded_broker_is_chosen() -> None:
    assert choose(load_data(b1=30, b2=10, b3=20)) == "b2:8080"


def test_brokers_not_accepting_the_topic_kind_are_skipped() -> None:
    data = load_data(b1=30, b2=10, b3=20)
    data.broker_data["b2:8080"].local_data.persistent_topics_enabled = False
    assert choose(data) == "b3:8080"
    data.broker_data["b3:8080"].local_data.non_persistent_topics_enabled = False
    assert choose(data, non_persistent=True) == "b2:8080"


def test_other_load_manager_class_is_filtered_out() -> None:
    data = load_data(b1=30, b2=10, b3=20)
    data.broker_data["b2:8080"].local_data.load_manager_class_name = EXTENSIBLE_LOAD_MANAGER
    assert choose(data) == "b3:8080"


def test_even_distribution_within_a_namespace() -> None:
    ranges = BundleRangeCache()
    ranges.add("b2:8080", "t/ns", "0x40000000_0x80000000")
    data = load_data(b1=30, b2=10, b3=20)
    assert choose(data, ranges=ranges) == "b3:8080"  # b2 already serves a bundle of t/ns
    spread = BrokerConfig(loadBalancerDistributeBundlesEvenlyEnabled=False)
    assert choose(data, spread, ranges=ranges) == "b2:8080"
    system = "pulsar/system/0x00000000_0x40000000"
    ranges.add("b2:8080", "pulsar/system", "0x40000000_0x80000000")
    assert choose(data, spread, ranges=ranges, bundle=system) == "b3:8080"  # always even


def test_overloaded_choice_falls_back_to_all_policy_candidates() -> None:
    ranges = BundleRangeCache()
    for broker in ("b1:8080", "b2:8080"):
        ranges.add(broker, "t/ns", "0x40000000_0x80000000")
    data = load_data(b1=30, b2=10, b3=20)
    data.broker_data["b3:8080"].local_data.cpu = ResourceUsage(95, 100)
    # Even distribution leaves only b3, which is overloaded: ask again over all three.
    assert choose(data, ranges=ranges) == "b2:8080"


def test_version_filter_error_restores_the_candidates() -> None:
    data = load_data(b1=30, b2=10, b3=20)
    data.broker_data["b2:8080"].local_data.broker_version_string = "3.0.0"
    assert choose(data, BrokerConfig(preferLaterVersions=True)) == "b2:8080"  # others: no version
    for broker in BROKERS:
        data.broker_data[broker].local_data.broker_version_string = "3.0.0"
    data.broker_data["b3:8080"].local_data.broker_version_string = "3.1.0"
    assert choose(data, BrokerConfig(preferLaterVersions=True)) == "b3:8080"


def test_shedding_excluded_namespaces_use_round_robin() -> None:
    data = load_data(b1=30, b2=10, b3=20)
    conf = BrokerConfig(
        loadBalancerSheddingExcludedNamespaces=frozenset({"t/ns"}),
        loadBalancerDistributeBundlesEvenlyEnabled=False,
    )
    assert choose(data, conf) == "b1:8080"  # first in Java's HashSet order, not the least loaded


ISOLATED = PlacementPolicies(
    isolation=NamespaceIsolationPolicies(
        {
            "p": NamespaceIsolationPolicy(
                namespaces=("t/ns",), primary=("b1",), secondary=("b2",), min_limit=1
            )
        }
    )
)


def test_isolation_primaries_then_secondaries() -> None:
    data = load_data(b1=30, b2=10, b3=20)
    assert apply_namespace_policies(BUNDLE, BROKERS, data, ISOLATED) == ["b1:8080"]
    assert choose(data, policies=ISOLATED) == "b1:8080"
    without_b1 = [b for b in BROKERS if b != "b1:8080"]
    assert apply_namespace_policies(BUNDLE, without_b1, data, ISOLATED) == ["b2:8080"]
    # b1 is some policy's primary: other namespaces may not use it.
    other = "t/other/0x00000000_0xffffffff"
    assert apply_namespace_policies(other, BROKERS, data, ISOLATED) == ["b2:8080", "b3:8080"]


def test_broker_ids_without_a_port_are_skipped() -> None:
    data = load_data()
    assert (
        apply_namespace_policies(BUNDLE, ["nohost", *BROKERS], data, PlacementPolicies()) == BROKERS
    )


def test_anti_affinity_prefers_brokers_without_the_group() -> None:
    policies = PlacementPolicies(anti_affinity_groups={"t/ns": "g", "t/other": "G"})
    ranges = BundleRangeCache()
    ranges.add("b1:8080", "t/other", "0x00000000_0xffffffff")  # same group, case-insensitive
    assert filter_anti_affinity_group_owned_brokers(
        BUNDLE, BROKERS, ranges, policies, BrokerConfig()
    ) == ["b2:8080", "b3:8080"]
    for broker in ("b2:8080", "b3:8080"):
        ranges.add(broker, "t/other", "0x00000000_0xffffffff")
    ranges.add("b1:8080", "t/third", "0x0_0x1")
    assert (
        filter_anti_affinity_group_owned_brokers(BUNDLE, BROKERS, ranges, policies, BrokerConfig())
        == BROKERS
    )  # all own one: keep those with the least (all)


def test_anti_affinity_failure_domains() -> None:
    policies = PlacementPolicies(
        anti_affinity_groups={"t/ns": "g", "t/other": "g"},
        failure_domains={"b1:8080": "d1", "b2:8080": "d1", "b3:8080": "d2"},
    )
    ranges = BundleRangeCache()
    ranges.add("b1:8080", "t/other", "0x00000000_0xffffffff")
    conf = BrokerConfig(failureDomainsEnabled=True)
    assert filter_anti_affinity_group_owned_brokers(BUNDLE, BROKERS, ranges, policies, conf) == [
        "b3:8080"
    ]
    assert filter_anti_affinity_group_owned_brokers(
        BUNDLE, BROKERS, ranges, policies, BrokerConfig()
    ) == ["b2:8080", "b3:8080"]


def test_anti_affinity_unload_only_if_it_can_land_elsewhere() -> None:
    assert should_anti_affinity_namespace_unload("a", ["a", "b"], None)
    assert should_anti_affinity_namespace_unload("a", ["a", "b"], {"a": 1})  # b owns none
    assert not should_anti_affinity_namespace_unload("a", ["a", "b"], {"a": 1, "b": 1})
    assert should_anti_affinity_namespace_unload("a", ["a", "b"], {"a": 2, "b": 1})
