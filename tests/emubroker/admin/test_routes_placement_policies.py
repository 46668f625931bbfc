"""Namespace isolation policies and anti-affinity groups over REST (Pulsar's paths and shapes)."""

from __future__ import annotations

import json
import re

import pytest

from emubroker.app import Broker, broker_id_of
from emubroker.naming import NamespaceName
from emubroker.policies.isolation import isolation_policies_path, read_anti_affinity_group
from emubroker.policies.local import read_local_policies
from tests.emubroker.admin.conftest import Admin

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

BASE = "/admin/v2/clusters/standalone/namespaceIsolationPolicies"
POLICY = {
    "namespaces": ["public/iso.*"],
    "primary": ["127\\.0\\.0\\.2"],
    "secondary": [],
    "auto_failover_policy": {
        "policy_type": "min_available",
        "parameters": {"min_limit": "1", "usage_threshold": "100"},
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_isolation_policies_are_set_read_and_deleted(admin: Admin, broker: Broker) -> None:
    await admin.fails("GET", BASE, 404, "NamespaceIsolationPolicies for cluster standalone")
    assert await admin.ok("POST", f"{BASE}/pin", json=POLICY) is None
    assert await admin.ok("GET", f"{BASE}/pin") == POLICY
    assert await admin.ok("GET", BASE) == {"pin": POLICY}
    # Stored as Pulsar stores it: one node of name -> NamespaceIsolationData.
    node = await broker.metadata.get(isolation_policies_path("standalone"))
    assert node is not None
    assert json.loads(node.value) == {"pin": POLICY}
    other = {**POLICY, "namespaces": ["public/other"]}
    await admin.ok("POST", f"{BASE}/second", json=other)
    assert await admin.ok("GET", BASE) == {"pin": POLICY, "second": other}
    await admin.ok("DELETE", f"{BASE}/pin")
    assert await admin.ok("GET", BASE) == {"second": other}
    await admin.fails("GET", f"{BASE}/pin", 404, "Cannot find NamespaceIsolationPolicy pin")
    await admin.ok("DELETE", f"{BASE}/pin")  # already gone: still 204, as Pulsar


async def test_invalid_isolation_policies_and_unknown_clusters_are_refused(admin: Admin) -> None:
    for broken in (
        {**POLICY, "primary": []},
        {**POLICY, "namespaces": ["public/(unclosed"]},
        {**POLICY, "auto_failover_policy": {"policy_type": "other", "parameters": {}}},
        {**POLICY, "auto_failover_policy": {"policy_type": "min_available", "parameters": {}}},
        {key: value for key, value in POLICY.items() if key != "secondary"},
    ):
        await admin.fails(
            "POST",
            f"{BASE}/bad",
            400,
            "Invalid format of input policy data. policy: bad",
            json=broken,
        )
    await admin.fails("GET", BASE, 404, "NamespaceIsolationPolicies for cluster")  # nothing stored
    missing = "/admin/v2/clusters/nowhere/namespaceIsolationPolicies"
    await admin.fails("GET", missing, 404, "Cluster nowhere does not exist.")
    await admin.fails("POST", f"{missing}/p", 412, "Cluster nowhere does not exist.", json=POLICY)
    await admin.fails("DELETE", f"{missing}/p", 412, "Cluster nowhere does not exist.")


async def test_anti_affinity_groups_live_in_the_local_policies(
    admin: Admin, broker: Broker
) -> None:
    path = "/admin/v2/namespaces/public/default/antiAffinity"
    namespace = NamespaceName("public", "default")
    assert await admin.call("GET", path) == (204, None)
    await admin.ok("POST", path, data="group-a")
    assert await admin.call("GET", path) == (200, "group-a")
    assert await read_anti_affinity_group(broker.metadata, namespace) == "group-a"
    local = await read_local_policies(broker.metadata, namespace)
    assert local is not None
    policies = broker.namespaces.policies(namespace)
    assert policies is not None
    assert local.policies.bundles == policies.bundles  # the namespace's layout, kept
    await admin.fails("POST", path, 412, "antiAffinityGroup can't be empty", data="  ")
    await admin.ok("DELETE", path)
    assert await admin.call("GET", path) == (204, None)
    await admin.fails("POST", "/admin/v2/namespaces/public/nope/antiAffinity", 404, "", data="g")


async def test_deleting_a_cluster_deletes_its_isolation_policies(
    admin: Admin, broker: Broker
) -> None:
    await admin.ok("PUT", "/admin/v2/clusters/east", json={"serviceUrl": "http://east:8080"})
    await admin.ok("POST", "/admin/v2/clusters/east/namespaceIsolationPolicies/p", json=POLICY)
    await admin.ok("DELETE", "/admin/v2/clusters/east")
    assert await broker.metadata.get(isolation_policies_path("east")) is None
    await admin.ok("PUT", "/admin/v2/clusters/east", json={"serviceUrl": "http://east:8080"})
    await admin.fails(
        "GET", "/admin/v2/clusters/east/namespaceIsolationPolicies", 404, "does not exist"
    )


async def test_brokers_views_show_each_brokers_isolation_policy(
    admin: Admin, broker: Broker
) -> None:
    me = broker_id_of(broker.config)
    await admin.fails("GET", f"{BASE}/brokers", 404, "NamespaceIsolationPolicies for cluster")
    primary = {**POLICY, "primary": [re.escape(me)], "secondary": ["other:.*"]}
    await admin.ok("POST", f"{BASE}/mine", json=primary)
    # The broker name is matched whole, port included (Pulsar's view; placement uses the host).
    host_only = {**POLICY, "namespaces": ["public/h"], "primary": [re.escape(me.split(":")[0])]}
    await admin.ok("POST", f"{BASE}/host-only", json=host_only)
    mine = {
        "brokerName": me,
        "policyName": "mine",
        "primary": True,
        "namespaceRegex": ["public/iso.*"],
    }
    assert await admin.ok("GET", f"{BASE}/brokers") == [mine]
    assert await admin.ok("GET", f"{BASE}/brokers/{me}") == mine
    assert await admin.ok("GET", f"{BASE}/brokers/other:8080") == {
        "brokerName": "other:8080",
        "policyName": "mine",
        "primary": False,
        "namespaceRegex": ["public/iso.*"],
    }
    assert await admin.ok("GET", f"{BASE}/brokers/nobody:1") == {
        "brokerName": "nobody:1",
        "primary": False,
        "namespaceRegex": [],
    }
    missing = "/admin/v2/clusters/nowhere/namespaceIsolationPolicies/brokers"
    await admin.fails("GET", missing, 412, "Cluster nowhere does not exist.")
    await admin.fails("GET", f"{missing}/{me}", 412, "Cluster nowhere does not exist.")
