"""Several brokers' reporters, elections and leader tasks over one in-memory metadata tree.

Each broker has its own metadata session, a model usage source (its usage follows its traffic)
and topics whose counters grow at fixed rates on a FakeClock. The fake unloader moves a bundle's
topics to the destination the leader named, so load really moves.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest

from emubroker.admin.metrics_loadbalance import render_leader_unload_metrics
from emubroker.config import BrokerConfig, load_config
from emubroker.loadbalance.leader.election import LeaderElectionService, LeaderElectionState
from emubroker.loadbalance.leader.tasks import LoadBalancerLeader, LoadBalancerLeaderStatistics
from emubroker.loadbalance.model.codec import encode
from emubroker.loadbalance.model.data import LocalBrokerData
from emubroker.loadbalance.ownership.owner_calls import parse_bundle
from emubroker.loadbalance.reporting.bundle_sampler import TopicTraffic
from emubroker.loadbalance.reporting.reporter import LoadReporter
from emubroker.loadbalance.reporting.usage_sources import ModelUsageSource, ResourceLimits
from emubroker.loadbalance.trace.records import LoadBalancerTraceRecord
from emubroker.metadata import MemoryMetadataStore, MemoryMetadataTree
from emubroker.naming import BundleRange, name_hash
from protocol.clock import FakeClock

pytestmark = pytest.mark.anyio

A, B, C = "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"
LIMITS = ResourceLimits(processors=1, memory_mb=1024, nic_kbps=1_000_000)
MSG_RATE_PER_CORE = 3000.0  # a broker at 3,000 msg/s reads 100 % CPU
SIZE = 10_000  # bytes per message
SKEWED = [  # (bundle, msg/s): four bundles of one namespace, all on broker A
    ("public/skewed/0x00000000_0x40000000", 1000),
    ("public/skewed/0x40000000_0x80000000", 800),
    ("public/skewed/0x80000000_0xc0000000", 600),
    ("public/skewed/0xc0000000_0xffffffff", 400),
]
THRESHOLD_SHEDDER = "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"
EXTENSIBLE = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
TRANSFER_SHEDDER = "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"


def conf(**overrides: Any) -> BrokerConfig:
    base: dict[str, Any] = {
        "loadBalancerReportUpdateMinIntervalMillis": 5000,
        "loadBalancerHostUsageCheckIntervalMinutes": 1 / 60,
        "statsUpdateFrequencyInSecs": 1,
        "loadBalancerSheddingIntervalMinutes": 0.5,
    }
    return load_config(overrides=base | overrides)


class Topics:
    """A broker's loaded topics; counters grow at each topic's rate since it was loaded."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self.loaded: dict[str, tuple[str, float, float]] = {}  # name -> bundle, rate, since

    def load(self, name: str, bundle: str, rate: float) -> None:
        self.loaded[name] = (bundle, rate, self._clock.now())

    def take_bundle(self, bundle: str) -> list[tuple[str, float]]:
        taken = [(n, rate) for n, (b, rate, _) in self.loaded.items() if b == bundle]
        for name, _ in taken:
            del self.loaded[name]
        return taken

    def bundles(self) -> set[str]:
        return {bundle for bundle, _, _ in self.loaded.values()}

    def __call__(self) -> list[TopicTraffic]:
        now = self._clock.now()
        traffic = []
        for name, (bundle, rate, since) in self.loaded.items():
            messages = int(rate * (now - since))
            traffic.append(TopicTraffic(name, bundle, messages, messages * SIZE, 0, 0, 1, 0))
        return traffic


class Broker:
    def __init__(self, cluster: Cluster, broker_id: str, config: BrokerConfig) -> None:
        self.id = broker_id
        self.config = config
        self.store: MemoryMetadataStore = cluster.tree.open_session()
        self.topics = Topics(cluster.clock)
        self.election = LeaderElectionService(
            self.store, cluster.clock, broker_id=broker_id, service_url=f"http://{broker_id}"
        )
        self.reporter = LoadReporter(
            self.store,
            cluster.clock,
            broker_id=broker_id,
            initial=LocalBrokerData(
                web_service_url=f"http://{broker_id}",
                pulsar_service_url=f"pulsar://{broker_id.split(':')[0]}:6650",
            ),
            config=lambda: self.config,
            usage=ModelUsageSource(LIMITS, msg_rate_per_core=MSG_RATE_PER_CORE),
            topics=self.topics,
            traffic=lambda: (0, 0, 0),
        )
        self.trace: list[LoadBalancerTraceRecord] = []
        self.leader = LoadBalancerLeader(
            self.store,
            cluster.clock,
            broker_id=broker_id,
            config=lambda: self.config,
            leadership=self.election,
            unload=cluster.unload,
            split=cluster.split,
            layout=cluster,
            owned_bundles=self.topics.bundles,
            trace=self.trace,
            seed=7,
        )
        self.scope = anyio.CancelScope()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with self.scope:
            async with anyio.create_task_group() as tg:
                await tg.start(self.election.run)
                await tg.start(self.reporter.run)
                await tg.start(self.leader.run)
                task_status.started()


