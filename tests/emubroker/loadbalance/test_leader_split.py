"""The leader's automatic bundle split (``checkNamespaceBundleSplit`` after each ``updateAll``).

The brokers of ``test_leader``'s harness report their topics; the fake split halves a bundle at
its owner and moves each topic into the half its name hashes into, so the next reports carry the
children.
"""

from __future__ import annotations

import logging

import pytest

from emubroker.admin.metrics_loadbalance import render_leader_unload_metrics
from protocol.clock import FakeClock
from tests.emubroker.loadbalance.test_leader import A, B, C, Cluster, cluster_of, conf

pytestmark = pytest.mark.anyio

HOT = "public/hot/0x00000000_0xffffffff"
COLD = "public/cold/0x00000000_0xffffffff"


def load(cluster: Cluster, topics: int, rate: float) -> None:
    """Broker B serves ``topics`` topics of the hot bundle; C one topic of a cold bundle."""
    for i in range(topics):
        cluster.brokers[B].topics.load(f"persistent://public/hot/t{i}", HOT, rate)
    cluster.brokers[C].topics.load("persistent://public/cold/t", COLD, 10)


async def test_a_bundle_over_the_topic_limit_is_split_at_its_owner(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = conf(loadBalancerNamespaceBundleMaxTopics=4, loadBalancerSheddingEnabled=False)
    async with cluster_of(fake_clock, config) as cluster:
        load(cluster, topics=6, rate=10)
        with caplog.at_level(logging.INFO, logger="emubroker.loadbalance"):
            await fake_clock.advance(10.0)
        leader = cluster.brokers[A]
        # The owner is B (not the leader); the unload flag is loadBalancerAutoUnload...'s.
        assert cluster.splits[0] == (HOT, B, True)
        rows = [r for r in leader.trace if r.event == "split"]
        assert rows[0].bundle == HOT
        assert (rows[0].source_broker, rows[0].reason, rows[0].bundle_topics) == (B, "topics", 6)
        assert rows[0].threshold == 4
        assert rows[0].strategy == "range_equally_divide"
        assert rows[0].split_unload
        assert rows[0].split_children == (
            "public/hot/0x00000000_0x7fffffff,public/hot/0x7fffffff_0xffffffff"
        )
        assert f"Load-manager splitting bundle {HOT} of {B} and unloading True: topics" in (
            caplog.text
        )
        assert f"Successfully split namespace bundle {HOT} into" in caplog.text
        # The cold bundle has one topic: never split. Once split, the parent is not chosen again
        # (its stale report is skipped); a child holding more than four topics would be.
        assert all(bundle != COLD for bundle, _, _ in cluster.splits)
        assert [bundle for bundle, _, _ in cluster.splits].count(HOT) == 1
        stats = leader.leader.statistics()
        assert stats.bundles_split == len(cluster.splits)
        assert stats.split_checks > 0
        assert (
            f'pulsar_lb_bundles_split_total{{cluster="{leader.config.clusterName}", '
            f'metric="bundlesSplit"}} {len(cluster.splits)}'
        ) in render_leader_unload_metrics(leader.leader, leader.config)


async def test_the_long_term_message_rate_limit_splits_a_busy_bundle(
    fake_clock: FakeClock,
) -> None:
    config = conf(
        loadBalancerNamespaceBundleMaxMsgRate=500,
        loadBalancerAutoUnloadSplitBundlesEnabled=False,
        loadBalancerSheddingEnabled=False,
    )
    async with cluster_of(fake_clock, config) as cluster:
        load(cluster, topics=2, rate=400)  # 800 msg/s in the hot bundle
        await fake_clock.advance(120.0)
        assert cluster.splits[0] == (HOT, B, False)
        row = next(r for r in cluster.brokers[A].trace if r.event == "split")
        assert row.reason == "msg_rate"
        assert row.bundle_msg_rate > 500
        assert not row.split_unload


async def test_no_split_when_disabled_or_at_the_namespace_maximum(fake_clock: FakeClock) -> None:
    disabled = conf(
        loadBalancerAutoBundleSplitEnabled=False,
        loadBalancerNamespaceBundleMaxTopics=4,
        loadBalancerSheddingEnabled=False,
    )
    async with cluster_of(fake_clock, disabled) as cluster:
        load(cluster, topics=6, rate=10)
        await fake_clock.advance(60.0)
        assert cluster.splits == []
        assert cluster.brokers[A].leader.statistics().split_checks == 0
    at_maximum = conf(
        loadBalancerNamespaceMaximumBundles=1,
        loadBalancerNamespaceBundleMaxTopics=4,
        loadBalancerSheddingEnabled=False,
    )
    async with cluster_of(fake_clock, at_maximum) as cluster:
        load(cluster, topics=6, rate=10)
        await fake_clock.advance(60.0)
        assert cluster.splits == []
        assert cluster.brokers[A].leader.statistics().split_checks > 0


async def test_a_failed_split_is_logged_and_the_leader_carries_on(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    config = conf(loadBalancerNamespaceBundleMaxTopics=4, loadBalancerSheddingEnabled=False)
    async with cluster_of(fake_clock, config) as cluster:
        leader = cluster.brokers[A]
        failures: list[str] = []

        async def refused(bundle: str, unload: bool) -> list[str]:
            failures.append(bundle)
            raise ConnectionRefusedError("the owner is gone")

        assert leader.leader.splits is not None
        leader.leader.splits._split = refused
        load(cluster, topics=6, rate=10)
        with caplog.at_level(logging.ERROR, logger="emubroker.loadbalance"):
            await fake_clock.advance(30.0)
        assert failures
        assert failures[0] == HOT
        assert f"Failed to split namespace bundle {HOT}: the owner is gone" in caplog.text
        assert leader.leader.splits.failed_splits == len(failures)
        assert leader.leader.statistics().bundles_split == 0
        assert leader.leader.statistics().leading
