"""The leader's placement of unowned bundles (``LoadManagerSelector``): data in, data out.

Reports go into a memory metadata store, as the brokers write them; the leader term is a
``LeaderAggregation`` over the same store; each case names the broker Pulsar's
``selectBrokerForAssignment`` (or the extensible ``selectAsync``) would choose.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest

from emubroker.config import BrokerConfig, load_config
from emubroker.config.loadbalancer import EXTENSIBLE_LOAD_MANAGER
from emubroker.loadbalance.model.codec import encode
from emubroker.loadbalance.model.data import LocalBrokerData, NamespaceBundleStats
from emubroker.loadbalance.model.usage import ResourceUsage, SystemResourceUsage
from emubroker.loadbalance.ownership.assignment import LoadManagerSelector
from emubroker.loadbalance.ownership.placement_policies import PlacementPolicyCache
from emubroker.loadbalance.runtime.aggregation import LeaderAggregation
from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree
from emubroker.naming import BundleRange, NamespaceBundle, NamespaceName
from emubroker.policies.failure_domains import FailureDomain, set_failure_domain
from emubroker.policies.isolation import (
    AutoFailoverPolicyData,
    NamespaceIsolationData,
    set_anti_affinity_group,
    set_isolation_policy,
)
from emubroker.policies.namespaces import bundles_data
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

A, B, C = "127.0.0.1:8080", "127.0.0.2:8080", "127.0.0.3:8080"
FULL = BundleRange(0, 0xFFFFFFFF)


def bundle(namespace: str = "public/new", bundle_range: BundleRange = FULL) -> NamespaceBundle:
    return NamespaceBundle(NamespaceName.parse(namespace), bundle_range)


def report(
    conf: BrokerConfig, cpu: float = 10.0, bundles: dict[str, float] | None = None
) -> LocalBrokerData:
    """A report with ``cpu`` percent and bundles at the given msg rate in (each way)."""
    data = LocalBrokerData(
        web_service_url="http://x",
        pulsar_service_url="pulsar://x",
        load_manager_class_name=conf.loadManagerClassName,
    )
    stats = {
        name: NamespaceBundleStats(msg_rate_in=rate, msg_rate_out=rate, topics=1)
        for name, rate in (bundles or {}).items()
    }
    data.update(SystemResourceUsage(cpu=ResourceUsage(cpu, 100)), stats)
    return data


class Trace:
    def __init__(self) -> None:
        self.rows: list[LoadBalancerTraceRecord] = []

    def append(self, record: LoadBalancerTraceRecord) -> None:
        self.rows.append(record)


class CountingStore:
    """The store, counting the reads of policy nodes (everything below ``/admin``)."""

    def __init__(self, store: MemoryMetadataStore) -> None:
        self._store = store
        self.policy_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get(self, path: str) -> Any:
        self.policy_reads += path.startswith("/admin/")
        return await self._store.get(path)

    async def children(self, path: str) -> list[str]:
        self.policy_reads += path.startswith("/admin/")
        return await self._store.children(path)


class Cluster:
    """A store with reports, a leader term on it, the policy cache and the selector under test."""

    def __init__(self, clock: FakeClock, **overrides: Any) -> None:
        self.conf = load_config(overrides=overrides)
        self.store = CountingStore(MemoryMetadataTree().open_session())
        self.term: LeaderAggregation | None = LeaderAggregation(self.store, self.conf)
        self.trace = Trace()
        self.policies = PlacementPolicyCache(self.store, self.conf.clusterName)
        self.selector = LoadManagerSelector(
            self.store,
            clock,
            broker_id=A,
            config=lambda: self.conf,
            policies=self.policies.policies,
        )
        self.selector.attach(lambda: self.term, self.trace)

    async def report(self, broker: str, **kwargs: Any) -> None:
        await self.store.put(f"/loadbalance/brokers/{broker}", encode(report(self.conf, **kwargs)))

    async def refresh(self) -> None:
        assert self.term is not None
        await self.term.refresh()
        self.term.sample_broker_loads()

    async def select(self, target: NamespaceBundle) -> tuple[str | None, str]:
        await anyio.wait_all_tasks_blocked()  # the policy watch has applied what was written
        chosen = await self.selector.select(target)
        assert self.selector.last is not None
        return chosen, self.selector.last.reason


MakeCluster = Callable[..., Awaitable[Cluster]]


@pytest.fixture
async def make_cluster(fake_clock: FakeClock) -> AsyncIterator[MakeCluster]:
    """Clusters whose policy cache watches the store for the test's duration."""
    async with anyio.create_task_group() as tg:

        async def make(**overrides: Any) -> Cluster:
            cluster = Cluster(fake_clock, **overrides)
            await tg.start(cluster.policies.watch)
            return cluster

        yield make
        tg.cancel_scope.cancel()


