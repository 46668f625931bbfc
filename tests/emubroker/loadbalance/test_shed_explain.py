"""The numbers behind each modular shedder's decision (log lines and ``shed`` trace rows)."""

from __future__ import annotations

import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LoadData, LocalBrokerData
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.runtime.shedding_runtime import bundle_numbers
from emubroker.loadbalance.strategies.avg_shedder import AvgShedder
from emubroker.loadbalance.strategies.shedding import (
    OverloadShedder,
    ThresholdShedder,
    UniformLoadShedder,
)
from tests.support.loadbalance import MIB, broker, short_term


def cluster(cpu: tuple[float, float, float], rates: tuple[float, float, float]) -> LoadData:
    """broker1..3 with these CPU percentages and message rates (in), 10 MiB/s per 1000 msg/s;
    broker1 owns two bundles."""
    load_data = LoadData()
    for index, (usage, rate) in enumerate(zip(cpu, rates, strict=True), start=1):
        local = LocalBrokerData(
            cpu=ResourceUsage(usage, 100),
            msg_rate_in=rate,
            msg_throughput_in=rate * 10 * MIB / 1000,
        )
        load_data.broker_data[f"broker{index}"] = broker(local)
    owner = load_data.broker_data["broker1"].local_data
    for name, share in (("b-big", 0.75), ("b-small", 0.25)):
        owner.bundles.add(name)
        load_data.bundle_data[name] = short_term(
            rate_in=rates[0] * share, throughput_in=owner.msg_throughput_in * share
        )
    return load_data


def test_overload_shedder_numbers() -> None:
    load_data = cluster((95, 10, 10), (2000, 100, 100))
    conf = BrokerConfig()
    assert OverloadShedder().find_bundles_for_unloading(load_data, conf) == {"broker1": ["b-big"]}
    numbers = OverloadShedder().explain(load_data, conf, "broker1", "broker2")
    assert numbers["reason"] == "Overloaded"
    assert numbers["broker_load"] == pytest.approx(0.95)
    assert numbers["threshold"] == 0.85
    assert numbers["to_offload"] == pytest.approx(20 * MIB * (0.95 - 0.85 + 0.05))
    assert numbers["dest_load"] == pytest.approx(0.10)
    assert numbers["offload_unit"] == "bytes/s"


def test_threshold_shedder_numbers_use_the_averages_after_the_cycle() -> None:
    load_data = cluster((95, 10, 10), (2000, 100, 100))
    conf = BrokerConfig(loadBalancerBundleUnloadMinThroughputThreshold=1)
    shedder = ThresholdShedder()
    assert shedder.find_bundles_for_unloading(load_data, conf) == {"broker1": ["b-big"]}
    numbers = shedder.explain(load_data, conf, "broker1", "broker2")
    cluster_avg = (0.95 + 0.10 + 0.10) / 3
    assert numbers["reason"] == "Overloaded"
    assert numbers["broker_load"] == pytest.approx(0.95)
    assert numbers["cluster_load"] == pytest.approx(cluster_avg)
    assert numbers["threshold"] == pytest.approx(cluster_avg + 0.1)
    assert numbers["to_offload"] == pytest.approx(20 * MIB * (0.95 - cluster_avg - 0.1 + 0.05))


def test_threshold_shedder_lower_boundary_numbers() -> None:
    # Nobody above average + 10 %, but broker3 below average - 10 %.
    load_data = cluster((44, 40, 20), (2000, 100, 100))
    conf = BrokerConfig(
        lowerBoundarySheddingEnabled=True, loadBalancerBundleUnloadMinThroughputThreshold=0
    )
    shedder = ThresholdShedder()
    assert shedder.find_bundles_for_unloading(load_data, conf) == {"broker1": ["b-big"]}
    numbers = shedder.explain(load_data, conf, "broker1", "broker3")
    assert numbers["reason"] == "Underloaded"
    assert numbers["threshold"] == pytest.approx((0.44 + 0.40 + 0.2) / 3 - 0.1)
    assert numbers["to_offload"] == pytest.approx(20 * MIB * 0.1 * 0.5)
    assert numbers["dest_load"] == pytest.approx(0.2)


def test_uniform_load_shedder_numbers_by_message_rate() -> None:
    load_data = cluster((10, 10, 10), (2000, 100, 100))
    conf = BrokerConfig(minUnloadMessage=10, maxUnloadPercentage=0.5)
    assert UniformLoadShedder().find_bundles_for_unloading(load_data, conf) == {
        "broker1": ["b-small"]
    }
    numbers = UniformLoadShedder().explain(load_data, conf, "broker1", "broker2")
    assert numbers["reason"] == "MsgRateDifference"
    assert (numbers["broker_load"], numbers["cluster_load"]) == (2000, 100)
    assert numbers["threshold"] == pytest.approx(150)  # min rate + 50 %
    assert numbers["to_offload"] == 950.0  # int((2000 - 100) * 0.5)
    assert numbers["offload_unit"] == "msg/s"


def test_avg_shedder_numbers_name_the_hit_count_that_fired() -> None:
    load_data = cluster((80, 30, 50), (20000, 2000, 10000))
    conf = BrokerConfig(maxUnloadPercentage=0.5, minUnloadMessage=10)
    shedder = AvgShedder()
    assert shedder.find_bundles_for_unloading(load_data, conf) == {}  # first high hit
    result = shedder.find_bundles_for_unloading(load_data, conf)
    assert list(result) == ["broker1"]
    numbers = shedder.explain(load_data, conf, "broker1", "broker2")
    assert numbers["reason"] == "HighHitCount"
    assert numbers["broker_load"] == pytest.approx(0.8)
    assert numbers["dest_load"] == pytest.approx(0.3)
    assert numbers["threshold"] == 0.4
    assert numbers["to_offload"] == pytest.approx((20000 - 2000) * 0.5)
    assert numbers["offload_unit"] == "msg/s"


def test_bundle_numbers() -> None:
    load_data = cluster((10, 10, 10), (2000, 100, 100))
    assert bundle_numbers(load_data, "b-big") == {
        "bundle_msg_rate": 1500.0,
        "bundle_throughput": pytest.approx(15 * MIB),
        "bundle_topics": 0,
    }
    assert bundle_numbers(load_data, "unknown") == {}
