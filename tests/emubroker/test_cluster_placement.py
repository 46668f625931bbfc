"""Placement by load on three in-process brokers (spec/pulsar-behaviour.md §3.2).

The brokers report the model usage source (a script: broker 2's CPU jumps to 95 % at 30 s) and
the traffic of their bundles; the leader's LeastLongTermMessageRate sends a fresh namespace to
the broker with the least long-term message rate, avoids an overloaded one, honours an isolation
policy set in the metadata store, and honours a destination broker once.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from emubroker.loadbalance.ownership.assignment import LoadManagerSelector
from emubroker.naming import BundleRange, NamespaceBundle, NamespaceName
from emubroker.policies import PolicyStore, default_policies
from emubroker.policies.isolation import (
    AutoFailoverPolicyData,
    NamespaceIsolationData,
    set_isolation_policy,
)
from protocol import commands as c
from protocol.clock import FakeClock
from tests.support.inprocess_cluster import InProcessCluster, Node, inprocess_cluster

pytestmark = pytest.mark.anyio

FULL = BundleRange(0, 0xFFFFFFFF)


def script(tmp_path: Path) -> Path:
    path = tmp_path / "usage.json"
    overload = {"steps": [{"at": 0, "cpu": 5}, {"at": 30, "cpu": 95}]}
    path.write_text(
        json.dumps({"steps": [{"at": 0, "cpu": 5}], "brokers": {"127.0.0.3:8082": overload}})
    )
    return path


async def create(cluster: InProcessCluster, name: str) -> None:
    namespace = NamespaceName.parse(name)
    await PolicyStore(cluster.nodes[0].store).create_namespace(
        namespace, default_policies("standalone", 1)
    )
    await cluster.clock.advance(0.01)  # the brokers see it through their metadata watch


async def take(node: Node, topic: str) -> None:
    """Make ``node`` own the topic's bundle (an authoritative lookup, as the leader's redirect)."""
    client = await node.client()
    await client.send(c.LookupTopic(topic=topic, request_id=1, authoritative=True))
    answer = await client.receive_command()
    assert isinstance(answer, c.LookupTopicResponse)
    assert answer.response is c.LookupType.CONNECT


async def owner_of(cluster: InProcessCluster, namespace: str) -> Node:
    owner, _ = await cluster.lookup(f"persistent://{namespace}/t", start=1)
    return owner


def leader_selector(cluster: InProcessCluster) -> LoadManagerSelector:
    lookup = cluster.nodes[0].broker.lookup
    assert lookup is not None
    assert isinstance(lookup.selector, LoadManagerSelector)
    return lookup.selector


async def test_new_bundles_go_where_least_long_term_message_rate_says(
    fake_clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="emubroker.loadbalance.ownership.assignment")
    async with inprocess_cluster(
        fake_clock,
        node_overrides=lambda i: {"advertisedAddress": f"127.0.0.{i + 1}"},
        emubrokerResourceUsageSource="model",
        emubrokerResourceUsageScript=str(script(tmp_path)),
        emubrokerAvailableProcessors=1,
        loadBalancerReportUpdateMinIntervalMillis=1000,
        loadBalancerHostUsageCheckIntervalMinutes=1 / 60,
        statsUpdateFrequencyInSecs=1,
        emubrokerLoadBalancerTraceDir=str(tmp_path / "trace"),
    ) as cluster:
        heavy, light, idle = cluster.nodes
        for name in ("public/heavy", "public/light", "public/fresh-1", "public/fresh-2"):
            await create(cluster, name)
        await take(heavy, "persistent://public/heavy/t")
        await take(light, "persistent://public/light/t")
        for _ in range(12):  # 200 msg/s on one broker, 50 on another, none on the third
            await heavy.wire.produce("persistent://public/heavy/t", 200)
            await light.wire.produce("persistent://public/light/t", 50)
            await fake_clock.advance(1.0)
        leader = leader_selector(cluster)

        # The least long-term message rate: the idle broker.
        assert await owner_of(cluster, "public/fresh-1") is idle
        assert leader.last is not None
        assert (leader.last.reason, leader.last.strategy, leader.last.candidates) == (
            "strategy",
            "LeastLongTermMessageRate",
            3,
        )

        # 30 s on, the idle broker's CPU is at 95 %: still the least message rate, but
        # overloaded, so the next fresh namespace goes to the lighter of the other two.
        await fake_clock.advance(25.0)
        assert fake_clock.now() > 30
        load_leader = cluster.nodes[0].broker.load_leader
        assert load_leader is not None
        term = load_leader.term
        assert term is not None
        averages = {
            broker: data.time_average_data.long_term_msg_rate_in
            for broker, data in term.manager.load_data.broker_data.items()
        }
        assert averages[idle.broker_id] < averages[light.broker_id] < averages[heavy.broker_id]
        assert await owner_of(cluster, "public/fresh-2") is light

        # An isolation policy set in the store pins a namespace to its primary (the busiest).
        await set_isolation_policy(
            cluster.nodes[1].store,
            "standalone",
            "pin",
            NamespaceIsolationData(
                namespaces=["public/pinned"],
                primary=["127\\.0\\.0\\.1"],
                secondary=[],
                auto_failover_policy=AutoFailoverPolicyData(
                    "min_available", {"min_limit": "1", "usage_threshold": "100"}
                ),
            ),
        )
        await create(cluster, "public/pinned")
        assert await owner_of(cluster, "public/pinned") is heavy

        # An unload naming a destination: the leader sends the bundle there once (the admin
        # call sets this affinity on the leader, tests/emubroker/admin/test_routes_unload.py).
        bundle = NamespaceBundle(NamespaceName.parse("public/fresh-2"), FULL)
        leader.set_affinity(FULL.name, idle.broker_id)
        assert light.broker.unloader is not None
        assert await light.broker.unloader.unload(bundle)
        assert await owner_of(cluster, "public/fresh-2") is idle
        assert leader.last is not None
        assert leader.last.reason == "affinity"
        # Once: unloaded again, it is placed as before the destination (the heavy broker is now
        # an isolation primary and takes no other namespace; the idle one is overloaded). The
        # destination is held for the bundle like any choice until the leader's next updateAll
        # (the lookups of its other clients get it too): a report arriving runs it.
        assert load_leader.term is not None
        await load_leader.term.refresh()
        assert idle.broker.unloader is not None
        assert await idle.broker.unloader.unload(bundle)
        assert await owner_of(cluster, "public/fresh-2") is light
        assert leader.last.reason == "strategy"
        decisions = [r.getMessage() for r in caplog.records if "placement: " in r.getMessage()]
        assert any(
            f"public/fresh-2/0x00000000_0xffffffff -> {idle.broker_id} (affinity" in line
            for line in decisions
        ), decisions
        leader_id = heavy.broker_id
    # The leader's trace has a placement row per choice, with its reason.
    prefix = "loadbalance-" + leader_id.replace(":", "_")
    [path] = (tmp_path / "trace").glob(f"{prefix}-*.parquet")
    rows = [r for r in pq.read_table(path).to_pylist() if r["event"] == "placement"]
    placed = [(r["bundle"].split("/")[1], r["dest_broker"], r["reason"]) for r in rows]
    assert placed[:4] == [
        ("fresh-1", idle.broker_id, "strategy"),
        ("fresh-2", light.broker_id, "strategy"),
        ("pinned", heavy.broker_id, "strategy"),
        ("fresh-2", idle.broker_id, "affinity"),
    ]
