"""The cases Pulsar's ``OverloadShedderTest`` and ``ThresholdShedderTest`` share, for both."""

from __future__ import annotations

import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LoadData, LocalBrokerData
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.strategies.avg_shedder import AvgShedder
from emubroker.loadbalance.strategies.shedding import (
    LoadSheddingStrategy,
    OverloadShedder,
    ThresholdShedder,
    UniformLoadShedder,
)
from tests.support.loadbalance import OVERLOADED, broker, short_term

CONF = BrokerConfig(loadBalancerBrokerOverloadedThresholdPercentage=85)
SHEDDERS = [OverloadShedder, ThresholdShedder]


@pytest.mark.parametrize("shedder", [*SHEDDERS, UniformLoadShedder, AvgShedder])
def test_no_brokers(shedder: type[LoadSheddingStrategy]) -> None:
    assert shedder().find_bundles_for_unloading(LoadData(), CONF) == {}


@pytest.mark.parametrize("shedder", SHEDDERS)
def test_brokers_with_no_bundles(shedder: type[LoadSheddingStrategy]) -> None:
    load_data = LoadData(broker_data={"broker-1": broker(LocalBrokerData(**OVERLOADED))})
    assert shedder().find_bundles_for_unloading(load_data, CONF) == {}


def one_bundle(local: LocalBrokerData) -> LoadData:
    local.bundles = {"bundle-1"}
    return LoadData(
        broker_data={"broker-1": broker(local)},
        bundle_data={"bundle-1": short_term(throughput_in=1000, throughput_out=1000)},
    )


@pytest.mark.parametrize("shedder", SHEDDERS)
def test_broker_not_overloaded(shedder: type[LoadSheddingStrategy]) -> None:
    half = ResourceUsage(500, 1000)
    load_data = one_bundle(LocalBrokerData(bandwidth_in=half, bandwidth_out=half))
    assert shedder().find_bundles_for_unloading(load_data, CONF) == {}


@pytest.mark.parametrize("shedder", SHEDDERS)
def test_broker_with_single_bundle(shedder: type[LoadSheddingStrategy]) -> None:
    load_data = one_bundle(LocalBrokerData(**OVERLOADED))
    assert shedder().find_bundles_for_unloading(load_data, CONF) == {}
