"""Broker filters: Pulsar's ``BrokerVersionFilterTest``, ``BrokerLoadManagerClassFilterTest``
(modular) and ``BrokerMaxTopicCountFilterTest`` (extensible), and ``LoadManagerSharedTest``."""

from __future__ import annotations

import pytest

from emubroker.config import BrokerConfig
from emubroker.config.loadbalancer import EXTENSIBLE_LOAD_MANAGER, MODULAR_LOAD_MANAGER
from emubroker.loadbalance.model.data import BrokerData, BundleData, LoadData, LocalBrokerData
from emubroker.loadbalance.model.extensible_data import BrokerLoadData
from emubroker.loadbalance.strategies.filters import (
    BrokerFilterError,
    SemanticVersion,
    filter_brokers_with_large_topic_count,
    filter_by_load_manager_class,
    filter_by_max_topic_count,
    filter_by_version,
    latest_version,
)
from emubroker.loadbalance.strategies.isolation import BundleRangeCache
from emubroker.loadbalance.strategies.selection import remove_most_servicing_brokers_for_namespace


def versions(**by_broker: str | None) -> LoadData:
    return LoadData(
        broker_data={
            b: BrokerData(local_data=LocalBrokerData(broker_version_string=v))
            for b, v in by_broker.items()
        }
    )


def test_latest_version() -> None:
    load_data = versions(
        broker1="1.1.0-SNAPSHOT", broker2="1.1.0-SNAPSHOT", broker3="1.2.0-SNAPSHOT"
    )
    brokers = ["broker1", "broker2", "broker3"]
    latest = latest_version(brokers, load_data)
    assert (latest.major, latest.minor, latest.patch) == (1, 2, 0)
    assert filter_by_version(brokers, load_data, BrokerConfig(preferLaterVersions=True)) == [
        "broker3"
    ]
    assert filter_by_version(brokers, load_data, BrokerConfig()) == brokers  # feature off


@pytest.mark.parametrize(
    ("version", "message"),
    [(None, "No version string"), ("", "No version string"), ("x.y", "Invalid")],
)
def test_version_filter_errors(version: str | None, message: str) -> None:
    load_data = versions(a="1.0.0", b=version)
    with pytest.raises(BrokerFilterError, match=message):
        filter_by_version(["a", "b"], load_data, BrokerConfig(preferLaterVersions=True))
    with pytest.raises(BrokerFilterError, match="No broker data"):
        latest_version(["a", "nobody"], load_data)
    with pytest.raises(BrokerFilterError, match="empty"):
        latest_version([], load_data)


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.0.0-alpha", "1.0.0"),
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),
        ("1.0.0-rc.1", "1.0.0"),
        ("2.11.0-hw-0.0.4-SNAPSHOT", "2.11.0"),
        ("1.9.0", "1.10.0"),
    ],
)
def test_semver_precedence(lower: str, higher: str) -> None:
    a, b = SemanticVersion.parse(lower), SemanticVersion.parse(higher)
    assert a.compare(b) == -1
    assert b.compare(a) == 1


def test_build_metadata_counts_only_in_build_aware_order() -> None:
    with_build, plain = SemanticVersion.parse("1.0.0+b1"), SemanticVersion.parse("1.0.0")
    assert with_build.compare(plain) == 0
    assert with_build.compare_build_aware(plain) == -1  # no build metadata ranks higher
    assert (
        SemanticVersion.parse("1.0.0+b1").compare_build_aware(SemanticVersion.parse("1.0.0+b2"))
        == -1
    )


def test_load_manager_class_filter() -> None:
    load_data = LoadData(
        broker_data={
            "broker1": BrokerData(LocalBrokerData(load_manager_class_name=MODULAR_LOAD_MANAGER)),
            "broker2": BrokerData(LocalBrokerData(load_manager_class_name=EXTENSIBLE_LOAD_MANAGER)),
            "broker3": BrokerData(LocalBrokerData(load_manager_class_name=None)),
        }
    )
    everyone = ["broker1", "broker2", "broker3"]
    assert filter_by_load_manager_class(everyone, load_data, BrokerConfig()) == ["broker1"]
    extensible = BrokerConfig(loadManagerClassName=EXTENSIBLE_LOAD_MANAGER)
    assert filter_by_load_manager_class(everyone, load_data, extensible) == ["broker2"]


def test_max_topic_count_filter_is_inclusive_without_fallback() -> None:
    conf = BrokerConfig()
    limit = conf.loadBalancerBrokerMaxTopics
    loads = {
        "broker1": BrokerLoadData(topics=limit),
        "broker2": BrokerLoadData(),
        "broker3": BrokerLoadData(topics=limit * 2),
    }
    brokers = ["broker1", "broker2", "broker3", "broker4"]
    assert filter_by_max_topic_count(brokers, loads, conf) == ["broker2", "broker4"]
    assert filter_by_max_topic_count(["broker1"], loads, conf) == []


def test_modular_topic_count_filter_keeps_at_the_limit_and_falls_back() -> None:
    def broker(topics: int, preallocated: int = 0) -> BrokerData:
        data = BrokerData(LocalBrokerData(num_topics=topics))
        if preallocated:
            data.preallocated_bundle_data["p"] = BundleData(topics=preallocated)
        return data

    load_data = LoadData(broker_data={"a": broker(100), "b": broker(60, 41), "c": broker(101)})
    assert filter_brokers_with_large_topic_count(["a", "b", "c"], load_data, 100) == ["a"]
    assert filter_brokers_with_large_topic_count(["b", "c"], load_data, 100) == ["b", "c"]


def test_remove_most_servicing_brokers_for_namespace() -> None:
    namespace = "tenant1/ns1"
    bundle = namespace + "/0x00000000_0x40000000"
    cache = BundleRangeCache()
    assert remove_most_servicing_brokers_for_namespace(bundle, [], cache) == []
    assert remove_most_servicing_brokers_for_namespace(bundle, ["broker1"], cache) == ["broker1"]
    cache.add("broker1", namespace, "0x40000000_0x80000000")
    assert remove_most_servicing_brokers_for_namespace(bundle, ["broker1"], cache) == ["broker1"]
    assert remove_most_servicing_brokers_for_namespace(bundle, ["broker1", "broker2"], cache) == [
        "broker2"
    ]
    cache.add("broker2", namespace, "0x80000000_0xc0000000")
    assert remove_most_servicing_brokers_for_namespace(bundle, ["broker1", "broker2"], cache) == [
        "broker1",
        "broker2",
    ]
    cache.add("broker2", namespace, "0xc0000000_0xd0000000")
    assert remove_most_servicing_brokers_for_namespace(bundle, ["broker1", "broker2"], cache) == [
        "broker1"
    ]
    cache.add("broker3", namespace, "0xd0000000_0xffffffff")
    assert remove_most_servicing_brokers_for_namespace(
        bundle, ["broker1", "broker2", "broker3"], cache
    ) == ["broker1", "broker3"]
