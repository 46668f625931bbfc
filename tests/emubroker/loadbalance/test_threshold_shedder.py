"""ThresholdShedder: the cases of Pulsar's ``ThresholdShedderTest``, plus the spec's example."""

from __future__ import annotations

import sys

import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LoadData, LocalBrokerData
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.strategies.shedding import ThresholdShedder
from tests.support.loadbalance import MIB, OVERLOADED, broker, short_term, ten_bundles

CONF = BrokerConfig()
LOWER_BOUNDARY = BrokerConfig(lowerBoundarySheddingEnabled=True)


def two_brokers(load_data: LoadData, local: LocalBrokerData, other: LocalBrokerData) -> None:
    """Pulsar's fixture: ten bundles on broker-1, the same data as broker2's bundles."""
    ten_bundles(load_data, local, other=other, prefix="broker2-")
    load_data.broker_data = {"broker-1": broker(local), "broker2": broker(other)}


def test_departed_brokers_are_forgotten() -> None:
    shedder = ThresholdShedder()
    load_data = LoadData()
    two_brokers(load_data, LocalBrokerData(**OVERLOADED), LocalBrokerData())
    shedder.find_bundles_for_unloading(load_data, CONF)
    assert shedder.broker_avg_resource_usage
    shedder.on_active_brokers_change({"leader"})
    shedder.find_bundles_for_unloading(LoadData(), CONF)
    assert shedder.broker_avg_resource_usage == {}


def test_broker_reaching_the_threshold() -> None:
    common = {
        "memory": ResourceUsage(10, 100),
        "direct_memory": ResourceUsage(10, 100),
        "bandwidth_in": ResourceUsage(500, 1000),
        "bandwidth_out": ResourceUsage(500, 1000),
    }
    busy = LocalBrokerData(
        cpu=ResourceUsage(140, 100),
        bundles={"bundle-1", "bundle-2"},
        msg_throughput_in=sys.float_info.max,
        **common,
    )
    idle = LocalBrokerData(cpu=ResourceUsage(10, 100), bundles={"bundle-3", "bundle-4"}, **common)
    load_data = LoadData(
        broker_data={"broker-2": broker(busy), "broker-3": broker(idle)},
        bundle_data={"bundle-2": short_term(throughput_in=1000, throughput_out=1000)},
    )
    assert ThresholdShedder().find_bundles_for_unloading(load_data, CONF) == {
        "broker-2": ["bundle-2"]
    }


def test_broker_with_multiple_bundles() -> None:
    load_data = LoadData()
    two_brokers(load_data, LocalBrokerData(**OVERLOADED), LocalBrokerData())
    # spec §4.3: average 0.4995; (0.999 - 0.4995 - 0.1 + 0.05) * 110 MiB = 49.4 MiB -> 20+18+16
    assert ThresholdShedder().find_bundles_for_unloading(load_data, CONF) == {
        "broker-1": ["bundle-10", "bundle-9", "bundle-8"]
    }


def test_recently_unloaded_bundles_are_skipped() -> None:
    load_data = LoadData(recently_unloaded_bundles={"bundle-10": 1, "bundle-9": 1})
    two_brokers(load_data, LocalBrokerData(**OVERLOADED), LocalBrokerData())
    assert ThresholdShedder().find_bundles_for_unloading(load_data, CONF) == {
        "broker-1": ["bundle-8", "bundle-7", "bundle-6", "bundle-5"]
    }


def test_the_usage_average_remembers_history() -> None:
    shedder = ThresholdShedder()
    load_data = LoadData()
    local, other = LocalBrokerData(**OVERLOADED), LocalBrokerData()
    two_brokers(load_data, local, other)
    shedder.find_bundles_for_unloading(load_data, CONF)
    local.bandwidth_in = local.bandwidth_out = ResourceUsage(0, 1000)
    # 0.9 of the old 0.999 stays: broker-1 is still above average + 10 %.
    assert shedder.find_bundles_for_unloading(load_data, CONF) != {}
    assert shedder.broker_avg_resource_usage["broker-1"] == pytest.approx(0.999 * 0.9, rel=1e-6)


def eleven_brokers(load_data: LoadData, loads: list[float], bundles: list[int]) -> None:
    """Broker i at ``loads[i]`` % with ``bundles[i]`` bundles of equal share of its traffic."""
    throughput = 100 * MIB
    for i, (load, count) in enumerate(zip(loads, bundles, strict=True)):
        local = LocalBrokerData()
        for j in range(count):
            name = f"broker-{i}-bundle-{j}"
            load_data.bundle_data[name] = short_term(
                throughput_in=throughput if load else 0, throughput_out=throughput if load else 0
            )
            local.bundles.add(name)
        local.bandwidth_in = local.bandwidth_out = ResourceUsage(load, 100)
        local.msg_throughput_in = local.msg_throughput_out = throughput if load else 0
        load_data.broker_data[f"broker-{i}"] = broker(local)


def test_lower_boundary_shedding() -> None:
    # Ten brokers at 80 % and one at 0 %: average 72.7 %, nobody above 82.7 %, one idle broker.
    load_data = LoadData()
    eleven_brokers(load_data, [80] * 10 + [0], [10] * 11)
    assert ThresholdShedder().find_bundles_for_unloading(load_data, CONF) == {}
    result = ThresholdShedder().find_bundles_for_unloading(load_data, LOWER_BOUNDARY)
    assert len(result) == 1
    (bundles,) = result.values()
    assert len(bundles) == 1  # 200 MiB * 0.1 * 0.5 = 10 MiB: one 200 MiB bundle covers it


def test_lower_boundary_shedding_without_an_idle_broker() -> None:
    load_data = LoadData()
    eleven_brokers(load_data, [80] * 11, [10] * 11)
    assert ThresholdShedder().find_bundles_for_unloading(load_data, CONF) == {}
    assert ThresholdShedder().find_bundles_for_unloading(load_data, LOWER_BOUNDARY) == {}


def test_lower_boundary_shedding_skips_single_bundle_brokers() -> None:
    loads = [80.0] * 11
    loads[5] = 0
    counts = [1] * 11
    counts[3] = 10
    load_data = LoadData()
    eleven_brokers(load_data, loads, counts)
    assert ThresholdShedder().find_bundles_for_unloading(load_data, CONF) == {}
    result = ThresholdShedder().find_bundles_for_unloading(load_data, LOWER_BOUNDARY)
    assert list(result) == ["broker-3"]
    assert len(result["broker-3"]) == 1


def test_lower_boundary_shedding_applies_the_average_twice() -> None:
    # Pulsar's quirk (spec §8.8): the second path updates the averages once more.
    load_data = LoadData()
    eleven_brokers(load_data, [80] * 10 + [0], [10] * 11)
    shedder = ThresholdShedder()
    shedder.find_bundles_for_unloading(load_data, LOWER_BOUNDARY)  # first sample, twice
    for name, data in load_data.broker_data.items():
        data.local_data.bandwidth_in = data.local_data.bandwidth_out = ResourceUsage(
            0 if name == "broker-10" else 40, 100
        )
    shedder.find_bundles_for_unloading(load_data, LOWER_BOUNDARY)
    # 0.8 -> 0.9 * 0.8 + 0.1 * 0.4 = 0.76 -> 0.9 * 0.76 + 0.1 * 0.4 = 0.724
    assert shedder.broker_avg_resource_usage["broker-0"] == pytest.approx(0.724)
