"""Placement strategies: the cases of Pulsar's ``ModularLoadManagerStrategyTest`` (modular)
and ``LeastResourceUsageWithWeightTest`` (extensible)."""

from __future__ import annotations

import random

import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    TimeAverageBrokerData,
)
from emubroker.loadbalance.model.extensible_data import BrokerLoadData, LoadManagerContext
from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
from emubroker.loadbalance.strategies import extensible_placement
from emubroker.loadbalance.strategies.placement import (
    LeastLongTermMessageRate,
    LeastResourceUsageWithWeight,
    RoundRobinBrokerSelector,
)

WEIGHTED = BrokerConfig(
    loadBalancerCPUResourceWeight=1.0,
    loadBalancerMemoryResourceWeight=0.1,
    loadBalancerDirectMemoryResourceWeight=0.1,
    loadBalancerBandwidthInResourceWeight=1.0,
    loadBalancerBandwidthOutResourceWeight=1.0,
    loadBalancerHistoryResourcePercentage=0.5,
    loadBalancerAverageResourceUsageDifferenceThresholdPercentage=5,
)


def with_usage(usage: float, limit: float = 100) -> BrokerData:
    """Pulsar's initBrokerData(usage, limit): every resource at usage/limit, 100 msg/s each way."""
    sample = ResourceUsage(usage, limit)
    local = LocalBrokerData(
        cpu=sample,
        memory=sample,
        direct_memory=sample,
        bandwidth_in=sample,
        bandwidth_out=sample,
        msg_rate_in=100.0,
        msg_rate_out=100.0,
        bundles={"0x00000000_0xffffffff"},
    )
    return BrokerData(local_data=local)


def test_least_long_term_message_rate() -> None:
    brokers = {name: BrokerData() for name in ("1", "2", "3")}
    for name, rate in (("1", 100), ("2", 200), ("3", 300)):
        brokers[name].time_average_data = TimeAverageBrokerData(long_term_msg_rate_in=rate)
    load_data = LoadData(broker_data=brokers)
    strategy = LeastLongTermMessageRate()
    conf = BrokerConfig()
    assert strategy.select_broker(brokers.keys(), BundleData(), load_data, conf) == "1"
    brokers["1"].time_average_data.long_term_msg_rate_in = 400
    assert strategy.select_broker(brokers.keys(), BundleData(), load_data, conf) == "2"
    brokers["2"].local_data.cpu = ResourceUsage(90, 100)  # overloaded: score +inf
    assert strategy.select_broker(brokers.keys(), BundleData(), load_data, conf) == "3"
    no_cpu = BrokerConfig(loadBalancerCPUResourceWeight=0)
    assert strategy.select_broker(brokers.keys(), BundleData(), load_data, no_cpu) == "2"


def test_least_long_term_message_rate_counts_preallocated_bundles() -> None:
    brokers = {"1": BrokerData(), "2": BrokerData()}
    brokers["1"].time_average_data.long_term_msg_rate_in = 100
    brokers["2"].time_average_data.long_term_msg_rate_in = 150
    brokers["1"].preallocated_bundle_data["b"] = BundleData.initial()
    brokers["1"].preallocated_bundle_data["b"].long_term_data.msg_rate_out = 60
    strategy = LeastLongTermMessageRate()
    assert (
        strategy.select_broker(["1", "2"], BundleData(), LoadData(brokers), BrokerConfig()) == "2"
    )


def test_least_long_term_message_rate_picks_at_random_among_equals() -> None:
    brokers = {name: BrokerData() for name in ("a", "b", "c")}
    brokers["c"].time_average_data.long_term_msg_rate_in = 1
    strategy = LeastLongTermMessageRate(random.Random(3))
    picks = {
        strategy.select_broker(["a", "b", "c"], BundleData(), LoadData(brokers), BrokerConfig())
        for _ in range(40)
    }
    assert picks == {"a", "b"}


def test_all_overloaded_brokers_tie() -> None:
    brokers = {name: with_usage(95) for name in ("a", "b")}
    strategy = LeastLongTermMessageRate(random.Random(5))
    picks = {
        strategy.select_broker(["a", "b"], BundleData(), LoadData(brokers), BrokerConfig())
        for _ in range(30)
    }
    assert picks == {"a", "b"}
    assert strategy.select_broker([], BundleData(), LoadData(brokers), BrokerConfig()) is None


