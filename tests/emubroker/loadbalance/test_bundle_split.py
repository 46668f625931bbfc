"""BundleSplitter over an in-memory metadata tree: Pulsar's steps, retries and refusals."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from emubroker.config import BrokerConfig
from emubroker.loadbalance.ownership.bundle_split import (
    SPLIT_RETRIES,
    BundleSplitter,
    InvalidSplitError,
    SplitFailedError,
)
from emubroker.loadbalance.ownership.records import BrokerInfo
from emubroker.loadbalance.ownership.table import OwnershipTable
from emubroker.loadbalance.strategies.split import TopicLoad
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree
from emubroker.metadata.paths import local_policies_path, ownership_path
from emubroker.naming import FULL_RANGE, BundleRange, NamespaceBundle, NamespaceName, name_hash
from emubroker.policies import Policies, PolicyStore, bundles_data
from emubroker.policies.local import LocalPolicies, write_local_policies
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

ME = BrokerInfo("pulsar://127.0.0.1:6650", "http://127.0.0.1:8080")
OTHER = BrokerInfo("pulsar://127.0.0.1:6660", "http://127.0.0.1:8090")
NAMESPACE = NamespaceName("acme", "orders")
FULL = NamespaceBundle(NAMESPACE, FULL_RANGE)


class Rates:
    def __init__(self, rate: float) -> None:
        self.msg_rate_in = rate
        self.msg_rate_out = 0.0
        self.msg_throughput_in = 0.0
        self.msg_throughput_out = 0.0


class Harness:
    def __init__(
        self,
        store: Any,
        clock: FakeClock,
        *,
        topics: Sequence[str] = (),
        loads: Mapping[str, TopicLoad] | None = None,
        config: BrokerConfig | None = None,
    ) -> None:
        self.ownership = OwnershipTable(store, ME, bundles_per_namespace=1)
        self.published: list[Policies] = []
        self.unloaded: list[NamespaceBundle] = []
        self.splitter = BundleSplitter(
            store,
            self.ownership,
            clock,
            config=lambda: config or BrokerConfig(),
            topics_of=lambda _ns: list(topics),
            topic_loads=lambda _names: loads or {},
            published=lambda _ns, policies: self.published.append(policies),
            unload=self._unload,
        )

    async def _unload(self, bundle: NamespaceBundle) -> None:
        self.unloaded.append(bundle)
        await self.ownership.release(bundle)


class RacingStore:
    """A session on which another writer updates the local policies after each read of them."""

    def __init__(self, store: MemoryMetadataStore, races: int) -> None:
        self.store = store
        self.races = races

    async def get(self, path: str) -> Any:
        node = await self.store.get(path)
        if self.races and path == local_policies_path(NAMESPACE) and node is not None:
            self.races -= 1
            await self.store.put(path, node.value)  # same content, next version
        return node

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def _namespace(
    store: Any, boundaries: tuple[int, ...] = (0, 0xFFFFFFFF), *, local: bool = False
) -> None:
    layout = bundles_data(boundaries)
    await PolicyStore(store).create_namespace(
        NAMESPACE, Policies(bundles=layout, replication_clusters=["c"])
    )
    if local:  # a broker loaded the namespace before (copyToLocalPolicies)
        await write_local_policies(store, NAMESPACE, LocalPolicies(bundles=layout), -1)


async def test_a_split_copies_local_policies_then_writes_both(fake_clock: FakeClock) -> None:
    async with MemoryMetadataStore() as store:
        await _namespace(store)
        harness = Harness(store, fake_clock)
        assert await harness.ownership.owner_of_bundle(FULL) == ME
        children = await harness.splitter.split(FULL, "range_equally_divide")
        assert [c.bundle_range for c in children] == [
            BundleRange(0, 0x7FFFFFFF),
            BundleRange(0x7FFFFFFF, 0xFFFFFFFF),
        ]
        local = await store.get(local_policies_path(NAMESPACE))
        assert local is not None
        assert local.version == 1  # created from the policies (0), then split (1)
        layout = {"boundaries": ["0x00000000", "0x7fffffff", "0xffffffff"], "numBundles": 2}
        assert json.loads(local.value) == {"bundles": layout, "migrated": False}
        policies = await PolicyStore(store).get_namespace(NAMESPACE)
        assert policies is not None
        assert policies.bundles == bundles_data((0, 0x7FFFFFFF, 0xFFFFFFFF))
        assert harness.published == [policies]
        assert harness.ownership.owned_bundles() == list(children)
        assert harness.unloaded == []


async def test_unload_hands_every_child_to_the_unload(fake_clock: FakeClock) -> None:
    async with MemoryMetadataStore() as store:
        await _namespace(store)
        harness = Harness(store, fake_clock)
        children = await harness.splitter.split(FULL, "range_equally_divide", unload=True)
        assert harness.unloaded == list(children)
        assert harness.ownership.owned_bundles() == []


async def test_a_concurrent_writer_makes_the_split_retry_100_ms_later(
    fake_clock: FakeClock,
) -> None:
    async with MemoryMetadataStore() as memory:
        await _namespace(memory, local=True)
        store = RacingStore(memory, races=2)
        harness = Harness(store, fake_clock)
        result: list[tuple[NamespaceBundle, ...]] = []

        async def split() -> None:
            result.append(await harness.splitter.split(FULL, "range_equally_divide"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(split)
            await fake_clock.run_until_idle()
        assert fake_clock.now() == pytest.approx(0.2)  # two conflicts, two 100 ms pauses
        (children,) = result
        assert len(children) == 2
        # The children acquired by the lost attempts were released; the winners are held.
        assert harness.ownership.owned_bundles() == list(children)
        assert not await memory.exists(ownership_path(FULL))


async def test_writers_that_keep_winning_fail_the_split(fake_clock: FakeClock) -> None:
    async with MemoryMetadataStore() as memory:
        await _namespace(memory, local=True)
        harness = Harness(RacingStore(memory, races=SPLIT_RETRIES + 1), fake_clock)
        failures: list[SplitFailedError] = []

        async def split() -> None:
            with pytest.raises(SplitFailedError, match="not success update nsBundles") as caught:
                await harness.splitter.split(FULL, "range_equally_divide")
            failures.append(caught.value)

        async with anyio.create_task_group() as tg:
            tg.start_soon(split)
            await fake_clock.run_until_idle()
        assert len(failures) == 1
        assert fake_clock.now() == pytest.approx(SPLIT_RETRIES * 0.1)
        assert harness.ownership.owned_bundles() == []
        policies = await PolicyStore(memory).get_namespace(NAMESPACE)
        assert policies is not None
        assert policies.bundles == bundles_data((0, 0xFFFFFFFF))


async def test_a_child_owned_elsewhere_fails_the_split_and_publishes_nothing(
    fake_clock: FakeClock,
) -> None:
    tree = MemoryMetadataTree()
    async with MemoryMetadataStore(tree) as mine, MemoryMetadataStore(tree) as theirs:
        await _namespace(mine)
        other = OwnershipTable(theirs, OTHER, bundles_per_namespace=1)
        child = NamespaceBundle(NAMESPACE, BundleRange(0x7FFFFFFF, 0xFFFFFFFF))
        assert await other.owner_of_bundle(child) == OTHER
        harness = Harness(mine, fake_clock)
        with pytest.raises(SplitFailedError, match=r"is owned by pulsar://127\.0\.0\.1:6660"):
            await harness.splitter.split(FULL, "range_equally_divide")
        assert harness.ownership.owned_bundles() == []  # the first child was given back
        assert harness.published == []


async def test_flow_or_qps_cuts_where_the_rate_overflows(fake_clock: FakeClock) -> None:
    topics = [f"persistent://acme/orders/t{i}" for i in range(4)]
    loads = {t: Rates(400.0) for t in topics}
    config = BrokerConfig(
        defaultNamespaceBundleSplitAlgorithm="flow_or_qps_equally_divide",
        loadBalancerNamespaceBundleMaxMsgRate=1000,
    )
    async with MemoryMetadataStore() as store:
        await _namespace(store)
        harness = Harness(store, fake_clock, topics=topics, loads=loads, config=config)
        children = await harness.splitter.split(FULL, "flow_or_qps_equally_divide")
        hashes = sorted(name_hash(t) for t in topics)
        # 400 + 400 fits under 1000, a third does not: one cut between the 2nd and 3rd topics.
        cut = hashes[1] + (hashes[2] - hashes[1]) // 2 + 1
        assert [c.bundle_range for c in children] == [
            BundleRange(0, cut),
            BundleRange(cut, 0xFFFFFFFF),
        ]


async def test_flow_or_qps_without_its_statistics_is_refused(fake_clock: FakeClock) -> None:
    async with MemoryMetadataStore() as store:
        await _namespace(store)
        harness = Harness(store, fake_clock)
        with pytest.raises(SplitFailedError, match="needs topic statistics"):
            await harness.splitter.split(FULL, "flow_or_qps_equally_divide")


async def test_refusals_change_nothing(fake_clock: FakeClock) -> None:
    async with MemoryMetadataStore() as store:
        await _namespace(store, (0, 1, 0xFFFFFFFF))
        harness = Harness(store, fake_clock, topics=["persistent://acme/orders/a", "x"])
        tiny = NamespaceBundle(NAMESPACE, BundleRange(0, 1))
        with pytest.raises(InvalidSplitError, match="can't be split further"):
            await harness.splitter.split(tiny, "range_equally_divide")
        with pytest.raises(InvalidSplitError, match="SplitBoundaries can't be empty"):
            await harness.splitter.split(FULL, "specified_positions_divide")
        stale = NamespaceBundle(NAMESPACE, BundleRange(0, 0x10000000))
        with pytest.raises(SplitFailedError, match="not found under namespace"):
            await harness.splitter.split(stale, "range_equally_divide")
        assert harness.published == []
        assert harness.ownership.owned_bundles() == []
        await anyio.lowlevel.checkpoint()
