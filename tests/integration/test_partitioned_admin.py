"""A partitioned topic's own-name admin calls act on every partition, wherever it is owned.

Three brokers (the ``pulsar_cluster`` fixture), a partitioned topic whose partitions live on all
of them, the official client producing to each partition; ``partitioned-stats`` and ``unload`` on
the topic's name are asked of one broker, as Pulsar's ``PersistentTopicsBase`` answers them.
"""

from __future__ import annotations

import urllib.request

import pytest

from emubroker.testing import BrokerHandle, PulsarCluster
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration

NAMESPACE = "public/spread"
TOPIC = f"persistent://{NAMESPACE}/fan"
PATH = f"/admin/v2/persistent/{NAMESPACE}/fan"
PARTITIONS = 6


def loaded_here(broker: BrokerHandle) -> set[str]:
    """The partitions of the topic loaded on ``broker`` (its ``/metrics`` topic labels)."""
    with urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        f"{TOPIC}-partition-{i}"
        for i in range(PARTITIONS)
        if f'topic="{TOPIC}-partition-{i}"' in text
    }


def spread(cluster: PulsarCluster) -> dict[str, BrokerHandle | None]:
    """The topic with its partitions on every broker, partition ``i`` holding ``i + 1``
    messages (the producers closed: the partitions stay loaded, without clients)."""
    cluster.admin("PUT", f"/admin/v2/namespaces/{NAMESPACE}", {"bundles": {"numBundles": 16}})
    cluster.admin("PUT", f"{PATH}/partitions", PARTITIONS)
    partitions = [f"{TOPIC}-partition-{i}" for i in range(PARTITIONS)]
    # Each bundle of the partitions to a broker in turn.
    bundles = sorted({cluster.bundle_of(p) for p in partitions}, key=str)
    assert len(bundles) >= 3
    for i, bundle in enumerate(bundles):
        cluster.unload(bundle, to=i % 3)
    client = make_client(cluster.service_url)
    try:
        for i, partition in enumerate(partitions):
            producer = client.create_producer(partition)
            for n in range(i + 1):
                producer.send(f"{i}-{n}".encode())
            producer.close()
    finally:
        client.close()
    owners = {p: cluster.owner_of(p) for p in partitions}
    assert set(owners.values()) == set(cluster.brokers)
    for broker in cluster.brokers:
        assert loaded_here(broker) == {p for p, owner in owners.items() if owner == broker}
    return owners


def test_partitioned_stats_sum_every_owners_partitions(pulsar_cluster: PulsarCluster) -> None:
    owners = spread(pulsar_cluster)
    asked = pulsar_cluster.brokers[0]
    stats = pulsar_cluster.admin("GET", f"{PATH}/partitioned-stats", at=asked)
    assert stats["metadata"]["partitions"] == PARTITIONS
    assert stats["msgInCounter"] == sum(range(1, PARTITIONS + 1))
    assert {p: doc["msgInCounter"] for p, doc in stats["partitions"].items()} == {
        p: int(p.rsplit("-", 1)[1]) + 1 for p in owners
    }
    # Read at their owners: none of the other brokers' partitions was opened here.
    assert loaded_here(asked) == {p for p, owner in owners.items() if owner == asked}
    summary = pulsar_cluster.admin("GET", f"{PATH}/partitioned-stats?perPartition=false", at=asked)
    assert (summary["msgInCounter"], summary["partitions"]) == (stats["msgInCounter"], {})


def test_unload_of_the_topic_unloads_every_owners_partitions(
    pulsar_cluster: PulsarCluster,
) -> None:
    owners = spread(pulsar_cluster)
    assert pulsar_cluster.admin("PUT", f"{PATH}/unload", at=pulsar_cluster.brokers[1]) is None
    for broker in pulsar_cluster.brokers:
        assert loaded_here(broker) == set(), broker
    # Unloaded, not moved: each partition is still its owner's.
    assert {p: pulsar_cluster.owner_of(p) for p in owners} == owners


def test_deleting_the_topic_deletes_every_owners_partitions(
    pulsar_cluster: PulsarCluster,
) -> None:
    spread(pulsar_cluster)
    asked = pulsar_cluster.brokers[0]
    assert pulsar_cluster.admin("DELETE", f"{PATH}/partitions", at=asked) is None
    for broker in pulsar_cluster.brokers:
        assert loaded_here(broker) == set(), broker
    # Nothing of it is left in the store: the namespace is empty, as Pulsar finds it.
    assert pulsar_cluster.admin("GET", f"/admin/v2/namespaces/{NAMESPACE}/topics", at=asked) == []
    assert pulsar_cluster.admin("DELETE", f"/admin/v2/namespaces/{NAMESPACE}", at=asked) is None