def test_usage_equal_to_the_threshold_is_not_overloaded_for_placement() -> None:
    brokers = {"a": with_usage(85), "b": BrokerData()}
    brokers["b"].time_average_data.long_term_msg_rate_in = 10
    strategy = LeastLongTermMessageRate()
    # a scores 0 (not +inf): 0.85 > 0.85 is false (spec §8.16)
    assert (
        strategy.select_broker(["a", "b"], BundleData(), LoadData(brokers), BrokerConfig()) == "a"
    )


def test_least_resource_usage_with_weight() -> None:
    brokers = {"1": with_usage(10), "2": with_usage(30), "3": with_usage(60), "4": with_usage(5)}
    load_data = LoadData(broker_data=brokers)
    strategy = LeastResourceUsageWithWeight()
    strategy.select_broker(set(brokers), BundleData(), load_data, WEIGHTED)  # broker 4 known too
    candidates = {"1", "2", "3"}
    assert strategy.select_broker(candidates, BundleData(), load_data, WEIGHTED) == "1"
    for usages, expected in (
        ((20, 30, 50), "1"),
        ((30, 30, 40), "1"),
        ((30, 30, 40), "1"),
        ((35, 20, 45), "2"),
    ):
        for name, usage in zip(("1", "2", "3"), usages, strict=True):
            brokers[name] = with_usage(usage)
        assert strategy.select_broker(candidates, BundleData(), load_data, WEIGHTED) == expected
    # A restarted broker (no bundles) starts from its current usage and is among the best.
    brokers["1"], brokers["2"], brokers["3"] = with_usage(35), with_usage(20), with_usage(0)
    brokers["3"].local_data.bundles = set()
    assert strategy.select_broker(candidates, BundleData(), load_data, WEIGHTED) == "3"


def test_least_resource_usage_with_weight_with_preset_history() -> None:
    brokers = {"1": with_usage(10), "2": with_usage(30), "3": with_usage(60), "4": with_usage(5)}
    strategy = LeastResourceUsageWithWeight()
    strategy.broker_avg_resource_usage_with_weight.update({"1": 0.1, "2": 0.3, "4": 0.05})
    assert strategy.select_broker({"1", "2", "3"}, BundleData(), LoadData(brokers), WEIGHTED) == "1"


def test_least_resource_usage_with_weight_forgets_departed_brokers() -> None:
    brokers = {name: BrokerData() for name in ("1", "2", "3")}
    strategy = LeastResourceUsageWithWeight()
    strategy.select_broker(set(brokers), BundleData(), LoadData(brokers), BrokerConfig())
    assert len(strategy.broker_avg_resource_usage_with_weight) == 3
    strategy.on_active_brokers_change(set())
    assert strategy.broker_avg_resource_usage_with_weight == {}


def test_round_robin_broker_selector() -> None:
    strategy = RoundRobinBrokerSelector()
    assert strategy.select_broker(set()) is None
    first = ["1", "2", "3"]
    for i in range(10):
        assert strategy.select_broker(first) == str(i % 3 + 1)
    reordered = ["2", "3", "1"]  # same size, every cached broker still a candidate: cache kept
    for i in range(10, 20):
        assert strategy.select_broker(reordered) == str(i % 3 + 1)
    replaced = ["1", "2", "4"]
    assert [strategy.select_broker(replaced) for _ in range(6)] == ["4", "1", "2"] * 2
    fewer = ["2", "4"]
    assert [strategy.select_broker(fewer) for _ in range(4)] == ["2", "4", "2", "4"]
    strategy.count = 2**31 - 1
    assert strategy.select_broker(first) == str((2**31 - 1) % 3 + 1)
    assert strategy.count == 0


def brokers_load(usage: float, limit: float = 100) -> BrokerLoadData:
    sample = ResourceUsage(usage, limit)
    data = BrokerLoadData()
    data.update(
        SystemResourceUsage(sample, sample, sample, sample, sample), 1, 1, 1, 1, 1, 1, WEIGHTED, 1
    )
    return data


