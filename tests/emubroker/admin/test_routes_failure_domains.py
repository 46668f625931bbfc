"""A cluster's failure domains over REST (Pulsar's ``ClustersBase`` paths, statuses, messages)."""

from __future__ import annotations

import json

import pytest

from emubroker.app import Broker
from emubroker.policies.failure_domains import failure_domains_path
from tests.emubroker.admin.conftest import Admin

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

BASE = "/admin/v2/clusters/standalone/failureDomains"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


async def test_failure_domains_are_set_listed_read_and_deleted(
    admin: Admin, broker: Broker
) -> None:
    assert await admin.ok("GET", BASE) == {}
    await admin.fails("GET", f"{BASE}/d1", 404, "Domain d1 for cluster standalone does not exist")
    assert await admin.call("POST", f"{BASE}/d1", json={"brokers": ["b1:8080", "b2:8080"]}) == (
        204,
        None,
    )
    await admin.ok("POST", f"{BASE}/d2", json={"brokers": ["b3:8080"]})
    assert await admin.ok("GET", f"{BASE}/d1") == {"brokers": ["b1:8080", "b2:8080"]}
    assert await admin.ok("GET", BASE) == {
        "d1": {"brokers": ["b1:8080", "b2:8080"]},
        "d2": {"brokers": ["b3:8080"]},
    }
    # Stored where Pulsar stores it: one node per domain.
    node = await broker.metadata.get(f"{failure_domains_path('standalone')}/d2")
    assert node is not None
    assert json.loads(node.value) == {"brokers": ["b3:8080"]}
    # Replacing a domain with its own brokers is no conflict.
    await admin.ok("POST", f"{BASE}/d1", json={"brokers": ["b1:8080"]})
    assert await admin.call("DELETE", f"{BASE}/d2") == (200, None)
    assert await admin.ok("GET", BASE) == {"d1": {"brokers": ["b1:8080"]}}
    await admin.fails(
        "DELETE", f"{BASE}/d2", 404, "Domain-name d2 or cluster standalone does not exist"
    )


async def test_a_broker_in_two_domains_is_refused_with_409(admin: Admin) -> None:
    await admin.ok("POST", f"{BASE}/d1", json={"brokers": ["b1:8080", "b2:8080"]})
    await admin.fails(
        "POST",
        f"{BASE}/d2",
        409,
        "[b1:8080, b2:8080] already exists in d1",
        json={"brokers": ["b2:8080", "b1:8080", "b9:8080"]},
    )
    await admin.fails("GET", f"{BASE}/d2", 404, "does not exist")  # nothing stored


async def test_unknown_clusters_and_bad_bodies(admin: Admin) -> None:
    missing = "/admin/v2/clusters/nowhere/failureDomains"
    assert await admin.ok("GET", missing) == {}  # Pulsar's list does not check the cluster
    for method in ("GET", "DELETE"):
        await admin.fails(method, f"{missing}/d", 412, "Cluster nowhere does not exist.")
    await admin.fails(
        "POST", f"{missing}/d", 412, "Cluster nowhere does not exist.", json={"brokers": []}
    )
    await admin.fails("POST", f"{BASE}/d", 400, "failure domain", json={"brokers": "b1"})


async def test_deleting_the_cluster_deletes_its_failure_domains(
    admin: Admin, broker: Broker
) -> None:
    await admin.ok("PUT", "/admin/v2/clusters/other", json={"serviceUrl": "http://o:8080"})
    await admin.ok("POST", "/admin/v2/clusters/other/failureDomains/d", json={"brokers": ["o:1"]})
    await admin.ok("DELETE", "/admin/v2/clusters/other")
    assert await broker.metadata.children(failure_domains_path("other")) == []
