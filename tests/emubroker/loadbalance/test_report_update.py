"""When a broker rewrites its load report (spec §2.3 and its worked example)."""

from __future__ import annotations

import math

import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LocalBrokerData
from emubroker.loadbalance.model.extensible_data import BrokerLoadData
from emubroker.loadbalance.model.usage import ResourceUsage
from emubroker.loadbalance.reporting.report_update import (
    ReportUpdateReason,
    need_broker_data_update,
    need_broker_load_data_update,
    percent_change,
    report_update_reason,
)

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


class TestReason:
    """``report_update_reason`` names the term that decided (the log line says it)."""

    def test_the_largest_change_names_the_reason(self) -> None:
        last = LocalBrokerData(msg_rate_in=100, msg_throughput_in=1000, num_bundles=4)
        current = LocalBrokerData(
            msg_rate_in=115, msg_throughput_in=1300, num_bundles=4, last_update=NOW
        )
        reason = report_update_reason(last, current, CONF, NOW)
        assert reason == ReportUpdateReason("msgThroughput", pytest.approx(30.0), 10)
        assert reason is not None
        assert reason.describe() == (
            "msgThroughput changed by 30.00%, over loadBalancerReportUpdateThresholdPercentage=10"
        )

    def test_usage_and_bundles_and_rates_each_name_themselves(self) -> None:
        base = LocalBrokerData(last_update=NOW)
        assert report_update_reason(
            base, LocalBrokerData(cpu=ResourceUsage(30, 100), last_update=NOW), CONF, NOW
        ) == ReportUpdateReason("resourceUsage", pytest.approx(30.000001907348633), 10)
        assert report_update_reason(
            LocalBrokerData(num_bundles=2),
            LocalBrokerData(num_bundles=3, last_update=NOW),
            CONF,
            NOW,
        ) == ReportUpdateReason("numBundles", 50.0, 10)
        assert report_update_reason(
            base, LocalBrokerData(msg_rate_out=1, last_update=NOW), CONF, NOW
        ) == ReportUpdateReason("msgRate", math.inf, 10)

    def test_no_reason_below_the_threshold_and_the_max_interval_first(self) -> None:
        last = LocalBrokerData(msg_rate_in=100)
        assert (
            report_update_reason(last, LocalBrokerData(msg_rate_in=105, last_update=NOW), CONF, NOW)
            is None
        )
        stale = LocalBrokerData(msg_rate_in=100, last_update=NOW - 16 * 60_000)
        reason = report_update_reason(last, stale, CONF, NOW)
        assert reason == ReportUpdateReason("maxInterval", 960.0, 15.0)
        assert reason is not None
        assert reason.describe() == (
            "960.0 s since the last write exceeded loadBalancerReportUpdateMaxIntervalMinutes=15"
        )