def extensible_context() -> LoadManagerContext:
    store = {
        "1": brokers_load(10),
        "2": brokers_load(30),
        "3": brokers_load(60),
        "4": brokers_load(5),
    }
    return LoadManagerContext(WEIGHTED, broker_load_data_store=store)


def update_load(ctx: LoadManagerContext, broker: str, usage: float) -> None:
    sample = ResourceUsage(usage, 100.0)
    ctx.broker_load_data_store[broker].update(
        SystemResourceUsage(sample, sample, sample, sample, sample), 1, 1, 1, 1, 1, 1, WEIGHTED, 2
    )


def test_extensible_least_resource_usage_with_weight() -> None:
    ctx = extensible_context()
    strategy = extensible_placement.LeastResourceUsageWithWeight()
    candidates = {"1", "2", "3"}
    assert strategy.select(candidates, None, ctx) == "1"
    ctx.broker_load_data_store.update(
        {"1": brokers_load(20), "2": brokers_load(30), "3": brokers_load(50)}
    )
    assert strategy.select(candidates, None, ctx) == "1"
    for usages, expected in (((30, 30, 40), "1"), ((30, 30, 40), "1"), ((35, 20, 45), "2")):
        for name, usage in zip(("1", "2", "3"), usages, strict=True):
            update_load(ctx, name, usage)
        assert strategy.select(candidates, None, ctx) == expected
    update_load(ctx, "1", 35)
    update_load(ctx, "2", 20)
    ctx.broker_load_data_store["3"] = brokers_load(0)  # restarted: its average starts over
    assert strategy.select(candidates, None, ctx) == "3"


def test_extensible_strategy_reads_the_brokers_own_average() -> None:
    ctx = extensible_context()
    store = ctx.broker_load_data_store
    store["1"].weighted_max_ema, store["2"].weighted_max_ema = 0.1, 0.3
    store["4"].weighted_max_ema = 0.05
    assert (
        extensible_placement.LeastResourceUsageWithWeight().select({"1", "2", "3"}, None, ctx)
        == "1"
    )


def test_extensible_strategy_without_load_data() -> None:
    ctx = extensible_context()
    store = ctx.broker_load_data_store
    store["1"], store["2"] = brokers_load(50), brokers_load(100)
    del store["3"], store["4"]
    candidates = {"1", "2", "5"}
    assert extensible_placement.LeastResourceUsageWithWeight().select(candidates, None, ctx) == "1"
    store["1"] = brokers_load(100)
    strategy = extensible_placement.LeastResourceUsageWithWeight(random.Random(2))
    assert {strategy.select(candidates, None, ctx) for _ in range(40)} == candidates
    del store["1"], store["2"]
    assert {strategy.select(candidates, None, ctx) for _ in range(40)} == candidates
    assert strategy.select(set(), None, ctx) is None


@pytest.mark.parametrize("kind", [set, frozenset])
def test_unordered_candidates_iterate_in_java_order(kind: type) -> None:
    # Round robin over a set walks Java's HashSet order, whatever Python's hash seed.
    strategy = RoundRobinBrokerSelector()
    brokers = kind({"broker1:8080", "broker2:8080", "broker3:8080", "broker4:8080", "broker0:8080"})
    order = [strategy.select_broker(brokers) for _ in range(5)]
    assert order == ["broker4:8080", "broker1:8080", "broker2:8080", "broker3:8080", "broker0:8080"]


def test_candidates_without_load_data_do_not_break_placement() -> None:
    # Pulsar dereferences null here; we count such a broker as overloaded / fully used.
    brokers = {"a": with_usage(10)}
    load_data = LoadData(broker_data=brokers)
    assert (
        LeastLongTermMessageRate().select_broker(
            ["a", "ghost"], BundleData(), load_data, BrokerConfig()
        )
        == "a"
    )
    strategy = LeastResourceUsageWithWeight()
    assert strategy.select_broker(["a", "ghost"], BundleData(), load_data, WEIGHTED) == "a"
    assert "ghost" not in strategy.broker_avg_resource_usage_with_weight
