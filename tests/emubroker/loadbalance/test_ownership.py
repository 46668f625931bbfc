"""The bundle -> owner table over a shared in-memory metadata tree (two brokers)."""

from __future__ import annotations

import pytest

from emubroker.loadbalance.ownership import BrokerInfo, OwnershipTable
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree
from emubroker.metadata.paths import ownership_path
from emubroker.naming import BundleRange, TopicName, topic_hash

pytestmark = pytest.mark.anyio

ME = BrokerInfo("pulsar://127.0.0.1:6650", "http://127.0.0.1:8080")
OTHER = BrokerInfo("pulsar://127.0.0.1:6660", "http://127.0.0.1:8090")


def test_topics_map_to_pulsars_default_bundles() -> None:
    table = OwnershipTable(MemoryMetadataStore(), ME, bundles_per_namespace=4)
    topic = TopicName.parse("persistent://pulsar/global/ns1/topic-1")
    # spec/pulsar-behaviour.md §5.2: crc32 = 0x2924fad1 -> first of four bundles
    assert topic_hash(topic) == 0x2924FAD1
    assert table.bundle_of(topic).bundle_range == BundleRange(0, 0x40000000)
    table.set_boundaries(topic.namespace, (0, 0x20000000, 0xFFFFFFFF))
    assert table.bundle_of(topic).bundle_range == BundleRange(0x20000000, 0xFFFFFFFF)


async def test_first_lookup_acquires_an_ephemeral_lock() -> None:
    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as store:
        table = OwnershipTable(store, ME, bundles_per_namespace=4)
        topic = TopicName.parse("t")
        assert await table.owner_of(topic) == ME
        bundle = table.bundle_of(topic)
        node = await store.get(ownership_path(bundle))
        assert node is not None
        assert node.ephemeral
        assert ownership_path(bundle) == f"/namespace/public/default/{bundle.bundle_range.name}"
        assert table.owned_bundles() == [bundle]
        assert await table.owner_of(topic) == ME
    async with MemoryMetadataStore(tree) as after:
        assert await after.get(ownership_path(bundle)) is None  # died with the session


async def test_a_bundle_owned_elsewhere_answers_that_owner() -> None:
    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as one, MemoryMetadataStore(tree) as two:
        first = OwnershipTable(one, OTHER, bundles_per_namespace=4)
        second = OwnershipTable(two, ME, bundles_per_namespace=4)
        topic = TopicName.parse("persistent://public/default/x")
        assert await first.owner_of(topic) == OTHER
        assert await second.owner_of(topic) == OTHER
        assert second.owned_bundles() == []
        await first.release(first.bundle_of(topic))
        assert await second.owner_of(topic) == ME
