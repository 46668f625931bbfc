"""Resource usage arithmetic (spec §0): float32 percentages and weighted maxima."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.config import BrokerConfig
from emubroker.loadbalance.model.data import LocalBrokerData, weighted_max_usage
from emubroker.loadbalance.model.usage import ResourceUsage, f32, java_div, resource_weights


def is_float32(value: float) -> bool:
    return math.isnan(value) or struct.unpack("<f", struct.pack("<f", value))[0] == value


@pytest.mark.parametrize(
    ("usage", "limit", "expected"),
    [
        (30, 100, 30.000001907348633),  # the spec's and Pulsar's tests' values
        (999, 1000, 99.9000015258789),
        (50, 100, 50.0),
        (1, 3, 33.333335876464844),  # printed by a JVM
        (2, 7, 28.571430206298828),
        (5, 0, 0.0),  # no limit: 0
        (5, -1, 0.0),
        (-1, -1, 0.0),  # SystemResourceUsage's "unmeasured"
        (140, 100, 140.0),
    ],
)
def test_percent_usage_is_float32(usage: float, limit: float, expected: float) -> None:
    assert ResourceUsage(usage, limit).percent_usage() == expected


finite = st.floats(min_value=0, max_value=1e30, allow_nan=False)


@given(finite, st.floats(min_value=1e-30, max_value=1e30))
def test_percent_usage_is_a_float32_close_to_the_ratio(usage: float, limit: float) -> None:
    percent = ResourceUsage(usage, limit).percent_usage()
    assert is_float32(percent)  # a double computation would fail here
    exact = f32(usage) / f32(limit) * 100
    if math.isinf(percent):
        assert exact > 3.4e38 * 0.99
    elif exact > 1e-30:
        assert abs(percent - exact) <= exact * 2**-22


def test_overflow_and_division_follow_java() -> None:
    assert f32(1e39) == math.inf
    assert f32(-1e39) == -math.inf
    assert ResourceUsage(1e308, 1e-30).percent_usage() == math.inf
    assert java_div(1.0, 0) == math.inf
    assert java_div(-1.0, 0) == -math.inf
    assert math.isnan(java_div(0.0, 0))


def test_max_resource_usage_skips_memory() -> None:
    # Pulsar's LocalBrokerDataTest.testMaxResourceUsage
    data = LocalBrokerData(
        cpu=ResourceUsage(1.0, 100.0),
        memory=ResourceUsage(99.0, 100.0),
        direct_memory=ResourceUsage(2.0, 100.0),
        bandwidth_in=ResourceUsage(3.0, 100.0),
        bandwidth_out=ResourceUsage(4.0, 100.0),
    )
    assert data.max_resource_usage() == pytest.approx(
        data.bandwidth_out.percent_usage() / 100, abs=1e-5
    )
    assert is_float32(data.max_resource_usage())  # Pulsar's float overload of max
    assert data.max_resource_usage_with_weight(0.5, 0.5, 0.5, 0.5) == pytest.approx(
        data.bandwidth_out.percent_usage() * 0.5 / 100, abs=1e-5
    )


def test_weighted_max_usage_with_defaults_is_cpu_and_bandwidth() -> None:
    data = LocalBrokerData(
        cpu=ResourceUsage(10, 100),
        memory=ResourceUsage(99, 100),
        direct_memory=ResourceUsage(90, 100),
        bandwidth_in=ResourceUsage(30, 100),
        bandwidth_out=ResourceUsage(20, 100),
    )
    # direct memory weight 0, memory not part of it at all (spec §0.2)
    assert weighted_max_usage(data, BrokerConfig()) == 30.000001907348633 / 100
    heavy_direct = BrokerConfig(loadBalancerDirectMemoryResourceWeight=1.0)
    assert weighted_max_usage(data, heavy_direct) == 0.9


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [(1.0, 1.0, 1.0), (0.5, 1.0, 0.5), (1.0, 0.3, 0.3), (0.5, 0.3, 0.5)],
)
def test_deprecated_bandwidth_weight_spelling(new: float, old: float, expected: float) -> None:
    conf = BrokerConfig(
        loadBalancerBandwidthInResourceWeight=new,
        loadBalancerBandwithInResourceWeight=old,
        loadBalancerBandwidthOutResourceWeight=new,
        loadBalancerBandwithOutResourceWeight=old,
    )
    weights = resource_weights(conf)
    assert (weights.bandwidth_in, weights.bandwidth_out) == (expected, expected)


def test_limit_that_rounds_to_zero_in_float32() -> None:
    # Found by the round-trip property: a tiny positive limit is 0.0f, and Java divides anyway.
    assert ResourceUsage(1.0, 1e-220).percent_usage() == math.inf
    assert math.isnan(ResourceUsage(0.0, 1e-220).percent_usage())
