"""AvgShedder: Pulsar's ``AvgShedderTest`` and the AvgShedder cases of
``ModularLoadManagerStrategyTest``, plus the comparator quirk."""

from __future__ import annotations

import random

import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import BundleData, LoadData, LocalBrokerData
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.strategies.avg_shedder import AvgShedder
from tests.support.loadbalance import broker, short_term

HIGH = BrokerConfig(
    maxUnloadPercentage=0.5,
    loadBalancerAvgShedderHighThreshold=40,
    loadBalancerAvgShedderHitCountHighThreshold=2,
)


def three_brokers(cpu: tuple[float, float, float]) -> LoadData:
    """broker1 busy (20000 msg/s), broker2 idle (2000), broker3 in the middle (10000)."""
    rates = (10000, 1000, 5000)
    load_data = LoadData()
    for name, usage, rate in zip(("broker1", "broker2", "broker3"), cpu, rates, strict=True):
        local = LocalBrokerData(cpu=ResourceUsage(usage, 100), msg_rate_in=rate, msg_rate_out=rate)
        load_data.broker_data[name] = broker(local)
    add_bundles(load_data, "broker1", "bundle-", 0)
    return load_data


def add_bundles(load_data: LoadData, owner: str, prefix: str, first_sample: int) -> None:
    """11 bundles of 900 msg/s; distinct num_samples so that their data differ (as Pulsar's)."""
    for i in range(11):
        load_data.broker_data[owner].local_data.bundles.add(f"{prefix}{i}")
        load_data.bundle_data[f"{prefix}{i}"] = short_term(
            rate_in=450, rate_out=450, num_samples=first_sample + i
        )


def test_hit_high_threshold() -> None:
    load_data = three_brokers((80, 30, 50))
    shedder = AvgShedder()
    assert shedder.find_bundles_for_unloading(load_data, HIGH) == {}
    result = shedder.find_bundles_for_unloading(load_data, HIGH)
    # (20000 - 2000) * 0.5 = 9000 msg/s = ten bundles of 900 (spec §4.5's example).
    assert list(result) == ["broker1"]
    assert len(result["broker1"]) == 10
    everyone = list(load_data.broker_data)
    for bundle in result["broker1"]:
        data = load_data.bundle_data[bundle]
        assert shedder.select_broker(everyone, data, load_data, HIGH) == "broker2"


def test_hit_low_threshold() -> None:
    conf = BrokerConfig(
        maxUnloadPercentage=0.5,
        loadBalancerAvgShedderLowThreshold=20,
        loadBalancerAvgShedderHitCountLowThreshold=6,
    )
    load_data = three_brokers((60, 40, 50))
    shedder = AvgShedder()
    for _ in range(5):
        assert shedder.find_bundles_for_unloading(load_data, conf) == {}
    result = shedder.find_bundles_for_unloading(load_data, conf)
    assert list(result) == ["broker1"]
    assert len(result["broker1"]) == 10
    for bundle in result["broker1"]:
        data = load_data.bundle_data[bundle]
        assert shedder.select_broker(set(load_data.broker_data), data, load_data, conf) == "broker2"


def test_shedding_multiple_pairs() -> None:
    load_data = LoadData()
    for name, cpu, rate in (
        ("broker1", 80, 10000),
        ("broker2", 30, 1000),
        ("broker3", 75, 10000),
        ("broker4", 35, 1000),
    ):
        local = LocalBrokerData(cpu=ResourceUsage(cpu, 100), msg_rate_in=rate, msg_rate_out=rate)
        load_data.broker_data[name] = broker(local)
    add_bundles(load_data, "broker1", "bundle1-", 0)
    add_bundles(load_data, "broker3", "bundle3-", 11)
    shedder = AvgShedder()
    assert shedder.find_bundles_for_unloading(load_data, HIGH) == {}
    result = shedder.find_bundles_for_unloading(load_data, HIGH)
    assert sorted(result) == ["broker1", "broker3"]
    assert len(result["broker1"]) == len(result["broker3"]) == 10
    everyone = list(load_data.broker_data)
    for source, destination in (("broker1", "broker2"), ("broker3", "broker4")):
        for bundle in result[source]:
            data = load_data.bundle_data[bundle]
            assert shedder.select_broker(everyone, data, load_data, HIGH) == destination


