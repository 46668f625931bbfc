"""The bundle ownership table over a shared in-memory metadata tree (two brokers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import anyio
import pytest

from emubroker.loadbalance.ownership.records import BrokerInfo, BundleOwner
from emubroker.loadbalance.ownership.table import OwnershipTable
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree, MetadataStoreError
from emubroker.metadata.paths import ownership_path
from emubroker.naming import BundleRange, NamespaceBundle, TopicName, topic_hash
from protocol.clock import FakeClock

if TYPE_CHECKING:
    from emubroker.metadata import MetadataStore

pytestmark = pytest.mark.anyio

ME = BrokerInfo("pulsar://127.0.0.1:6650", "http://127.0.0.1:8080")
OTHER = BrokerInfo("pulsar://127.0.0.1:6660", "http://127.0.0.1:8090")
TOPIC = TopicName.parse("persistent://public/default/x")


def test_topics_map_to_pulsars_default_bundles() -> None:
    table = OwnershipTable(MemoryMetadataStore(), ME, bundles_per_namespace=4)
    topic = TopicName.parse("persistent://pulsar/global/ns1/topic-1")
    # spec/pulsar-behaviour.md §5.2: crc32 = 0x2924fad1 -> first of four bundles
    assert topic_hash(topic) == 0x2924FAD1
    assert table.bundle_of(topic).bundle_range == BundleRange(0, 0x40000000)
    table.set_boundaries(topic.namespace, (0, 0x20000000, 0xFFFFFFFF))
    assert table.bundle_of(topic).bundle_range == BundleRange(0x20000000, 0xFFFFFFFF)


async def test_acquiring_takes_an_ephemeral_lock() -> None:
    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as store:
        table = OwnershipTable(store, ME, bundles_per_namespace=4)
        bundle = table.bundle_of(TopicName.parse("t"))
        assert await table.get_owner(bundle) is None
        assert await table.try_acquire(bundle) == BundleOwner(ME)
        node = await store.get(ownership_path(bundle))
        assert node is not None
        assert node.ephemeral
        assert ownership_path(bundle) == f"/namespace/public/default/{bundle.bundle_range.name}"
        assert table.owned_bundles() == [bundle]
        assert table.is_serving(bundle)
    async with MemoryMetadataStore(tree) as after:
        assert await after.get(ownership_path(bundle)) is None  # died with the session


async def test_a_bundle_owned_elsewhere_answers_that_owner() -> None:
    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as one, MemoryMetadataStore(tree) as two:
        first = OwnershipTable(one, OTHER, bundles_per_namespace=4)
        second = OwnershipTable(two, ME, bundles_per_namespace=4)
        bundle = first.bundle_of(TOPIC)
        assert await first.try_acquire(bundle) == BundleOwner(OTHER)
        assert await second.try_acquire(bundle) == BundleOwner(OTHER)
        assert await second.get_owner(bundle) == BundleOwner(OTHER)
        assert second.owned_bundles() == []
        assert not second.is_serving(bundle)
        await first.release(bundle)
        assert await second.try_acquire(bundle) == BundleOwner(ME)


async def test_a_disabled_bundle_is_reported_as_being_unloaded() -> None:
    async with MemoryMetadataStore() as store:
        table = OwnershipTable(store, ME, bundles_per_namespace=4)
        bundle = table.bundle_of(TOPIC)
        await table.try_acquire(bundle)
        table.disable(bundle)
        assert not table.is_serving(bundle)
        assert table.is_owned(bundle)
        assert await table.get_owner(bundle) == BundleOwner(ME, disabled=True)
        await table.release(bundle)
        assert await table.get_owner(bundle) is None


async def test_a_lock_lost_with_the_session_drops_the_bundle(fake_clock: FakeClock) -> None:
    lost: list[NamespaceBundle] = []

    async def on_lost(bundle: NamespaceBundle) -> None:
        lost.append(bundle)

    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as store, MemoryMetadataStore(tree) as other:
        table = OwnershipTable(store, ME, bundles_per_namespace=4, on_lost=on_lost)
        rival = OwnershipTable(other, OTHER, bundles_per_namespace=4)
        kept = table.bundle_of(TOPIC)
        async with anyio.create_task_group() as tg:
            await tg.start(table.watch)
            await table.try_acquire(kept)
            released = table.bundle_of(TopicName.parse("persistent://public/default/y"))
            if released != kept:
                await table.try_acquire(released)
                await table.release(released)  # a release is not a loss
            await fake_clock.run_until_idle()
            assert lost == []
            await store.expire_session()  # a frozen broker: its session ended on the store
            await fake_clock.run_until_idle()
            assert lost == [kept]
            assert not table.is_owned(kept)
            # Another broker takes it; this one answers with that owner from now on.
            assert await rival.try_acquire(kept) == BundleOwner(OTHER)
            assert await table.get_owner(kept) == BundleOwner(OTHER)
            tg.cancel_scope.cancel()


class Unreachable:
    """A metadata session whose store stops answering when told to (a network partition)."""

    def __init__(self, store: MemoryMetadataStore) -> None:
        self._store = store
        self.cut = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if not self.cut or not callable(attribute):
            return attribute

        async def refused(*args: Any, **kwargs: Any) -> Any:
            raise MetadataStoreError("cannot reach the metadata store")

        return refused


async def test_a_broker_that_cannot_reach_the_store_drops_its_bundles(
    fake_clock: FakeClock,
) -> None:
    lost: list[NamespaceBundle] = []

    async def on_lost(bundle: NamespaceBundle) -> None:
        lost.append(bundle)

    async with MemoryMetadataStore() as store:
        reach = Unreachable(store)
        table = OwnershipTable(
            cast("MetadataStore", reach),
            ME,
            bundles_per_namespace=4,
            on_lost=on_lost,
            clock=fake_clock,
        )
        bundle = table.bundle_of(TOPIC)
        await table.try_acquire(bundle)
        async with anyio.create_task_group() as tg:
            await tg.start(table.prove, 30.0)
            await fake_clock.advance(60.0)  # proven twice a timeout: nothing happens
            assert lost == []
            reach.cut = True
            await fake_clock.advance(29.0)  # not yet a whole session timeout without proof
            assert lost == []
            assert table.is_serving(bundle)
            await fake_clock.advance(11.0)
            assert lost == [bundle]
            assert not table.is_owned(bundle)
            tg.cancel_scope.cancel()


async def test_a_deleted_lock_node_is_found_without_visiting_every_bundle_held(
    fake_clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A broker of a large cluster holds hundreds of bundles and its watch sees every deletion
    # under /namespace (other brokers' releases included): each must cost a look-up, not a
    # lock path computed per bundle held.
    from emubroker.loadbalance.ownership import table as table_module

    lost: list[NamespaceBundle] = []

    async def on_lost(bundle: NamespaceBundle) -> None:
        lost.append(bundle)

    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as store, MemoryMetadataStore(tree) as other:
        table = OwnershipTable(store, ME, bundles_per_namespace=200, on_lost=on_lost)
        rival = OwnershipTable(other, OTHER, bundles_per_namespace=200)
        bundles = [table.bundle_of(TopicName.parse(f"t-{i}")) for i in range(400)]
        held = sorted(set(bundles), key=str)
        mine, theirs, gone = held[:-2], held[-2], held[-1]
        for bundle in mine:
            await table.try_acquire(bundle)
        await table.try_acquire(gone)
        await rival.try_acquire(theirs)
        computed: list[NamespaceBundle] = []

        def counting_path(bundle: NamespaceBundle) -> str:
            computed.append(bundle)
            return ownership_path(bundle)

        monkeypatch.setattr(table_module, "ownership_path", counting_path)
        async with anyio.create_task_group() as tg:
            await tg.start(table.watch)
            await rival.release(theirs)  # another broker's node: none of ours
            await other.delete(ownership_path(gone))  # ours, deleted behind our back
            await fake_clock.run_until_idle()
            assert lost == [gone]
            assert table.owned_bundles() == mine
            assert len(computed) <= 4
            tg.cancel_scope.cancel()


class CountingReads:
    """A metadata session that counts the nodes read."""

    def __init__(self, store: MemoryMetadataStore) -> None:
        self._store = store
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get(self, path: str) -> Any:
        self.reads.append(path)
        return await self._store.get(path)


async def test_a_proof_reads_one_lock_node_not_every_one_held(fake_clock: FakeClock) -> None:
    # As a ZooKeeper client pings its session rather than reading its nodes: one read proves
    # the store answers and the session holding every node of this broker is alive.
    lost: list[NamespaceBundle] = []

    async def on_lost(bundle: NamespaceBundle) -> None:
        lost.append(bundle)

    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as store, MemoryMetadataStore(tree) as other:
        counting = CountingReads(store)
        table = OwnershipTable(
            cast("MetadataStore", counting),
            ME,
            bundles_per_namespace=64,
            on_lost=on_lost,
            clock=fake_clock,
        )
        held = sorted({table.bundle_of(TopicName.parse(f"t-{i}")) for i in range(200)}, key=str)
        for bundle in held:
            await table.try_acquire(bundle)
        counting.reads.clear()
        async with anyio.create_task_group() as tg:
            await tg.start(table.prove, 30.0)
            await fake_clock.advance(30.0)  # three proofs
            assert len(counting.reads) == 3
            assert lost == []
            # The first node held is gone and another broker holds it (the watch would have
            # said; there is none here): the proof reads every node and drops that one.
            first = table.owned_bundles()[0]
            await other.delete(ownership_path(first))
            await OwnershipTable(other, OTHER, bundles_per_namespace=64).try_acquire(first)
            counting.reads.clear()
            await fake_clock.advance(10.0)
            assert lost == [first]
            assert len(counting.reads) == 1 + len(held)
            tg.cancel_scope.cancel()


async def test_another_broker_s_ownership_is_read_once_while_the_watch_runs(
    fake_clock: FakeClock,
) -> None:
    # Pulsar's ownership read cache: a lookup of a bundle another broker owns reads its lock
    # node once; the watch's notification of a change to it drops what was kept.
    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as store, MemoryMetadataStore(tree) as other:
        counting = CountingReads(store)
        table = OwnershipTable(cast("MetadataStore", counting), ME, bundles_per_namespace=4)
        rival = OwnershipTable(other, OTHER, bundles_per_namespace=4)
        bundle = table.bundle_of(TOPIC)
        await rival.try_acquire(bundle)
        assert await table.get_owner(bundle) == BundleOwner(OTHER)  # not watching: not kept
        async with anyio.create_task_group() as tg:
            await tg.start(table.watch)
            counting.reads.clear()
            for _ in range(3):
                assert await table.get_owner(bundle) == BundleOwner(OTHER)
            assert counting.reads == [ownership_path(bundle)]
            await rival.release(bundle)
            await fake_clock.run_until_idle()
            assert await table.get_owner(bundle) is None
            assert await table.get_owner(bundle) is None  # nobody is never kept
            assert len(counting.reads) == 3
            assert await table.try_acquire(bundle) == BundleOwner(ME)
            assert await rival.get_owner(bundle) == BundleOwner(ME)
            tg.cancel_scope.cancel()
        counting.reads.clear()
        await table.release(bundle)
        await rival.try_acquire(bundle)
        assert await table.get_owner(bundle) == BundleOwner(OTHER)  # the watch ended: read
        assert await table.get_owner(bundle) == BundleOwner(OTHER)
        assert counting.reads.count(ownership_path(bundle)) == 3  # with the release's own
