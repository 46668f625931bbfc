"""Lookup across brokers (spec/pulsar-behaviour.md §3.1): three brokers in one process.

The decision table of ``loadbalance.ownership.lookup``: an unowned bundle asked of a follower
redirects to the leader (not authoritative), the leader places it (authoritative redirect, or
Connect when it picks itself), an authoritative lookup makes the named broker take it, an owned
bundle connects to its owner from anywhere, and a bundle being unloaded fails with MetadataError.
Producers and consumers of a topic a broker does not serve are refused with ServiceNotReady.
"""

from __future__ import annotations

from collections import Counter

import pytest

from emubroker.naming import TopicName
from protocol import commands as c
from protocol.clock import FakeClock
from protocol.errors import ServerError
from tests.support.inprocess_cluster import inprocess_cluster, placed_by_leader

pytestmark = pytest.mark.anyio

TOPIC = "persistent://public/default/t"


async def test_an_unowned_bundle_goes_through_the_leader(fake_clock: FakeClock) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        leader, follower, _ = cluster.nodes
        assert leader.broker.leader_election is not None
        assert leader.broker.leader_election.is_leader()
        owner, answers = await cluster.lookup(TOPIC, start=1)
        # A follower does not decide: it sends the client to the leader, not authoritatively.
        first = answers[0]
        assert isinstance(first, c.LookupTopicResponse)
        assert (first.response, first.broker_service_url, first.authoritative) == (
            c.LookupType.REDIRECT,
            leader.broker.service_url,
            False,
        )
        # The leader places it by load (idle brokers tie under LeastLongTermMessageRate: a
        # seeded draw) and redirects authoritatively; the chosen broker takes it.
        assert owner.broker_id == placed_by_leader(cluster)
        if owner is not leader:
            placed = answers[1]
            assert isinstance(placed, c.LookupTopicResponse)
            assert (placed.response, placed.broker_service_url, placed.authoritative) == (
                c.LookupType.REDIRECT,
                owner.broker.service_url,
                True,
            )
        last = answers[-1]
        assert isinstance(last, c.LookupTopicResponse)
        assert (last.response, last.authoritative) == (c.LookupType.CONNECT, True)
        bundle = owner.broker.ownership.bundle_of(TopicName.parse(TOPIC))
        assert owner.broker.ownership.is_serving(bundle)
        # Owned now: every broker answers Connect to the owner at once.
        again, answers = await cluster.lookup(TOPIC, start=2)
        assert again is owner
        assert len(answers) == 1
        assert not follower.broker.ownership.is_owned(bundle)


async def test_the_leader_spreads_bundles_over_the_fewest_loaded_brokers(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        owners: dict[str, str] = {}
        for i in range(40):
            topic = f"persistent://public/default/spread-{i}"
            node, answers = await cluster.lookup(topic, start=i % 3)
            if len(answers) > 1:
                # Placed by the leader with an authoritative redirect, unless it chose itself.
                placed = answers[-2]
                assert isinstance(placed, c.LookupTopicResponse)
                assert placed.response is c.LookupType.REDIRECT
            bundle = node.broker.ownership.bundle_of(TopicName.parse(topic))
            owners[str(bundle)] = node.broker_id
        assert len(owners) == 4  # the namespace's four bundles
        per_broker = Counter(owners.values())
        assert sorted(per_broker.values()) == [1, 1, 2]


async def test_an_authoritative_lookup_makes_the_broker_take_the_bundle(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        target = cluster.nodes[2]
        client = await target.client()
        await client.send(c.LookupTopic(topic=TOPIC, request_id=5, authoritative=True))
        answer = await client.receive_command()
        assert answer == c.LookupTopicResponse(
            request_id=5,
            broker_service_url=target.broker.service_url,
            response=c.LookupType.CONNECT,
            authoritative=True,
        )
        assert target.broker.ownership.owned_bundles() == [
            target.broker.ownership.bundle_of(TopicName.parse(TOPIC))
        ]


async def test_producers_and_consumers_of_another_brokers_topic_are_refused(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        owner, _ = await cluster.lookup(TOPIC)
        other = next(n for n in cluster.nodes if n is not owner)
        bundle = owner.broker.ownership.bundle_of(TopicName.parse(TOPIC))
        client = await other.client()
        await client.send(c.Producer(topic=TOPIC, producer_id=1, request_id=1))
        refused = await client.receive_command()
        message = (
            f"Namespace bundle ({bundle}) for topic ({TOPIC}) not served by this instance:"
            f"{other.broker_id}. Please redo the lookup."
        )
        assert refused == c.Error(request_id=1, error=ServerError.ServiceNotReady, message=message)
        await client.send(
            c.Subscribe(
                topic=TOPIC,
                subscription="s",
                sub_type=c.SubType.SHARED,
                consumer_id=1,
                request_id=2,
            )
        )
        refused = await client.receive_command()
        assert refused == c.Error(request_id=2, error=ServerError.ServiceNotReady, message=message)
        assert other.broker.topics.loaded_topic(TopicName.parse(TOPIC)) is None
        # The owner serves them.
        served = await owner.client()
        await served.send(c.Producer(topic=TOPIC, producer_id=1, request_id=3))
        assert isinstance(await served.receive_command(), c.ProducerSuccess)


async def test_a_bundle_being_unloaded_fails_lookups_with_metadata_error(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        owner, _ = await cluster.lookup(TOPIC)
        bundle = owner.broker.ownership.bundle_of(TopicName.parse(TOPIC))
        owner.broker.ownership.disable(bundle)  # §6.3 step 1, as an unload begins
        client = await owner.client()
        await client.send(c.LookupTopic(topic=TOPIC, request_id=9))
        answer = await client.receive_command()
        assert answer == c.LookupTopicResponse(
            request_id=9,
            response=c.LookupType.FAILED,
            error=ServerError.MetadataError,
            message=f"Namespace bundle {bundle} is being unloaded",
        )
        await client.send(c.Producer(topic=TOPIC, producer_id=1, request_id=10))
        refused = await client.receive_command()
        assert isinstance(refused, c.Error)
        assert refused.error is ServerError.ServiceNotReady


async def test_partitions_of_one_topic_may_live_on_different_brokers(
    fake_clock: FakeClock,
) -> None:
    async with inprocess_cluster(fake_clock) as cluster:
        await cluster.nodes[1].broker.topics.create_partitioned_topic(
            TopicName.parse("persistent://public/default/parts"), 16
        )
        # Every broker answers PARTITIONED_METADATA from the shared store.
        for node in cluster.nodes:
            client = await node.client()
            await client.send(
                c.PartitionedTopicMetadata(topic="persistent://public/default/parts", request_id=1)
            )
            answer = await client.receive_command()
            assert isinstance(answer, c.PartitionedTopicMetadataResponse)
            assert answer.partitions == 16, node.broker_id
        owners = set()
        for i in range(16):
            partition = f"persistent://public/default/parts-partition-{i}"
            owner, _ = await cluster.lookup(partition, start=i % 3)
            client = await owner.client()
            await client.send(c.Producer(topic=partition, producer_id=1, request_id=1))
            assert isinstance(await client.receive_command(), c.ProducerSuccess)
            owners.add(owner.broker_id)
        assert len(owners) == 3
