"""The leader's unloads and splits carried out by the bundle's owner, in one process.

Three brokers share a metadata tree and an in-process stub on a FakeClock; broker 0 leads. The
leader's unloader and splitter are the broker's own (``OwnerCalls``): a bundle owned by another
broker is unloaded or split there (``InProcessOwnerAdmin`` stands for its admin endpoints), a
destination broker becomes the leader's placement affinity, and clients follow their topics.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from emubroker.loadbalance.leader.tasks import LoadBalancerLeader
from emubroker.naming import BundleRange, NamespaceBundle, TopicName, name_hash
from protocol import commands as c
from protocol.clock import FakeClock
from tests.support.broker import WireClient
from tests.support.inprocess_cluster import InProcessCluster, Node, inprocess_cluster

pytestmark = pytest.mark.anyio


def topics_in_one_bundle(node: Node, count: int) -> list[str]:
    """``count`` topics of public/default that hash into the same bundle."""
    first = "persistent://public/default/calls-0"
    bundle = node.broker.ownership.bundle_of(TopicName.parse(first))
    found = [first]
    n = 1
    while len(found) < count:
        name = f"persistent://public/default/calls-{n}"
        if bundle.bundle_range.contains(name_hash(name)):
            found.append(name)
        n += 1
    return found


async def take(cluster: InProcessCluster, index: int, topic: str) -> Node:
    """Make broker ``index`` own the topic's bundle (an authoritative lookup)."""
    node = cluster.nodes[index]
    client = await node.client()
    await client.send(c.LookupTopic(topic=topic, request_id=1, authoritative=True))
    answer = await client.receive_command()
    assert isinstance(answer, c.LookupTopicResponse)
    assert answer.broker_service_url == node.broker.service_url, answer
    return node


async def producer_on(node: Node, topic: str) -> WireClient:
    client = await node.client()
    await client.send(c.Producer(topic=topic, producer_id=1, request_id=1))
    assert isinstance(await client.receive_command(), c.ProducerSuccess)
    return client


def leader_of(cluster: InProcessCluster) -> LoadBalancerLeader:
    leader = cluster.nodes[0].broker.load_leader
    assert leader is not None
    assert leader.statistics().leading
    return leader


async def test_the_leader_unloads_another_brokers_bundle_to_the_destination(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        [topic] = topics_in_one_bundle(cluster.nodes[0], 1)
        owner = await take(cluster, 1, topic)
        producer = await producer_on(owner, topic)
        bundle = owner.broker.ownership.bundle_of(TopicName.parse(topic))
        await leader_of(cluster).unload(str(bundle), cluster.nodes[2].broker_id)
        assert await producer.receive_command() == c.CloseProducer(producer_id=1, request_id=0)
        assert not owner.broker.ownership.is_owned(bundle)
        # One ``unload`` trace row, written by the owner that unloaded, with the shed's reason.
        unloads = [
            (node.broker_id, r.bundle, r.source_broker, r.dest_broker, r.reason)
            for node in cluster.nodes
            if node.broker.admin is not None and node.broker.admin.trace_ring is not None
            for r in node.broker.admin.trace_ring.rows()
            if r.event == "unload"
        ]
        dest = cluster.nodes[2].broker_id
        assert unloads == [(owner.broker_id, str(bundle), owner.broker_id, dest, "shedding")]
        # The client looks up again: the leader's affinity sends the bundle to the destination.
        found, _ = await cluster.lookup(topic, start=0)
        assert found is cluster.nodes[2]


async def test_a_hot_bundle_of_another_broker_is_split_there_and_clients_follow(
    fake_clock: FakeClock,
) -> None:
    overrides: dict[str, Any] = {
        "emubrokerResourceUsageSource": "model",
        "loadBalancerReportUpdateMinIntervalMillis": 1000,
        "loadBalancerHostUsageCheckIntervalMinutes": 1 / 60,
        "statsUpdateFrequencyInSecs": 1,
        "loadBalancerNamespaceBundleMaxTopics": 2,
        "loadBalancerSheddingEnabled": False,
    }
    async with inprocess_cluster(fake_clock, **overrides) as cluster:
        topics = topics_in_one_bundle(cluster.nodes[0], 3)
        owner = await take(cluster, 2, topics[0])
        producers = [await producer_on(owner, t) for t in topics]
        bundle = owner.broker.ownership.bundle_of(TopicName.parse(topics[0]))
        leader = leader_of(cluster)
        # The owner's next reports carry three topics in the bundle: over the limit of two.
        for _ in range(30):
            await fake_clock.advance(1.0)
            if leader.statistics().bundles_split:
                break
        assert leader.statistics().bundles_split == 1
        # Split at the owner (range_equally_divide) and the children unloaded: every producer
        # is closed, and the namespace has the halves instead of the bundle.
        for producer in producers:
            with anyio.fail_after(10):  # a failure guard only
                assert await producer.receive_command() == c.CloseProducer(
                    producer_id=1, request_id=0
                )
        lower, upper = bundle.bundle_range.lower, bundle.bundle_range.upper
        middle = lower + (upper - lower) // 2
        boundaries = cluster.nodes[0].broker.ownership.boundaries(bundle.namespace)
        assert (lower, middle, upper) == tuple(b for b in boundaries if lower <= b <= upper)
        halves = {NamespaceBundle(bundle.namespace, BundleRange(lower, middle)),
                  NamespaceBundle(bundle.namespace, BundleRange(middle, upper))}  # fmt: skip
        for topic in topics:
            found, _ = await cluster.lookup(topic, start=0)
            assert found.broker.ownership.bundle_of(TopicName.parse(topic)) in halves
            await producer_on(found, topic)  # the client reconnects where its topic went
