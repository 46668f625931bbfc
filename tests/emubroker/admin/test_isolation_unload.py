"""Setting a namespace isolation policy unloads the namespaces it may move (three in-process
brokers, each with its REST API; the remote unloads go through the broker's owner calls)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import pytest

from emubroker.naming import TopicName
from protocol import commands as c
from protocol.clock import FakeClock
from tests.emubroker.admin import test_routes_unload as routes_unload
from tests.emubroker.admin.conftest import Admin
from tests.support.inprocess_cluster import InProcessCluster, Node

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

BASE = "/admin/v2/clusters/standalone/namespaceIsolationPolicies"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


def cluster_with_admins(
    clock: FakeClock,
) -> AbstractAsyncContextManager[tuple[InProcessCluster, list[Admin]]]:
    """Three brokers with their own hosts (isolation policies match hosts), and their admins."""
    return routes_unload.cluster_with_admins(
        clock, node_overrides=lambda i: {"advertisedAddress": f"127.0.0.{i + 1}"}
    )


async def take(node: Node, namespace: str) -> None:
    """Make ``node`` own the namespace's bundle (an authoritative lookup)."""
    client = await node.client()
    topic = f"persistent://{namespace}/t"
    await client.send(c.LookupTopic(topic=topic, request_id=1, authoritative=True))
    answer = await client.receive_command()
    assert isinstance(answer, c.LookupTopicResponse)
    assert answer.response is c.LookupType.CONNECT, answer


async def owner(cluster: InProcessCluster, namespace: str) -> str | None:
    """The owner of the bundle of the namespace's topic ``t``."""
    ownership = cluster.nodes[0].broker.ownership
    found = await ownership.get_owner(ownership.bundle_of(TopicName.parse(f"{namespace}/t")))
    return None if found is None else found.broker.http_url


def policy(primary: str, scope: str | None = None) -> dict[str, object]:
    body: dict[str, object] = {
        "namespaces": ["public/iso-.*"],
        "primary": [primary],
        "secondary": [],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": "1", "usage_threshold": "100"},
        },
    }
    if scope is not None:
        body["unload_scope"] = scope
    return body


async def test_setting_a_policy_unloads_the_namespaces_it_matches(fake_clock: FakeClock) -> None:
    async with cluster_with_admins(fake_clock) as (cluster, admins):
        first, second, third = cluster.nodes
        names = {"public/iso-a": first, "public/iso-b": second, "public/other": second}
        for name, node in names.items():
            await admins[0].ok("PUT", f"/admin/v2/namespaces/{name}")
            await fake_clock.advance(0.01)  # every broker's watch sees it
            await take(node, name)
        for name, node in names.items():
            assert await owner(cluster, name) == f"http://{node.broker_id}"

        # Pinned to the third broker: both matching namespaces are unloaded, where they were.
        await admins[0].ok("POST", f"{BASE}/pin", json=policy("127\\.0\\.0\\.3"))
        assert await owner(cluster, "public/iso-a") is None
        assert await owner(cluster, "public/iso-b") is None  # owned by another broker
        assert await owner(cluster, "public/other") == f"http://{second.broker_id}"
        await fake_clock.advance(0.01)
        for name in ("public/iso-a", "public/iso-b"):
            placed, _ = await cluster.lookup(f"persistent://{name}/t", start=1)
            assert placed is third

        # The same policy again: nothing changed, nothing unloaded.
        await admins[1].ok("POST", f"{BASE}/pin", json=policy("127\\.0\\.0\\.3"))
        assert await owner(cluster, "public/iso-a") == f"http://{third.broker_id}"
        # New primaries with unload_scope none: left where they are.
        await admins[1].ok("POST", f"{BASE}/pin", json=policy("127\\.0\\.0\\.2", "none"))
        assert await owner(cluster, "public/iso-b") == f"http://{third.broker_id}"
        # New primaries (scope changed, the default): moved again.
        await admins[2].ok("POST", f"{BASE}/pin", json=policy("127\\.0\\.0\\.1"))
        assert await owner(cluster, "public/iso-a") is None
        assert await owner(cluster, "public/iso-b") is None
