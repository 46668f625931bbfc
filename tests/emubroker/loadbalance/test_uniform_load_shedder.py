"""UniformLoadShedder: the cases of Pulsar's ``UniformLoadShedderTest``, plus its quirks."""

from __future__ import annotations

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LoadData, LocalBrokerData
from emubroker.loadbalance.strategies.shedding import UniformLoadShedder
from tests.support.loadbalance import MIB, broker, short_term


def busy_and_idle(load_data: LoadData, per_bundle: list[float]) -> LocalBrokerData:
    """broker-1 owns bundle-i with ``per_bundle[i-1]`` bytes/s each way; broker2 is empty."""
    busy = LocalBrokerData()
    for i, throughput in enumerate(per_bundle, start=1):
        busy.bundles.add(f"bundle-{i}")
        load_data.bundle_data[f"bundle-{i}"] = short_term(
            throughput_in=throughput, throughput_out=throughput
        )
    busy.msg_throughput_in = busy.msg_throughput_out = sum(per_bundle)
    load_data.broker_data = {"broker-1": broker(busy), "broker2": broker(LocalBrokerData())}
    return busy


def test_max_unload_bundle_num_per_shedding() -> None:
    load_data = LoadData()
    busy_and_idle(load_data, [1.0 * MIB] * 20)
    result = UniformLoadShedder().find_bundles_for_unloading(
        load_data, BrokerConfig(maxUnloadBundleNumPerShedding=2)
    )
    assert sum(len(b) for b in result.values()) == 2


def test_broker_with_multiple_bundles() -> None:
    load_data = LoadData()
    busy_and_idle(load_data, [i * MIB for i in range(1, 11)])
    result = UniformLoadShedder().find_bundles_for_unloading(load_data, BrokerConfig())
    # 110 MiB/s against 0 (counted as 1 B/s): required = int((110 MiB - 1) * 0.2), 1 byte short
    # of 22 MiB. bundle-10 (20 MiB) fits; 2 MiB - 1 byte is left, and bundle-1 needs 2 MiB.
    assert result == {"broker-1": ["bundle-10"]}


def five_brokers(load_data: LoadData) -> None:
    rates = [50000, 60000, 70000, 10000, 20000]
    throughputs = [50 * MIB, 60 * MIB, 70 * MIB, 80 * MIB, 10 * MIB]
    for index, (rate, throughput) in enumerate(zip(rates, throughputs, strict=True)):
        local = LocalBrokerData(msg_rate_in=rate, msg_throughput_in=throughput)
        for i in range(5):
            name = f"broker-{index}-bundle-{i}"
            local.bundles.add(name)
            load_data.bundle_data[name] = short_term(rate_in=rate / 5, throughput_in=throughput / 5)
        load_data.broker_data[f"broker{index}"] = broker(local)


def test_overloaded_broker_selection_by_rate_or_throughput() -> None:
    load_data = LoadData()
    five_brokers(load_data)
    shedder = UniformLoadShedder()
    base = {"maxUnloadBundleNumPerShedding": 1, "maxUnloadPercentage": 0.5}

    rate_only = BrokerConfig(
        **base,
        loadBalancerMsgRateDifferenceShedderThreshold=50,
        loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=0,
    )
    result = shedder.find_bundles_for_unloading(load_data, rate_only)
    assert list(result) == ["broker2"]
    assert len(result["broker2"]) == 1

    throughput_only = BrokerConfig(
        **base,
        loadBalancerMsgRateDifferenceShedderThreshold=0,
        loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=2,
    )
    result = shedder.find_bundles_for_unloading(load_data, throughput_only)
    assert list(result) == ["broker3"]
    assert len(result["broker3"]) == 1

    both = BrokerConfig(
        **base,
        loadBalancerMsgRateDifferenceShedderThreshold=50,
        loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=2,
    )
    result = shedder.find_bundles_for_unloading(load_data, both)
    assert list(result) == ["broker2"]  # the rate path wins when both thresholds are exceeded


def test_small_traffic_shedding() -> None:
    conf = BrokerConfig(
        minUnloadMessage=0,
        minUnloadMessageThroughput=0,
        maxUnloadPercentage=0.5,
        maxUnloadBundleNumPerShedding=-1,
    )
    load_data = LoadData()
    busy = LocalBrokerData(msg_rate_in=250, msg_rate_out=250)
    for i in range(1, 6):
        busy.bundles.add(f"bundle-{i}")
        load_data.bundle_data[f"bundle-{i}"] = short_term(rate_in=50, rate_out=50)
    load_data.broker_data = {"broker-1": broker(busy), "broker-2": broker(LocalBrokerData())}
    result = UniformLoadShedder().find_bundles_for_unloading(load_data, conf)
    assert sum(len(b) for b in result.values()) == 2  # int((500 - 1) * 0.5) = 249 -> 100 + 100

    load_data = LoadData()
    busy_and_idle(load_data, [1024.0] * 5)
    result = UniformLoadShedder().find_bundles_for_unloading(load_data, conf)
    assert sum(len(b) for b in result.values()) == 2


def test_required_amount_is_truncated_and_bundles_need_not_be_a_prefix() -> None:
    # Spec §4.4/§8.9: a bundle that does not fit is skipped and smaller ones still taken.
    conf = BrokerConfig(
        minUnloadMessage=0,
        maxUnloadPercentage=0.5,
        loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=0,
    )
    load_data = LoadData()
    busy = LocalBrokerData(msg_rate_in=1201.0)
    sizes = {"big": 700.0, "mid": 400.0, "small": 100.9, "tiny": 0.5}
    for name, rate in sizes.items():
        busy.bundles.add(name)
        load_data.bundle_data[name] = short_term(rate_in=rate)
    idle = LocalBrokerData(msg_rate_in=1.0)
    load_data.broker_data = {"busy": broker(busy), "idle": broker(idle)}
    # required = int(1200 * 0.5) = 600: big (700) skipped, mid 400 -> 200, small 100.9 ->
    # 200 + int(-100.9) = 100, tiny 0.5 -> 100 + int(-0.5) = 100.
    result = UniformLoadShedder().find_bundles_for_unloading(load_data, conf)
    assert result == {"busy": ["mid", "small", "tiny"]}


def test_no_brokers_and_single_bundle_brokers_shed_nothing() -> None:
    assert UniformLoadShedder().find_bundles_for_unloading(LoadData(), BrokerConfig()) == {}
    load_data = LoadData()
    busy_and_idle(load_data, [100.0 * MIB])
    assert UniformLoadShedder().find_bundles_for_unloading(load_data, BrokerConfig()) == {}