def test_small_gap_resets_the_counters() -> None:
    load_data = three_brokers((80, 30, 50))
    shedder = AvgShedder()
    shedder.find_bundles_for_unloading(load_data, HIGH)
    assert shedder.hit_count_high == {"broker1": 1, "broker2": 1}
    load_data.broker_data["broker1"].local_data.cpu = ResourceUsage(35, 100)
    # broker2 (30) pairs with broker3 (50): a 20-point gap is still a (low) candidate; the
    # high counters go, and Pulsar's hit check leaves zero entries behind.
    assert shedder.find_bundles_for_unloading(load_data, HIGH) == {}
    assert shedder.hit_count_high == {"broker2": 0, "broker3": 0}
    assert shedder.hit_count_low == {"broker2": 2, "broker3": 1}  # broker2 hit twice
    load_data.broker_data["broker3"].local_data.cpu = ResourceUsage(40, 100)
    assert shedder.find_bundles_for_unloading(load_data, HIGH) == {}  # no pair: all cleared
    assert shedder.hit_count_high == {}
    assert shedder.hit_count_low == {}


def test_sole_bundle_is_shed_too() -> None:
    # Unlike the other shedders AvgShedder only warns about a single-bundle broker (spec §8.10).
    load_data = LoadData()
    busy = LocalBrokerData(cpu=ResourceUsage(90, 100), msg_rate_in=20000, bundles={"only"})
    load_data.broker_data = {
        "busy": broker(busy),
        "idle": broker(LocalBrokerData(cpu=ResourceUsage(10, 100))),
    }
    load_data.bundle_data["only"] = short_term(rate_in=5000)
    shedder = AvgShedder()
    shedder.find_bundles_for_unloading(load_data, HIGH)
    assert shedder.find_bundles_for_unloading(load_data, HIGH) == {"busy": ["only"]}


def test_scores_closer_than_one_compare_equal() -> None:
    # (int)(score difference) sorts 30.2 and 30.9 as equal: their map order decides the pairing.
    load_data = LoadData()
    for name, cpu in (("a", 90.0), ("b", 30.9), ("c", 30.2)):
        load_data.broker_data[name] = broker(LocalBrokerData(cpu=ResourceUsage(cpu, 100)))
    shedder = AvgShedder()
    shedder.find_bundles_for_unloading(load_data, HIGH)
    # Java sorts the HashMap order a, b, c into b, c, a: a stable sort by score would pair c.
    assert shedder.hit_count_high == {"b": 1, "a": 1}
    assert "c" not in shedder.hit_count_low


def test_preassigned_broker_is_kept_while_it_is_a_candidate() -> None:
    shedder = AvgShedder()
    data = BundleData()
    shedder.bind(data, "1")
    assert shedder.select_broker({"1", "2", "3"}, data) == "1"
    assert shedder.bound_broker(data) == "1"
    assert shedder.select_broker({"2"}, data) == "2"
    assert shedder.bound_broker(data) == "2"


def test_unbound_bundle_gets_a_random_candidate_which_sticks() -> None:
    shedder = AvgShedder(random.Random(7))
    data = BundleData()
    candidates = {"1", "2", "3"}
    first = shedder.select_broker(candidates, data)
    assert first in candidates
    assert shedder.bound_broker(data) == first
    candidates.discard(first)
    second = shedder.select_broker(candidates, data)
    assert second in candidates
    assert shedder.bound_broker(data) == second


def test_random_choice_spreads_over_the_candidates() -> None:
    shedder = AvgShedder(random.Random(1))
    chosen = {shedder.select_broker(["a", "b", "c"], short_term(num_samples=i)) for i in range(60)}
    assert chosen == {"a", "b", "c"}


def test_bindings_are_keyed_by_value() -> None:
    shedder = AvgShedder()
    shedder.bind(short_term(rate_in=450), "x")
    assert shedder.select_broker({"x", "y"}, short_term(rate_in=450.0)) == "x"
    changed = short_term(rate_in=451)
    assert shedder.bound_broker(changed) is None


def test_no_candidates() -> None:
    assert AvgShedder().select_broker(set(), BundleData()) is None


@pytest.mark.parametrize("cycles", [1, 2])
def test_recently_unloaded_bundles_are_not_shed(cycles: int) -> None:
    load_data = three_brokers((80, 30, 50))
    load_data.recently_unloaded_bundles = {f"bundle-{i}": 1 for i in range(11)}
    shedder = AvgShedder()
    for _ in range(cycles):
        assert shedder.find_bundles_for_unloading(load_data, HIGH) == {}
