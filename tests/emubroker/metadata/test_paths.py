from __future__ import annotations

import pytest

from emubroker.metadata import paths
from emubroker.naming import BundleRange, NamespaceBundle, NamespaceName, TopicName


def test_admin_resources_are_where_pulsar_keeps_them() -> None:
    ns = NamespaceName("acme", "orders")
    assert paths.cluster_path("standalone") == "/admin/clusters/standalone"
    assert paths.tenant_path("acme") == "/admin/policies/acme"
    assert paths.namespace_path(ns) == "/admin/policies/acme/orders"
    assert paths.local_policies_path(ns) == "/admin/local-policies/acme/orders"
    assert paths.DYNAMIC_CONFIGURATION_PATH == "/admin/configuration"


@pytest.mark.parametrize(
    ("path_of", "expected"),
    [
        (paths.partitioned_topic_path, "/admin/partitioned-topics/acme/orders/persistent/a%20b"),
        (paths.topic_policies_path, "/admin/topic-policies/acme/orders/persistent/a%20b"),
        (paths.managed_ledger_path, "/managed-ledgers/acme/orders/persistent/a%20b"),
    ],
)
def test_per_topic_nodes_encode_the_local_name(path_of, expected: str) -> None:
    assert path_of(TopicName.parse("persistent://acme/orders/a b")) == expected


def test_cursors_are_children_of_the_managed_ledger() -> None:
    topic = TopicName.parse("persistent://acme/orders/t")
    assert paths.cursor_path(topic, "sub/1") == "/managed-ledgers/acme/orders/persistent/t/sub%2F1"


def test_schemas_are_shared_by_partitions_and_domains() -> None:
    partition = TopicName.parse("persistent://acme/orders/t-partition-2")
    other_domain = TopicName.parse("non-persistent://acme/orders/t")
    assert paths.schema_path(partition) == "/schemas/acme/orders/t"
    assert paths.schema_path(other_domain) == "/schemas/acme/orders/t"


def test_load_manager_and_ownership_nodes_follow_spec_6_1() -> None:
    bundle = NamespaceBundle(NamespaceName("acme", "orders"), BundleRange(0, 0x40000000))
    assert paths.ownership_path(bundle) == "/namespace/acme/orders/0x00000000_0x40000000"
    assert paths.bundle_data_path(bundle) == (
        "/loadbalance/bundle-data/acme/orders/0x00000000_0x40000000"
    )
    assert paths.LEADER_PATH == "/loadbalance/leader"
    assert paths.load_report_path("b:8080") == "/loadbalance/brokers/b:8080"
    assert paths.broker_time_average_path("b:8080") == ("/loadbalance/broker-time-average/b:8080")
