"""The extensible manager's data: Pulsar's ``BrokerLoadDataTest`` and ``TopKBundlesTest``."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LocalBrokerData, NamespaceBundleStats
from emubroker.loadbalance.model.extensible_data import (
    BrokerLoadData,
    partition_sort,
    top_k_bundles,
)
from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
from emubroker.loadbalance.strategies.isolation import (
    NamespaceIsolationPolicies,
    NamespaceIsolationPolicy,
    PlacementPolicies,
)

HALF = BrokerConfig(
    loadBalancerCPUResourceWeight=0.5,
    loadBalancerMemoryResourceWeight=0.5,
    loadBalancerDirectMemoryResourceWeight=0.5,
    loadBalancerBandwidthInResourceWeight=0.5,
    loadBalancerBandwidthOutResourceWeight=0.5,
    loadBalancerHistoryResourcePercentage=0.75,
)


def usage(cpu: float, memory: float) -> SystemResourceUsage:
    return SystemResourceUsage(
        cpu=ResourceUsage(cpu, 100.0),
        memory=ResourceUsage(memory, 200.0),
        direct_memory=ResourceUsage(2.0, 100.0),
        bandwidth_in=ResourceUsage(3.0, 100.0),
        bandwidth_out=ResourceUsage(4.0, 100.0),
    )


def test_update_by_system_resource_usage() -> None:
    data = BrokerLoadData()
    data.update(usage(1.0, 800.0), 1, 2, 3, 4, 5, 6, HALF, 1000)
    assert (
        data.msg_throughput_in,
        data.msg_throughput_out,
        data.msg_rate_in,
        data.msg_rate_out,
    ) == (
        1.0,
        2.0,
        3.0,
        4.0,
    )
    assert (data.bundle_count, data.topics, data.updated_at) == (5, 6, 1000)
    assert data.max_resource_usage == 0.04  # memory skipped
    assert data.weighted_max_ema == 2  # memory at 400 % counts with its weight
    assert data.msg_throughput_ema == 3
    data.update(usage(300.0, 200.0), 5, 6, 7, 8, 9, 10, HALF, 2000)
    assert data.max_resource_usage == 3.0
    assert data.weighted_max_ema == 1.875  # 2 * 0.75 + 1.5 * 0.25
    assert data.msg_throughput_ema == 5
    assert data.reported_at == 0
    assert data.to_string(HALF) == (
        "cpu= 300.00%, memory= 100.00%, directMemory= 2.00%, bandwidthIn= 3.00%, "
        "bandwidthOut= 4.00%, cpuWeight= 0.500000, memoryWeight= 0.500000, "
        "directMemoryWeight= 0.500000, bandwidthInResourceWeight= 0.500000, "
        "bandwidthOutResourceWeight= 0.500000, msgThroughputIn= 5.00, msgThroughputOut= 6.00, "
        "msgRateIn= 7.00, msgRateOut= 8.00, bundleCount= 9, maxResourceUsage= 300.00%, "
        "weightedMaxEMA= 187.50%, msgThroughputEMA= 5.00, updatedAt= 2000, reportedAt= 0"
    )
    data.clear()
    assert data == BrokerLoadData()


def test_update_by_broker_load_data() -> None:
    other = BrokerLoadData()
    other.update(usage(1.0, 800.0), 1, 2, 3, 4, 5, 6, HALF, 1000)
    data = BrokerLoadData()
    data.update_from(other)
    assert data == other
    data.clear()
    assert data == BrokerLoadData()


def test_updates_at_time_zero_move_the_averages() -> None:
    # A simulation's clock starts at the epoch: the second update at ``now == 0`` is not a
    # first one, so the averages keep their history (Pulsar's ``updatedAt == 0`` test would
    # restart them at every update of that millisecond).
    data = BrokerLoadData()
    data.update(usage(1.0, 800.0), 1, 2, 3, 4, 5, 6, HALF, 0)
    assert (data.weighted_max_ema, data.msg_throughput_ema) == (2, 3)
    data.update(usage(300.0, 200.0), 5, 6, 7, 8, 9, 10, HALF, 0)
    assert data.weighted_max_ema == 1.875  # 2 * 0.75 + 1.5 * 0.25
    assert data.msg_throughput_ema == 5  # 3 * 0.75 + 11 * 0.25
    copy = BrokerLoadData()
    copy.update_from(data)
    copy.update(usage(300.0, 200.0), 5, 6, 7, 8, 9, 10, HALF, 0)
    assert copy.msg_throughput_ema == 6.5  # 5 * 0.75 + 11 * 0.25
    data.clear()
    data.update(usage(1.0, 800.0), 1, 2, 3, 4, 5, 6, HALF, 0)
    assert data.msg_throughput_ema == 3  # cleared: a first update again


B1, B2, B3, B4 = (f"my-tenant/my-namespace{i}/0x00000000_0x0FFFFFFF" for i in range(1, 5))


def stats(rate: float, throughput_out: float = 10) -> NamespaceBundleStats:
    return NamespaceBundleStats(msg_rate_in=rate, msg_throughput_out=throughput_out)


def names(top: object) -> list[str]:
    return [b.bundle_name for b in top.top_bundles_load_data]  # type: ignore[attr-defined]


def test_top_bundles_load_data() -> None:
    bundle_stats = {B1: stats(100000), B2: stats(500), B3: stats(10000), B4: stats(0, 0)}
    assert names(top_k_bundles(bundle_stats, 3, BrokerConfig())) == [B2, B3, B1]


def test_system_namespace_is_left_out() -> None:
    bundle_stats = {"pulsar/system/0x00000000_0x0FFFFFFF": stats(500), B1: stats(10000)}
    assert names(top_k_bundles(bundle_stats, 2, BrokerConfig())) == [B1]


def test_shedding_excluded_namespaces_are_left_out() -> None:
    conf = BrokerConfig(
        loadBalancerSheddingExcludedNamespaces=frozenset({"my-tenant/my-namespace2"})
    )
    bundle_stats = {B2: stats(500, 0), B1: stats(10000)}
    assert names(top_k_bundles(bundle_stats, 2, conf)) == [B1]


def test_zero_throughput_bundles_are_left_out() -> None:
    assert names(top_k_bundles({B1: NamespaceBundleStats()}, 2, BrokerConfig())) == []


POLICIES = PlacementPolicies(
    isolation=NamespaceIsolationPolicies(
        {
            "policy": NamespaceIsolationPolicy(
                namespaces=("my-tenant/my-namespace1.*",),
                primary=("prod1-broker[1-3].messaging.use.example.com",),
                secondary=("prod1-broker.*.use.example.com",),
                min_limit=3,
            )
        }
    ),
    anti_affinity_groups={"my-tenant/my-namespace2": "namespaceAntiAffinityGroup"},
)


def test_bundles_with_policies_are_left_out_unless_enabled() -> None:
    bundle_stats = {B1: stats(500), B2: stats(10000)}
    isolation_only = PlacementPolicies(isolation=POLICIES.isolation)
    assert names(
        top_k_bundles(bundle_stats, 2, BrokerConfig(), has_policies=isolation_only.has_policies)
    ) == [B2]
    affinity_only = PlacementPolicies(anti_affinity_groups=POLICIES.anti_affinity_groups)
    assert names(
        top_k_bundles(bundle_stats, 2, BrokerConfig(), has_policies=affinity_only.has_policies)
    ) == [B1]
    enabled = BrokerConfig(loadBalancerSheddingBundlesWithPoliciesEnabled=True)
    assert names(top_k_bundles(bundle_stats, 2, enabled, has_policies=POLICIES.has_policies)) == [
        B1,
        B2,
    ]
    assert (
        names(top_k_bundles(bundle_stats, 2, BrokerConfig(), has_policies=POLICIES.has_policies))
        == []
    )


@given(st.lists(st.integers(0, 9), min_size=1, max_size=10), st.data())
def test_partition_sort_puts_the_k_largest_first(values: list[int], data: st.DataObject) -> None:
    k = data.draw(st.integers(1, len(values)))
    items = list(values)
    partition_sort(items, k, lambda a, b: (a > b) - (a < b))
    assert items[:k] == sorted(values, reverse=True)[:k]
    assert sorted(items) == sorted(values)


def test_partition_sort_random_cases_like_pulsars() -> None:
    rng = random.Random(0)
    for _ in range(100):
        size = rng.randrange(10) + 1
        values = [rng.randrange(size) for _ in range(size)]
        k = rng.randrange(size) + 1
        items = list(values)
        partition_sort(items, k, lambda a, b: (a > b) - (a < b))
        assert items[:k] == sorted(values, reverse=True)[:k]


def test_defaults_are_pulsars() -> None:
    # A load record starts at new ResourceUsage() = (0, 0); a measurement at (-1, -1).
    record_fields = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
    for record in (LocalBrokerData(), BrokerLoadData()):
        assert {getattr(record, f) for f in record_fields} == {ResourceUsage(0, 0)}
    sample = SystemResourceUsage()
    assert {getattr(sample, f) for f in record_fields} == {ResourceUsage(-1, -1)}
    assert ResourceUsage(-1, -1).percent_usage() == ResourceUsage(0, 0).percent_usage() == 0
