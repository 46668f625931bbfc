"""The leader's LoadData from stored reports: updateAll, bundle-data writes, bad nodes."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from emubroker.config import BrokerConfig, load_config
from emubroker.loadbalance.model.codec import encode
from emubroker.loadbalance.model.data import (
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageMessageData,
)
from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
from emubroker.loadbalance.runtime.aggregation import LeaderAggregation, bundle_data_node
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree

pytestmark = pytest.mark.anyio

A, B = "10.0.0.1:8080", "10.0.0.2:8080"
X = "public/default/0x00000000_0x80000000"
Y = "public/default/0x80000000_0xffffffff"
MIB = 1024 * 1024


def conf(**overrides: Any) -> BrokerConfig:
    return load_config(overrides=overrides)


def stats(rate_in: float, throughput_in: float, topics: int = 1) -> NamespaceBundleStats:
    return NamespaceBundleStats(msg_rate_in=rate_in, msg_throughput_in=throughput_in, topics=topics)


def local(
    last_update: int, bundles: dict[str, NamespaceBundleStats], cpu: float = 10
) -> LocalBrokerData:
    data = LocalBrokerData(web_service_url="http://x")
    data.update(SystemResourceUsage(cpu=ResourceUsage(cpu, 100)), bundles)
    data.last_update = last_update
    return data


@pytest.fixture
def tree() -> MemoryMetadataTree:
    return MemoryMetadataTree()


@pytest.fixture
def store(tree: MemoryMetadataTree) -> MemoryMetadataStore:
    return tree.open_session()


async def put_report(store: MemoryMetadataStore, broker: str, data: LocalBrokerData) -> None:
    await store.put(f"/loadbalance/brokers/{broker}", encode(data))


async def two_brokers(store: MemoryMetadataStore) -> LeaderAggregation:
    """A reports bundle X at 100 msg/s, B bundle Y at 10 msg/s; the leader read them once."""
    aggregation = LeaderAggregation(store, conf())
    await put_report(store, A, local(1, {X: stats(100, 1000)}))
    await put_report(store, B, local(1, {Y: stats(10, 100)}))
    await aggregation.refresh()
    return aggregation


async def node(store: MemoryMetadataStore, path: str) -> dict[str, Any] | None:
    found = await store.get(path)
    return None if found is None else json.loads(found.value)


async def test_each_refresh_adds_one_sample_per_reported_bundle(
    store: MemoryMetadataStore,
) -> None:
    aggregation = await two_brokers(store)
    first = aggregation.manager.load_data.bundle_data[X].short_term_data
    # The first sample overwrites the defaults (50 msg/s, 50 000 B/s).
    assert (first.num_samples, first.msg_rate_in, first.msg_throughput_in) == (1, 100, 1000)
    await put_report(store, A, local(2, {X: stats(200, 2000)}))
    await aggregation.refresh()
    await aggregation.refresh()  # another broker's change: every bundle gets a sample again
    short = aggregation.manager.load_data.bundle_data[X].short_term_data
    assert short.num_samples == 3
    assert short.msg_rate_in == pytest.approx((100 + 200 + 200) / 3)
    assert aggregation.manager.load_data.bundle_data[Y].short_term_data.num_samples == 3
    assert aggregation.manager.available_brokers == [A, B]
    assert aggregation.updates == 3


async def test_short_term_window_is_ten_samples_long_term_a_thousand(
    store: MemoryMetadataStore,
) -> None:
    aggregation = LeaderAggregation(store, conf())
    await put_report(store, A, local(1, {X: stats(0, 0)}))
    for _ in range(10):
        await aggregation.refresh()
    await put_report(store, A, local(2, {X: stats(100, 0)}))
    await aggregation.refresh()
    data = aggregation.manager.load_data.bundle_data[X]
    # Pulsar's update rule: ((n - 1) * old + new) / n with n capped at the window.
    assert data.short_term_data.num_samples == 10
    assert data.short_term_data.msg_rate_in == pytest.approx(10.0)
    assert data.long_term_data.num_samples == 11
    assert data.long_term_data.msg_rate_in == pytest.approx(100 / 11)


async def test_a_new_leader_starts_from_the_stored_bundle_data(
    store: MemoryMetadataStore,
) -> None:
    stored = BundleData(
        short_term_data=TimeAverageMessageData(
            max_samples=10, num_samples=10, msg_rate_in=500.0, msg_throughput_in=5000.0
        ),
        long_term_data=TimeAverageMessageData(
            max_samples=1000, num_samples=1000, msg_rate_in=400.0, msg_throughput_in=4000.0
        ),
        topics=3,
    )
    await store.put(bundle_data_node(X), encode(stored))
    await put_report(store, A, local(1, {X: stats(100, 1000), Y: stats(10, 10)}))
    aggregation = LeaderAggregation(store, conf())
    assert await aggregation.load_stored_bundle_data() == 1
    await aggregation.refresh()
    data = aggregation.manager.load_data.bundle_data
    assert data[X].short_term_data.num_samples == 10
    assert data[X].short_term_data.msg_rate_in == pytest.approx((9 * 500 + 100) / 10)
    assert data[X].long_term_data.msg_rate_in == pytest.approx((999 * 400 + 100) / 1000)
    # A bundle with nothing stored starts from the defaults, which its first sample replaces.
    assert data[Y].short_term_data.num_samples == 1
    assert data[Y].short_term_data.msg_rate_in == 10


async def test_vanished_brokers_and_bundles_lose_their_nodes(
    store: MemoryMetadataStore,
) -> None:
    aggregation = await two_brokers(store)
    await aggregation.write_bundle_data()
    assert await node(store, bundle_data_node(Y)) is not None
    assert await node(store, f"/loadbalance/broker-time-average/{B}") is not None
    await store.delete(f"/loadbalance/brokers/{B}")
    result = await aggregation.refresh()
    assert result.dead_brokers == [B]
    assert result.removed_bundles == [Y]
    assert await node(store, bundle_data_node(Y)) is None
    assert await node(store, f"/loadbalance/broker-time-average/{B}") is None
    assert await node(store, bundle_data_node(X)) is not None
    assert list(aggregation.manager.load_data.broker_data) == [A]


async def test_write_bundle_data_stores_pulsars_json_and_the_time_averages(
    store: MemoryMetadataStore,
) -> None:
    aggregation = LeaderAggregation(store, conf())
    await put_report(store, A, local(1, {X: stats(100, 1000, topics=4)}))
    await aggregation.refresh()
    assert await node(store, bundle_data_node(X)) is None  # only the periodic writer writes
    assert await aggregation.write_bundle_data() == 1
    bundle = await node(store, bundle_data_node(X))
    assert bundle is not None
    assert list(bundle) == ["shortTermData", "longTermData", "topics"]
    # writeBundleDataOnZooKeeper runs one more updateBundleData first: a second sample.
    assert bundle["shortTermData"] == {
        "maxSamples": 10,
        "numSamples": 2,
        "msgThroughputIn": 1000.0,
        "msgThroughputOut": 0.0,
        "msgRateIn": 100.0,
        "msgRateOut": 0.0,
    }
    assert bundle["topics"] == 4
    average = await node(store, f"/loadbalance/broker-time-average/{A}")
    assert average is not None
    assert average["shortTermMsgRateIn"] == 100.0
    assert average["longTermMsgThroughputIn"] == 1000.0


async def test_only_the_top_k_times_brokers_bundles_are_written(
    store: MemoryMetadataStore,
) -> None:
    aggregation = LeaderAggregation(store, conf(loadBalancerMaxNumberOfBundlesInBundleLoadReport=1))
    await put_report(store, A, local(1, {X: stats(100, 2 * MIB), Y: stats(10, 100)}))
    await aggregation.refresh()
    assert await aggregation.write_bundle_data() == 1
    assert await node(store, bundle_data_node(X)) is not None
    assert await node(store, bundle_data_node(Y)) is None


async def test_a_report_that_does_not_parse_keeps_the_brokers_last_report(
    store: MemoryMetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    aggregation = await two_brokers(store)
    await store.put(f"/loadbalance/brokers/{B}", b"{not json")
    await store.put("/loadbalance/brokers/stranger:1", b"[1, 2]")
    with caplog.at_level(logging.WARNING):
        result = await aggregation.refresh()
    assert result.dead_brokers == []
    assert sorted(aggregation.manager.load_data.broker_data) == [A, B]
    assert aggregation.manager.load_data.bundle_data[Y].short_term_data.num_samples == 2
    assert "ignoring the load report of 10.0.0.2:8080" in caplog.text
    assert "ignoring the load report of stranger:1" in caplog.text


async def test_a_stored_bundle_data_node_that_does_not_parse_is_logged_and_skipped(
    store: MemoryMetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.put(bundle_data_node(X), b'{"shortTermData": "seven"}')
    await store.put(bundle_data_node(Y), encode(BundleData(topics=9)))
    aggregation = LeaderAggregation(store, conf())
    with caplog.at_level(logging.WARNING):
        assert await aggregation.load_stored_bundle_data() == 1
    assert f"ignoring the stored bundle data /loadbalance/bundle-data/{X}" in caplog.text
    await put_report(store, A, local(1, {X: stats(100, 1000), Y: stats(1, 1)}))
    await aggregation.refresh()
    data = aggregation.manager.load_data.bundle_data
    assert data[X].short_term_data.num_samples == 1  # defaults, replaced by the first sample
    assert data[Y].topics == 1  # the stored one was used and updated


async def test_extensible_loads_take_a_sample_of_the_latest_report_each_time(
    store: MemoryMetadataStore,
) -> None:
    aggregation = LeaderAggregation(store, conf(), now_ms=lambda: 5000)
    await put_report(store, A, local(1000, {X: stats(100, 1000)}))
    await aggregation.refresh()
    assert aggregation.broker_loads == {}  # refreshing alone takes no sample
    aggregation.sample_broker_loads()
    load = aggregation.broker_loads[A]
    assert load.weighted_max_ema == pytest.approx(0.1)  # the first update takes the value
    assert (load.updated_at, load.reported_at) == (5000, 1000)
    await put_report(store, A, local(2000, {X: stats(100, 1000)}, cpu=60))
    await aggregation.refresh()
    aggregation.sample_broker_loads()
    aggregation.sample_broker_loads()
    after_one = 0.1 * 0.9 + 0.6 * 0.1
    assert load.weighted_max_ema == pytest.approx(after_one * 0.9 + 0.6 * 0.1)
    top = aggregation.top_bundles[A].top_bundles_load_data
    assert [b.bundle_name for b in top] == [X]
    await store.delete(f"/loadbalance/brokers/{A}")
    await aggregation.refresh()
    assert aggregation.broker_loads == {}
