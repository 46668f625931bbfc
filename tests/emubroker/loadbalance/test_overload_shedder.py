"""OverloadShedder: the cases of Pulsar's ``OverloadShedderTest``, plus the spec's example."""

from __future__ import annotations

import msgspec

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LoadData, LocalBrokerData
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.strategies.shedding import OverloadShedder
from tests.support.loadbalance import MIB, OVERLOADED, broker, short_term, ten_bundles

CONF = BrokerConfig(loadBalancerBrokerOverloadedThresholdPercentage=85)


def test_broker_with_multiple_bundles_sheds_the_largest_enough() -> None:
    load_data = LoadData()
    local, other = LocalBrokerData(**OVERLOADED), LocalBrokerData()
    ten_bundles(load_data, local, other=other, prefix="another-broker-")
    load_data.broker_data = {"broker-1": broker(local), "another-broker": broker(other)}
    # usage 0.999: offload (0.999 - 0.85 + 0.05) * 110 MiB = 21.9 MiB -> 20 + 18 (spec §4.2)
    assert OverloadShedder().find_bundles_for_unloading(load_data, CONF) == {
        "broker-1": ["bundle-10", "bundle-9"]
    }


def test_resource_weights_decide_overload() -> None:
    load_data = LoadData()
    local = LocalBrokerData(**OVERLOADED)
    ten_bundles(load_data, local)
    load_data.broker_data["broker-1"] = broker(local)
    shedder = OverloadShedder()
    assert shedder.find_bundles_for_unloading(load_data, CONF) != {}
    no_bandwidth = msgspec.structs.replace(
        CONF, loadBalancerBandwidthInResourceWeight=0, loadBalancerBandwidthOutResourceWeight=0
    )
    assert shedder.find_bundles_for_unloading(load_data, no_bandwidth) == {}


def test_recently_unloaded_bundles_are_skipped() -> None:
    load_data = LoadData(recently_unloaded_bundles={"bundle-10": 1, "bundle-9": 1})
    local = LocalBrokerData(**OVERLOADED)
    ten_bundles(load_data, local)
    load_data.broker_data["broker-1"] = broker(local)
    assert OverloadShedder().find_bundles_for_unloading(load_data, CONF) == {
        "broker-1": ["bundle-8", "bundle-7"]
    }


def test_usage_equal_to_the_threshold_is_overloaded() -> None:
    # OverloadShedder compares with <, so usage == threshold sheds (placement uses >, §8.16).
    load_data = LoadData()
    local = LocalBrokerData(cpu=ResourceUsage(85, 100))
    ten_bundles(load_data, local)
    load_data.broker_data["broker-1"] = broker(local)
    result = OverloadShedder().find_bundles_for_unloading(load_data, CONF)
    assert result == {"broker-1": ["bundle-10"]}  # 0.05 * 110 MiB = 5.5 MiB: one 20 MiB bundle


def test_heartbeat_bundles_are_never_shed() -> None:
    load_data = LoadData()
    local = LocalBrokerData(**OVERLOADED)
    ten_bundles(load_data, local)
    heartbeat = "pulsar/standalone/127.0.0.1:8080/0x00000000_0xffffffff"
    local.bundles.add(heartbeat)
    load_data.bundle_data[heartbeat] = short_term(throughput_in=100 * MIB)
    load_data.broker_data["broker-1"] = broker(local)
    assert OverloadShedder().find_bundles_for_unloading(load_data, CONF) == {
        "broker-1": ["bundle-10", "bundle-9"]
    }


def test_print_resource_usage() -> None:
    data = LocalBrokerData(
        cpu=ResourceUsage(10, 100),
        memory=ResourceUsage(50, 100),
        direct_memory=ResourceUsage(90, 100),
        bandwidth_in=ResourceUsage(30, 100),
        bandwidth_out=ResourceUsage(20, 100),
    )
    assert data.print_resource_usage() == (
        "cpu: 10.00%, memory: 50.00%, directMemory: 90.00%, bandwidthIn: 30.00%, "
        "bandwidthOut: 20.00%"
    )
