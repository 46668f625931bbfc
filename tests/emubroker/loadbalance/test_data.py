"""The data model's update rules (spec §2.1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emubroker.loadbalance.model.data import (
    NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageBrokerData,
    TimeAverageMessageData,
    default_bundle_stats,
    is_sla_or_heartbeat_namespace,
)
from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage


def sample(rate: float) -> NamespaceBundleStats:
    return NamespaceBundleStats(
        msg_rate_in=rate, msg_rate_out=rate, msg_throughput_in=rate * 10, msg_throughput_out=0
    )


def test_first_sample_overwrites_the_defaults() -> None:
    data = BundleData.initial(default_stats=default_bundle_stats())
    assert data.short_term_data.msg_rate_in == 50
    assert data.long_term_data.msg_throughput_in == 50000
    data.update(NamespaceBundleStats(msg_rate_in=7, topics=3))
    assert data.short_term_data.msg_rate_in == 7
    assert data.long_term_data.msg_rate_in == 7
    assert data.short_term_data.msg_throughput_in == 0
    assert data.topics == 3
    assert (data.short_term_data.max_samples, data.long_term_data.max_samples) == (
        NUM_SHORT_SAMPLES,
        NUM_LONG_SAMPLES,
    )


def test_average_is_exact_then_exponential() -> None:
    average = TimeAverageMessageData.initial(3)
    for rate in (3.0, 6.0, 9.0):
        average.update(sample(rate))
    assert average.num_samples == 3
    assert average.msg_rate_in == 6.0  # exact mean of 3 samples
    average.update(sample(30.0))
    assert average.num_samples == 3  # capped
    assert average.msg_rate_in == pytest.approx((2 * 6.0 + 30.0) / 3)


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=10))
def test_short_term_average_is_the_mean_until_ten_samples(rates: list[float]) -> None:
    average = TimeAverageMessageData.initial(NUM_SHORT_SAMPLES, default_bundle_stats())
    for rate in rates:
        average.update_values(0, 0, rate, 0)
    assert average.msg_rate_in == pytest.approx(sum(rates) / len(rates), rel=1e-9, abs=1e-9)


def test_time_average_broker_data_sums_bundles_and_defaults() -> None:
    known = BundleData.initial()
    known.update(sample(100))
    data = TimeAverageBrokerData.of(["a", "missing"], {"a": known}, default_bundle_stats())
    assert data.short_term_msg_rate_in == 150  # 100 + the default 50
    assert data.long_term_msg_throughput_in == 1000 + 50000


def test_local_broker_data_update_tracks_gains_and_losses() -> None:
    data = LocalBrokerData(bundles={"a", "b"})
    stats = {"b": NamespaceBundleStats(msg_rate_in=1, topics=2, consumer_count=3), "c": sample(2)}
    usage = SystemResourceUsage(cpu=ResourceUsage(10, 100))
    data.update(usage, stats)
    assert data.bundles == {"b", "c"}
    assert data.last_bundle_gains == {"c"}
    assert data.last_bundle_losses == {"a"}
    assert (data.num_bundles, data.num_topics, data.num_consumers) == (2, 2, 3)
    assert data.msg_rate_in == 3
    assert data.msg_throughput_in == 20
    assert data.cpu == ResourceUsage(10, 100)
    assert data.last_stats is stats
    data.clean_deltas()
    assert data.last_bundle_gains == data.last_bundle_losses == set()
    other = LocalBrokerData(last_stats={"z": sample(1)})
    data.update_from(other)
    assert data.bundles == {"z"}
    assert data.last_bundle_losses == {"b", "c"}


def test_same_broker_compares_urls_only() -> None:
    a = LocalBrokerData(web_service_url="http://a:8080", msg_rate_in=1)
    b = LocalBrokerData(web_service_url="http://a:8080", msg_rate_in=2)
    assert a.same_broker(b)
    assert a != b


def test_compare_to_treats_small_differences_as_equal() -> None:
    small = NamespaceBundleStats(msg_throughput_in=1e5)
    assert small.compare_to(NamespaceBundleStats()) == 0
    assert NamespaceBundleStats(msg_throughput_in=1e5 + 1).compare_to(NamespaceBundleStats()) == 1
    assert NamespaceBundleStats(topics=501).compare_to(NamespaceBundleStats()) == 1
    assert NamespaceBundleStats(cache_size=100_001).compare_to(NamespaceBundleStats()) == 1
    assert NamespaceBundleStats(msg_rate_out=-101).compare_to(NamespaceBundleStats()) == -1
    a, b = BundleData.initial(), BundleData.initial()
    b.long_term_data.msg_throughput_out = 2e5
    assert a.compare_to(b) == -1
    assert b.compare_to(a) == 1


@pytest.mark.parametrize(
    ("namespace", "special"),
    [
        ("pulsar/standalone/127.0.0.1:8080", True),
        ("pulsar/127.0.0.1:8080", True),
        ("sla-monitor/standalone/127.0.0.1:8080", True),
        ("pulsar/system", False),
        ("public/default", False),
    ],
)
def test_heartbeat_and_sla_namespaces(namespace: str, special: bool) -> None:
    assert is_sla_or_heartbeat_namespace(namespace) is special


def test_bundle_data_for_load_shedding_leaves_out_heartbeats() -> None:
    load_data = LoadData(
        bundle_data={
            "public/default/0x00000000_0xffffffff": BundleData(),
            "pulsar/standalone/127.0.0.1:8080/0x00000000_0xffffffff": BundleData(),
        }
    )
    assert list(load_data.bundle_data_for_load_shedding()) == [
        "public/default/0x00000000_0xffffffff"
    ]
