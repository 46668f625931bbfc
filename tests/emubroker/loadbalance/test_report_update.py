"""When a broker rewrites its load report (spec §2.3 and its worked example)."""

from __future__ import annotations

import math

import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.data import LocalBrokerData
from emubroker.loadbalance.extensible_data import BrokerLoadData
from emubroker.loadbalance.report_update import (
    need_broker_data_update,
    need_broker_load_data_update,
    percent_change,
)
from emubroker.loadbalance.usage import ResourceUsage

CONF = BrokerConfig()
NOW = 10 * 60_000


def test_percent_change() -> None:
    assert percent_change(0, 0) == 0
    assert percent_change(0, 1) == math.inf
    assert percent_change(100, 109) == pytest.approx(9)


@pytest.mark.parametrize(
    ("old_rate", "new_rate", "written"),
    [(100, 109, False), (100, 111, True), (0, 0.001, True), (0, 0, False)],
)
def test_message_rate_threshold(old_rate: float, new_rate: float, written: bool) -> None:
    last = LocalBrokerData(msg_rate_in=old_rate)
    current = LocalBrokerData(msg_rate_in=new_rate, last_update=NOW)
    assert need_broker_data_update(last, current, CONF, NOW) is written


def test_usage_moves_count_in_points() -> None:
    last = LocalBrokerData(cpu=ResourceUsage(10, 100))
    assert need_broker_data_update(
        last, LocalBrokerData(cpu=ResourceUsage(25, 100), last_update=NOW), CONF, NOW
    )
    assert not need_broker_data_update(
        last, LocalBrokerData(cpu=ResourceUsage(19, 100), last_update=NOW), CONF, NOW
    )


def test_bundle_count_and_throughput_count() -> None:
    last = LocalBrokerData(num_bundles=10, msg_throughput_out=1000)
    assert need_broker_data_update(
        last, LocalBrokerData(num_bundles=12, msg_throughput_out=1000, last_update=NOW), CONF, NOW
    )
    assert need_broker_data_update(
        last, LocalBrokerData(num_bundles=10, msg_throughput_out=1200, last_update=NOW), CONF, NOW
    )


def test_maximum_interval_forces_a_write() -> None:
    same = LocalBrokerData()
    assert not need_broker_data_update(same, LocalBrokerData(last_update=0), CONF, 15 * 60_000)
    assert need_broker_data_update(same, LocalBrokerData(last_update=0), CONF, 15 * 60_000 + 1)
    fractional = BrokerConfig(loadBalancerReportUpdateMaxIntervalMinutes=0.5)
    assert need_broker_data_update(same, LocalBrokerData(last_update=0), fractional, 30_001)


def test_extensible_rule_uses_unweighted_usage_and_reported_at() -> None:
    last = BrokerLoadData(max_resource_usage=0.10)
    current = BrokerLoadData(max_resource_usage=0.25, reported_at=NOW)
    assert need_broker_load_data_update(last, current, CONF, NOW)
    current.max_resource_usage = 0.19
    assert not need_broker_load_data_update(last, current, CONF, NOW)
    assert need_broker_load_data_update(last, current, CONF, NOW + 15 * 60_000 + 1)