class Cluster:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.tree = MemoryMetadataTree()
        self.brokers: dict[str, Broker] = {}
        self.unloads: list[tuple[float, str, str, str | None]] = []  # when, bundle, from, to
        self.fail_unloads = False
        self.move_unloaded = True
        self.splits: list[tuple[str, str, bool]] = []  # bundle, owner, unload

    async def unload(self, bundle: str, destination_broker: str | None = None) -> None:
        if self.fail_unloads:
            raise RuntimeError("the owner did not answer")
        owner = next(b for b in self.brokers.values() if bundle in b.topics.bundles())
        self.unloads.append((self.clock.now(), bundle, owner.id, destination_broker))
        if not self.move_unloaded:
            return  # the owner took the bundle back at once
        target = self.brokers[destination_broker] if destination_broker else owner
        for name, rate in owner.topics.take_bundle(bundle):
            target.topics.load(name, bundle, rate)

    async def split(self, bundle: str, unload: bool) -> list[str]:
        """Halve the bundle at its owner; its topics move to the half their name hashes into."""
        owner = next(b for b in self.brokers.values() if bundle in b.topics.bundles())
        parent = parse_bundle(bundle)
        lower, upper = parent.bundle_range.lower, parent.bundle_range.upper
        middle = lower + (upper - lower) // 2
        halves = [BundleRange(lower, middle), BundleRange(middle, upper)]
        children = [f"{parent.namespace}/{half.name}" for half in halves]
        self.splits.append((bundle, owner.id, unload))
        for name, rate in owner.topics.take_bundle(bundle):
            child = children[0] if halves[0].contains(name_hash(name)) else children[1]
            owner.topics.load(name, child, rate)
        return children

    def _bundles(self) -> set[str]:
        return {b for broker in self.brokers.values() for b in broker.topics.bundles()}

    def bundle_count(self, namespace: str) -> int:
        return sum(1 for b in self._bundles() if b.rpartition("/")[0] == namespace)

    def has_bundle(self, bundle: str) -> bool:
        return bundle in self._bundles()

    async def start(self, tg: anyio.abc.TaskGroup, broker_id: str, config: BrokerConfig) -> Broker:
        broker = self.brokers[broker_id] = Broker(self, broker_id, config)
        await tg.start(broker.run)
        return broker


@asynccontextmanager
async def cluster_of(
    clock: FakeClock, config: BrokerConfig, ids: tuple[str, ...] = (A, B, C)
) -> AsyncIterator[Cluster]:
    cluster = Cluster(clock)
    async with AsyncExitStack() as stack:
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        for broker_id in ids:
            await cluster.start(tg, broker_id, config)
        yield cluster


def skew(cluster: Cluster) -> None:
    """Broker A serves the four skewed bundles; B and C one light bundle each."""
    for i, (bundle, rate) in enumerate(SKEWED):
        cluster.brokers[A].topics.load(f"persistent://public/skewed/t{i}", bundle, rate)
    cluster.brokers[B].topics.load("persistent://public/b/t", "public/b/0x00000000_0xffffffff", 100)
    cluster.brokers[C].topics.load("persistent://public/c/t", "public/c/0x00000000_0xffffffff", 100)