async def test_no_registered_broker_no_answer(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster()
    assert await cluster.selector.select(bundle()) is None


async def test_least_long_term_message_rate_picks_the_lightest_broker(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster()
    await cluster.report(A, bundles={"public/a/0x00000000_0xffffffff": 900})
    await cluster.report(B, bundles={"public/b/0x00000000_0xffffffff": 100})
    await cluster.report(C, bundles={"public/c/0x00000000_0xffffffff": 500})
    await cluster.refresh()
    assert await cluster.select(bundle()) == (B, "strategy")
    placement = cluster.selector.last
    assert placement is not None
    assert (placement.strategy, placement.candidates, placement.score) == (
        "LeastLongTermMessageRate",
        3,
        200.0,  # B's long-term rate in + out before this bundle
    )
    [row] = cluster.trace.rows
    assert (row.event, row.bundle, row.dest_broker, row.reason, row.candidates) == (
        "placement",
        "public/new/0x00000000_0xffffffff",
        B,
        "strategy",
        3,
    )
    assert (row.broker, row.strategy, row.broker_load) == (A, "LeastLongTermMessageRate", 200.0)


async def test_an_overloaded_broker_is_avoided_even_when_lightest(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster()
    await cluster.report(A, cpu=95, bundles={})
    await cluster.report(B, bundles={"public/b/0x00000000_0xffffffff": 400})
    await cluster.report(C, bundles={"public/c/0x00000000_0xffffffff": 300})
    await cluster.refresh()
    assert await cluster.select(bundle()) == (C, "strategy")


async def test_a_burst_spreads_through_preallocation_until_the_broker_reports_it(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster()
    for broker in (A, B, C):
        await cluster.report(broker)
    await cluster.refresh()
    # Each choice preallocates the bundle (default 50 msg/s each way) to its broker: the next
    # bundle of the burst sees it in the score, so three bundles land on three brokers.
    chosen = [(await cluster.select(bundle(f"public/burst-{i}")))[0] for i in range(3)]
    assert sorted(b for b in chosen if b is not None) == [A, B, C]
    # Asked again before its broker took it: the same broker, from the preallocation.
    assert await cluster.select(bundle("public/burst-0")) == (chosen[0], "preallocated")
    assert cluster.term is not None
    manager = cluster.term.manager
    assert set(manager.preallocated_bundle_to_broker.values()) == {A, B, C}
    # The broker reports the bundle: the preallocation is cleared (Pulsar's updateBundleData).
    assert chosen[0] is not None
    await cluster.report(chosen[0], bundles={"public/burst-0/0x00000000_0xffffffff": 1})
    await cluster.refresh()
    assert "public/burst-0/0x00000000_0xffffffff" not in manager.preallocated_bundle_to_broker
    # A broker that leaves takes its preallocations with it.
    gone = chosen[1]
    assert gone is not None
    await cluster.store.delete(f"/loadbalance/brokers/{gone}")
    await cluster.refresh()
    assert gone not in manager.preallocated_bundle_to_broker.values()


async def test_a_destination_broker_is_honoured_once(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster()
    await cluster.report(A, bundles={"public/a/0x00000000_0xffffffff": 900})
    await cluster.report(B)
    await cluster.refresh()
    cluster.selector.set_affinity(FULL.name, A)
    assert await cluster.select(bundle("public/x")) == (A, "affinity")
    # Preallocated, as any choice: the bundle's other clients (a topic's producer and consumer
    # look up at once after an unload) are sent to A too until A reports it.
    assert await cluster.select(bundle("public/x")) == (A, "preallocated")
    # Consumed: the next bundle of that range goes by load.
    assert await cluster.select(bundle("public/y")) == (B, "strategy")
    # A destination that is no longer registered is skipped.
    cluster.selector.set_affinity(FULL.name, "127.0.0.9:8080")
    assert await cluster.select(bundle("public/z")) == (B, "strategy")


async def test_an_isolation_policy_pins_a_namespace(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster()
    await cluster.report(A)
    await cluster.report(B, bundles={"public/b/0x00000000_0xffffffff": 5000})
    await cluster.report(C)
    await cluster.refresh()
    policy = NamespaceIsolationData(
        namespaces=["public/pinned.*"],
        primary=["127\\.0\\.0\\.2"],
        secondary=[],
        auto_failover_policy=AutoFailoverPolicyData(
            "min_available", {"min_limit": "1", "usage_threshold": "100"}
        ),
    )
    await set_isolation_policy(cluster.store, "standalone", "pin", policy)
    # The busiest broker, but the namespace's only primary.
    assert await cluster.select(bundle("public/pinned-1")) == (B, "strategy")
    # A primary broker takes no namespace without a policy.
    for i in range(4):
        other, _ = await cluster.select(bundle(f"public/free-{i}"))
        assert other in (A, C)
    # Primary gone, fewer than min_limit: the policy has no secondary, so no broker at all.
    await cluster.store.delete(f"/loadbalance/brokers/{B}")
    await cluster.refresh()
    assert await cluster.select(bundle("public/pinned-2")) == (None, "strategy")


async def test_anti_affinity_namespaces_go_to_different_brokers(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster()
    # A is so much lighter that the strategy alone would send all three namespaces there.
    await cluster.report(A)
    await cluster.report(B, bundles={"public/b/0x00000000_0xffffffff": 1000})
    await cluster.report(C, bundles={"public/c/0x00000000_0xffffffff": 1000})
    await cluster.refresh()
    assert await cluster.select(bundle("public/free-1")) == (A, "strategy")
    assert await cluster.select(bundle("public/free-2")) == (A, "strategy")
    layout = bundles_data((0, 0xFFFFFFFF))
    placed = []
    for name in ("public/g1", "public/g2", "public/g3"):
        await set_anti_affinity_group(
            cluster.store, NamespaceName.parse(name), "group", bundles=layout
        )
        chosen, _ = await cluster.select(bundle(name))
        placed.append(chosen)
    assert sorted(b for b in placed if b is not None) == [A, B, C]


async def test_a_new_leader_reads_the_reports_before_its_first_choice(
    make_cluster: MakeCluster,
) -> None:
    cluster = await make_cluster()
    await cluster.report(A, bundles={"public/a/0x00000000_0xffffffff": 900})
    await cluster.report(B)
    # The term was just elected: it has not run updateAll yet.
    assert await cluster.select(bundle()) == (B, "strategy")
    assert cluster.term is not None
    assert cluster.term.updates == 1


async def test_a_broker_not_leading_decides_from_the_reports(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster()
    cluster.term = None
    await cluster.report(A, bundles={"public/a/0x00000000_0xffffffff": 900})
    await cluster.report(B)
    assert await cluster.select(bundle()) == (B, "strategy")
    # Nothing is remembered: asked again, it chooses again (no preallocation).
    assert await cluster.select(bundle()) == (B, "strategy")


async def test_round_robin_for_shedding_excluded_namespaces(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster(loadBalancerSheddingExcludedNamespaces="public/rr")
    for broker in (A, B, C):
        await cluster.report(broker)
    await cluster.refresh()
    ranges = [BundleRange(0, 0x40000000), BundleRange(0x40000000, 0x80000000)]
    ranges += [BundleRange(0x80000000, 0xC0000000)]
    chosen = [(await cluster.select(bundle("public/rr", r)))[0] for r in ranges]
    assert sorted(b for b in chosen if b is not None) == [A, B, C]
    assert cluster.selector.last is not None
    assert cluster.selector.last.strategy == "RoundRobinBrokerSelector"


async def test_the_extensible_manager_places_by_weighted_max_ema(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster(loadManagerClassName=EXTENSIBLE_LOAD_MANAGER)
    await cluster.report(A, cpu=80)
    await cluster.report(B, cpu=20)
    await cluster.report(C, cpu=75)
    await cluster.refresh()
    # Mean 0.583; only B is at least 10 points below it.
    for i in range(5):
        assert await cluster.select(bundle(f"public/e{i}")) == (B, "strategy")
    placement = cluster.selector.last
    assert placement is not None
    assert (placement.strategy, placement.candidates) == ("LeastResourceUsageWithWeight", 3)
    assert placement.score == pytest.approx(0.2)
    assert cluster.trace.rows[-1].load_manager == "extensible"


async def group(cluster: Cluster, namespace: str, name: str | None = "group") -> None:
    layout = bundles_data((0, 0xFFFFFFFF))
    await set_anti_affinity_group(
        cluster.store, NamespaceName.parse(namespace), name, bundles=layout
    )


async def test_placements_read_no_policy_from_the_store(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster()
    for broker in (A, B, C):
        await cluster.report(broker)
    await cluster.refresh()
    names = [f"public/aa-{i}" for i in range(12)]
    for name in names:
        await group(cluster, name)
    await cluster.select(bundle("public/warm"))
    reads = cluster.store.policy_reads
    placed = [(await cluster.select(bundle(name)))[0] for name in names]
    # Twelve choices among a dozen grouped namespaces: not one policy read (Pulsar's cache).
    assert cluster.store.policy_reads == reads
    assert set(placed) == {A, B, C}  # and the group spread as before


async def test_a_policy_written_after_start_is_seen(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster()
    await cluster.report(A)
    await cluster.report(B, bundles={"public/b/0x00000000_0xffffffff": 1000})
    await cluster.refresh()
    await group(cluster, "public/g1")
    assert await cluster.select(bundle("public/g1")) == (A, "strategy")
    # Without a group, the lighter broker again; the group written now keeps it off A.
    assert await cluster.select(bundle("public/g2")) == (A, "strategy")
    await group(cluster, "public/g3")
    assert await cluster.select(bundle("public/g3")) == (B, "strategy")
    # Removed: no longer counted.
    await group(cluster, "public/g1", None)
    await group(cluster, "public/g3", None)
    await group(cluster, "public/g4")
    assert await cluster.select(bundle("public/g4")) == (A, "strategy")


@pytest.mark.parametrize(("enabled", "expected"), [(True, C), (False, B)])
async def test_failure_domains_spread_an_anti_affinity_group(
    make_cluster: MakeCluster, enabled: bool, expected: str
) -> None:
    cluster = await make_cluster(failureDomainsEnabled=enabled)
    await cluster.report(A)
    await cluster.report(B, bundles={"public/b/0x00000000_0xffffffff": 100})
    await cluster.report(C, bundles={"public/c/0x00000000_0xffffffff": 1000})
    await cluster.refresh()
    # Written after the cache started: its watch brings them in.
    await set_failure_domain(cluster.store, "standalone", "d1", FailureDomain([A, B]))
    await set_failure_domain(cluster.store, "standalone", "d2", FailureDomain([C]))
    await group(cluster, "public/g1")
    await group(cluster, "public/g2")
    assert await cluster.select(bundle("public/g1")) == (A, "strategy")
    # Domain d1 has one namespace of the group, d2 none: with failureDomainsEnabled the group
    # goes to d2's broker although it is the busiest; without, to the lighter broker of d1.
    assert await cluster.select(bundle("public/g2")) == (expected, "strategy")
    assert cluster.policies.policies().failure_domains == {A: "d1", B: "d1", C: "d2"}