async def test_threshold_shedder_moves_the_largest_bundles_off_the_skewed_broker(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with cluster_of(fake_clock, conf()) as cluster:
        leader = cluster.brokers[A]
        assert leader.election.is_leader()
        skew(cluster)
        with caplog.at_level(logging.INFO, logger="emubroker.loadbalance"):
            await fake_clock.advance(29.0)
            assert cluster.unloads == []
            await fake_clock.advance(1.0)  # the first shedding cycle, 30 s after the election
        # A: 2,800 msg/s = 93.3 % CPU; B, C: 3.3 %. Cluster average 33.3 %, threshold 10 %:
        # A sheds (0.933 - 0.333 - 0.1 + 0.05) * 28 MB/s = 15.4 MB/s, its largest bundles
        # first until that is reached: 10 MB/s, then 8 MB/s.
        assert [(bundle, source) for _, bundle, source, _ in cluster.unloads] == [
            (SKEWED[0][0], A),
            (SKEWED[1][0], A),
        ]
        assert all(dest in (B, C) for _, _, _, dest in cluster.unloads)
        stats = leader.leader.statistics()
        assert (stats.unload_broker_count, stats.unload_bundle_count) == (1, 2)
        assert stats.shedding_cycles == 1
        rows = [r for r in leader.trace if r.event == "shed"]
        assert [r.bundle for r in rows] == [SKEWED[0][0], SKEWED[1][0]]
        first = rows[0]
        assert (first.strategy, first.reason, first.cycle, first.source_broker) == (
            "ThresholdShedder",
            "Overloaded",
            1,
            A,
        )
        assert first.broker_load == pytest.approx(2800 / 3000, rel=1e-6)
        assert first.cluster_load == pytest.approx(3000 / 3 / 3000, rel=1e-6)
        assert first.threshold == pytest.approx(1 / 3 + 0.1, rel=1e-6)
        assert first.to_offload == pytest.approx(28e6 * 0.55, rel=1e-4)
        assert first.bundle_throughput == pytest.approx(10e6)
        assert first.dest_broker in (B, C)
        assert (
            f"[ThresholdShedder] cycle 1: unloading {SKEWED[0][0]} from {A} to {first.dest_broker}"
            f": Overloaded"
        ) in caplog.text
        labels = f'{{cluster="{leader.config.clusterName}", metric="bundleUnloading"}}'
        assert render_leader_unload_metrics(leader.leader, leader.config) == (
            "# TYPE pulsar_lb_unload_broker_total gauge\n"
            f"pulsar_lb_unload_broker_total{labels} 1\n"
            "# TYPE pulsar_lb_unload_bundle_total gauge\n"
            f"pulsar_lb_unload_bundle_total{labels} 2\n"
            # The leader checked for bundles to split at each report change; none qualified.
            "# TYPE pulsar_lb_bundles_split_total gauge\n"
            f'pulsar_lb_bundles_split_total{{cluster="{leader.config.clusterName}", '
            'metric="bundlesSplit"} 0\n'
        )
        # The moved bundles are recently unloaded: never proposed again within the grace period.
        await fake_clock.advance(5 * 60.0)
        moved = [bundle for _, bundle, _, _ in cluster.unloads]
        assert len(moved) == len(set(moved))


async def test_followers_run_no_leader_tasks(fake_clock: FakeClock) -> None:
    async with cluster_of(fake_clock, conf()) as cluster:
        skew(cluster)
        await fake_clock.advance(120.0)
        assert cluster.brokers[A].leader.statistics().leading
        for follower in (B, C):
            stats = cluster.brokers[follower].leader.statistics()
            assert (stats.leading, stats.terms, stats.shedding_cycles) == (False, 0, 0)


async def test_shedding_disabled_unloads_nothing(fake_clock: FakeClock) -> None:
    async with cluster_of(fake_clock, conf(loadBalancerSheddingEnabled=False)) as cluster:
        skew(cluster)
        await fake_clock.advance(120.0)
        assert cluster.unloads == []
        assert cluster.brokers[A].leader.statistics().shedding_cycles == 4


async def test_a_fractional_interval_sheds_every_three_seconds(fake_clock: FakeClock) -> None:
    config = conf(loadBalancerSheddingIntervalMinutes=0.05, loadBalancerSheddingEnabled=False)
    async with cluster_of(fake_clock, config) as cluster:
        await fake_clock.advance(30.0)
        assert cluster.brokers[A].leader.statistics().shedding_cycles == 10


async def test_a_failed_unload_is_logged_and_the_bundle_stays_a_candidate(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with cluster_of(fake_clock, conf()) as cluster:
        skew(cluster)
        cluster.fail_unloads = True
        with caplog.at_level(logging.WARNING):
            await fake_clock.advance(30.0)
        assert "failed: the owner did not answer" in caplog.text
        leader = cluster.brokers[A].leader
        assert leader.statistics().unload_bundle_count == 0
        term = leader.term
        assert term is not None
        assert term.manager.load_data.recently_unloaded_bundles == {}
        cluster.fail_unloads = False
        await fake_clock.advance(30.0)  # the next cycle proposes them again
        assert [bundle for _, bundle, _, _ in cluster.unloads][:1] == [SKEWED[0][0]]


async def test_the_leader_writes_bundle_data_at_the_quota_update_interval(
    fake_clock: FakeClock,
) -> None:
    config = conf(loadBalancerSheddingEnabled=False)
    async with cluster_of(fake_clock, config) as cluster:
        skew(cluster)
        observer = cluster.tree.open_session()
        path = f"/loadbalance/bundle-data/{SKEWED[0][0]}"
        await fake_clock.advance(15 * 60 - 1.0)
        assert await observer.get(path) is None
        await fake_clock.advance(1.0)
        node = await observer.get(path)
        assert node is not None
        data = json.loads(node.value)
        term = cluster.brokers[A].leader.term
        assert term is not None
        stored = term.manager.load_data.bundle_data[SKEWED[0][0]]
        assert node.value == encode(stored)
        # A sample per report event (reports of steady traffic are rare), one more per write.
        assert data["shortTermData"]["numSamples"] >= 2
        assert data["shortTermData"]["msgRateIn"] == pytest.approx(1000.0)
        assert data["topics"] == 1
        average = await observer.get(f"/loadbalance/broker-time-average/{A}")
        assert average is not None
        assert json.loads(average.value)["shortTermMsgRateIn"] == pytest.approx(2800.0)
        assert cluster.brokers[A].leader.statistics().bundle_data_writes == 1


async def test_a_new_leader_takes_over_and_the_old_one_stops(fake_clock: FakeClock) -> None:
    config = conf(loadBalancerResourceQuotaUpdateIntervalMinutes=1.0)
    async with cluster_of(fake_clock, config) as cluster:
        skew(cluster)
        await fake_clock.advance(60.0)  # A leads and stores the bundle data
        old = cluster.brokers[A]
        old.scope.cancel()  # A stops: its leadership and its registration go
        await fake_clock.advance(1.0)
        leaders = [b for b in cluster.brokers.values() if b.election.is_leader()]
        assert len(leaders) == 1
        successor = leaders[0]
        assert successor.id in (B, C)
        term = successor.leader.term
        assert term is not None
        cycles_before = successor.leader.statistics().shedding_cycles
        # The new leader started from the stored averages of the skewed bundles (A's last
        # report before it stopped is gone, so they are in the store only).
        await fake_clock.advance(30.0)
        assert successor.leader.statistics().shedding_cycles == cycles_before + 1
        assert sorted(term.manager.load_data.broker_data) == [B, C]
        assert old.leader.statistics().leading is False


class FakeLeadership:
    """A leader election the test flips."""

    def __init__(self) -> None:
        self.leading = False
        self.listeners: list[Any] = []

    def is_leader(self) -> bool:
        return self.leading

    def subscribe(self, listener: Any) -> Any:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def set(self, state: LeaderElectionState) -> None:
        self.leading = state is LeaderElectionState.LEADING
        for listener in self.listeners:
            listener(state)


async def test_losing_leadership_stops_the_loops_and_winning_again_restarts_them(
    fake_clock: FakeClock,
) -> None:
    tree = MemoryMetadataTree()
    store = tree.open_session()
    leadership = FakeLeadership()
    config = conf(loadBalancerSheddingEnabled=False)

    async def never(bundle: str, destination_broker: str | None = None) -> None:
        raise AssertionError("nothing to unload")

    leader = LoadBalancerLeader(
        store, fake_clock, broker_id=A, config=lambda: config, leadership=leadership, unload=never
    )
    async with anyio.create_task_group() as tg:
        await tg.start(leader.run)
        await fake_clock.advance(60.0)
        assert leader.statistics() == LoadBalancerLeaderStatistics(False, 0, 0, 0, 0, 0, 0)
        leadership.set(LeaderElectionState.LEADING)
        await anyio.wait_all_tasks_blocked()
        await fake_clock.advance(60.0)
        assert leader.statistics().shedding_cycles == 2
        assert leader.statistics().leading
        leadership.set(LeaderElectionState.FOLLOWING)
        await anyio.wait_all_tasks_blocked()
        assert not leader.statistics().leading
        assert leader.term is None
        await fake_clock.advance(120.0)
        assert leader.statistics().shedding_cycles == 2
        leadership.set(LeaderElectionState.LEADING)
        await anyio.wait_all_tasks_blocked()
        await fake_clock.advance(30.0)
        assert leader.statistics().shedding_cycles == 3
        assert leader.statistics().terms == 2
        tg.cancel_scope.cancel()


async def test_transfer_shedder_transfers_to_the_least_loaded_broker(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = conf(
        loadManagerClassName=EXTENSIBLE, loadBalancerLoadSheddingStrategy=TRANSFER_SHEDDER
    )
    async with cluster_of(fake_clock, config) as cluster:
        skew(cluster)
        with caplog.at_level(logging.INFO):
            # The condition must hold more than loadBalancerSheddingConditionHitCountThreshold
            # (3) cycles in a row: the fourth cycle, at 120 s, transfers.
            await fake_clock.advance(119.0)
            assert cluster.unloads == []
            await fake_clock.advance(1.0)
        assert cluster.unloads
        assert {source for _, _, source, _ in cluster.unloads} == {A}
        assert all(dest in (B, C) for _, _, _, dest in cluster.unloads)
        leader = cluster.brokers[A]
        rows = [r for r in leader.trace if r.event == "shed"]
        skips = [r for r in rows if r.label == "Skip"]
        assert [r.reason for r in skips] == ["HitCount"] * 3
        moves = [r for r in rows if r.label == "Success"]
        assert [r.bundle for r in moves] == [bundle for _, bundle, _, _ in cluster.unloads]
        assert all(r.load_manager == "extensible" and r.reason == "Overloaded" for r in moves)
        counter = leader.leader.runner.extensible
        assert counter.unload_bundle_count == len(cluster.unloads)
        assert counter.unload_broker_count == 1
        text = render_leader_unload_metrics(leader.leader, leader.config)
        labels = (
            f'cluster="{leader.config.clusterName}", broker="{leader.config.advertised_host()}"'
        )
        assert (
            f'pulsar_lb_unload_bundle_total{{{labels}, metric="bundleUnloading"}} {len(moves)}'
            in text
        )
        assert (
            f'pulsar_lb_unload_broker_breakdown_total{{{labels}, metric="bundleUnloading", '
            f'reason="HitCount", result="Skip"}} 3'
        ) in text


async def unload_not_available(bundle: str, destination_broker: str | None = None) -> None:
    """An unloader that always fails: the bundle stays with its owner."""
    raise RuntimeError(f"unload not available: {bundle} stays with its owner")


async def test_without_an_unload_mechanism_decisions_are_logged_and_retried(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with cluster_of(fake_clock, conf()) as cluster:
        skew(cluster)
        leader = cluster.brokers[A]
        leader.leader.runner._unload = unload_not_available
        with caplog.at_level(logging.INFO):
            await fake_clock.advance(60.0)
        assert "unload not available: public/skewed/0x00000000_0x40000000 stays" in caplog.text
        rows = [r.bundle for r in leader.trace if r.event == "shed"]
        assert rows.count(SKEWED[0][0]) == 2  # decided again at the second cycle
        assert leader.leader.statistics().unload_bundle_count == 0


async def test_excluded_namespaces_are_never_shed(fake_clock: FakeClock) -> None:
    config = conf(loadBalancerSheddingExcludedNamespaces=["public/skewed"])
    async with cluster_of(fake_clock, config) as cluster:
        skew(cluster)
        await fake_clock.advance(120.0)
        assert cluster.unloads == []
        assert cluster.brokers[A].leader.statistics().shedding_cycles == 4


async def test_nodes_that_do_not_parse_never_stop_the_leader(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = Cluster(fake_clock)
    vandal = cluster.tree.open_session()
    await vandal.put("/loadbalance/brokers/vandal:1", b"not a report")
    await vandal.put(f"/loadbalance/bundle-data/{SKEWED[0][0]}", b'{"topics": "many"}')
    async with anyio.create_task_group() as tg:
        for broker_id in (A, B, C):
            await cluster.start(tg, broker_id, conf())
        skew(cluster)
        with caplog.at_level(logging.WARNING):
            await fake_clock.advance(30.0)
        assert "ignoring the load report of vandal:1" in caplog.text
        assert f"ignoring the stored bundle data /loadbalance/bundle-data/{SKEWED[0][0]}" in (
            caplog.text
        )
        # The skewed broker is shed as if the bad nodes were not there.
        assert [bundle for _, bundle, _, _ in cluster.unloads] == [SKEWED[0][0], SKEWED[1][0]]
        tg.cancel_scope.cancel()


async def test_a_bundle_is_shed_again_only_after_the_grace_period(fake_clock: FakeClock) -> None:
    config = conf(loadBalancerSheddingGracePeriodMinutes=1.0)
    async with cluster_of(fake_clock, config) as cluster:
        skew(cluster)
        cluster.move_unloaded = False  # the load stays where it was
        await fake_clock.advance(150.0)  # cycles at 30, 60, 90, 120 and 150 s
        times = [when for when, bundle, _, _ in cluster.unloads if bundle == SKEWED[0][0]]
        # Unloaded at 30 s; at 60 and 90 s it is within the minute's grace (Pulsar drops an
        # entry strictly older than the period), at 120 s it is a candidate again.
        assert times == [30.0, 120.0]
