"""Clusters, tenants and namespaces over REST: Pulsar's paths, shapes, statuses and reasons."""

from __future__ import annotations

import anyio
import pytest

from emubroker.app import Broker
from emubroker.naming import NamespaceName, TopicName
from protocol import commands as c
from tests.emubroker.admin.conftest import Admin, Wire

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


# ---- clusters -------------------------------------------------------------------------------


async def test_clusters_list_get_create_update_delete(admin: Admin) -> None:
    assert await admin.ok("GET", "/admin/v2/clusters") == ["standalone"]
    standalone = await admin.ok("GET", "/admin/v2/clusters/standalone")
    assert standalone["brokerServiceUrl"] == "pulsar://127.0.0.1:6650"
    assert "serviceUrl" not in standalone  # this broker serves no admin API: nothing to record
    status, body = await admin.call(
        "PUT",
        "/admin/v2/clusters/east",
        json={"serviceUrl": "http://east:8080", "brokerServiceUrl": "pulsar://east:6650"},
    )
    assert (status, body) == (200, None)  # Pulsar 4.0.7 standalone: 200 without a body
    assert await admin.ok("GET", "/admin/v2/clusters") == ["east", "standalone"]
    await admin.fails("PUT", "/admin/v2/clusters/east", 409, "Cluster already exists", json={})
    assert await admin.call(
        "POST", "/admin/v2/clusters/east", json={"serviceUrl": "http://e2:8080"}
    ) == (200, None)
    east = await admin.ok("GET", "/admin/v2/clusters/east")
    assert east["serviceUrl"] == "http://e2:8080"
    assert "brokerServiceUrl" not in east  # null fields are omitted, as Pulsar's mapper does
    await admin.ok("DELETE", "/admin/v2/clusters/east")
    await admin.fails("GET", "/admin/v2/clusters/east", 404, "Cluster does not exist")


async def test_cluster_errors(admin: Admin) -> None:
    await admin.fails("GET", "/admin/v2/clusters/nope", 404, "Cluster does not exist")
    await admin.fails("POST", "/admin/v2/clusters/nope", 404, "Cluster does not exist", json={})
    await admin.fails("DELETE", "/admin/v2/clusters/nope", 404, "Cluster does not exist")
    await admin.fails("PUT", "/admin/v2/clusters/bad%20name", 412, "Cluster name is not valid")
    await admin.fails("PUT", "/admin/v2/clusters/c2", 400, "cluster data is required")
    # The public tenant and the default namespaces use the local cluster.
    await admin.fails("DELETE", "/admin/v2/clusters/standalone", 412, "Cluster not empty")


# ---- tenants --------------------------------------------------------------------------------


async def test_tenants_create_get_update_delete(admin: Admin) -> None:
    assert await admin.ok("GET", "/admin/v2/tenants") == ["public", "pulsar"]
    info = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    assert await admin.call("PUT", "/admin/v2/tenants/acme", json=info) == (204, None)
    assert await admin.ok("GET", "/admin/v2/tenants/acme") == info
    assert await admin.ok("GET", "/admin/v2/tenants") == ["acme", "public", "pulsar"]
    await admin.fails("PUT", "/admin/v2/tenants/acme", 409, "Tenant already exist", json=info)
    await admin.ok("POST", "/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]})
    assert await admin.ok("GET", "/admin/v2/tenants/acme") == {
        "adminRoles": [],
        "allowedClusters": ["standalone"],
    }
    assert await admin.call("DELETE", "/admin/v2/tenants/acme") == (204, None)
    await admin.fails("GET", "/admin/v2/tenants/acme", 404, "Tenant does not exist")


async def test_tenant_validation(admin: Admin) -> None:
    path = "/admin/v2/tenants/t1"
    await admin.fails("PUT", path, 412, "TenantInfo is null")
    await admin.fails("PUT", path, 412, "Clusters cannot be null", json={"adminRoles": []})
    await admin.fails("PUT", path, 412, "Clusters cannot be empty", json={"allowedClusters": []})
    await admin.fails("PUT", path, 412, "Clusters cannot be empty", json={"allowedClusters": [" "]})
    await admin.fails("PUT", path, 412, "Clusters do not exist", json={"allowedClusters": ["x"]})
    await admin.fails(
        "PUT",
        path,
        412,
        "AdminRoles contains whitespace",
        json={"adminRoles": [" ops"], "allowedClusters": ["standalone"]},
    )
    await admin.fails("PUT", "/admin/v2/tenants/a%20b", 412, "Tenant name is not valid", json={})
    await admin.fails("POST", "/admin/v2/tenants/nope", 404, "Tenant nope not found",
                      json={"allowedClusters": ["standalone"]})  # fmt: skip
    await admin.fails("DELETE", "/admin/v2/tenants/nope", 404, "Tenant doesn't exist")
    await admin.fails("DELETE", "/admin/v2/tenants/public", 409, "still has active namespaces")
    await admin.fails("DELETE", "/admin/v2/tenants/public?force=true", 405, "forced deletion")
    assert await admin.ok("GET", "/admin/v2/tenants") == ["public", "pulsar"]


# ---- namespaces -----------------------------------------------------------------------------


async def _tenant(admin: Admin, name: str = "acme") -> None:
    await admin.ok("PUT", f"/admin/v2/tenants/{name}", json={"allowedClusters": ["standalone"]})


async def test_namespace_with_a_bundle_count(admin: Admin, broker: Broker) -> None:
    await _tenant(admin)
    path = "/admin/v2/namespaces/acme/orders"
    assert await admin.call("PUT", path, json={"bundles": {"numBundles": 8}}) == (204, None)
    # The registry knows at once: producers may use it right after the 204.
    assert broker.namespaces.exists(NamespaceName("acme", "orders"))
    assert await admin.ok("GET", "/admin/v2/namespaces/acme") == ["acme/orders"]
    bundles = await admin.ok("GET", f"{path}/bundles")
    assert bundles["numBundles"] == 8
    assert bundles["boundaries"][:2] == ["0x00000000", "0x20000000"]
    assert bundles["boundaries"][-1] == "0xffffffff"
    policies = await admin.ok("GET", path)
    assert policies["replication_clusters"] == ["standalone"]
    assert policies["bundles"] == bundles
    assert policies["schema_compatibility_strategy"] == "UNDEFINED"
    assert "deduplicationEnabled" not in policies  # null until set
    # Lookups hash into the namespace's own bundles.
    bundle = broker.ownership.bundle_of(TopicName.parse("persistent://acme/orders/t"))
    assert bundle.bundle_range.upper - bundle.bundle_range.lower in (0x20000000, 0x1FFFFFFF)


async def test_namespace_with_explicit_boundaries_and_defaults(admin: Admin) -> None:
    await _tenant(admin)
    explicit = {"bundles": {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"],
                            "numBundles": 2}}  # fmt: skip
    await admin.ok("PUT", "/admin/v2/namespaces/acme/two", json=explicit)
    bundles = await admin.ok("GET", "/admin/v2/namespaces/acme/two/bundles")
    assert bundles == {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"], "numBundles": 2}
    await admin.ok("PUT", "/admin/v2/namespaces/acme/plain")  # no body: the default count
    bundles = await admin.ok("GET", "/admin/v2/namespaces/acme/plain/bundles")
    assert bundles["numBundles"] == 4


async def test_namespace_errors(admin: Admin, wire: Wire) -> None:
    await _tenant(admin)
    path = "/admin/v2/namespaces/acme/ns"
    await admin.fails("PUT", "/admin/v2/namespaces/nope/ns", 404, "Tenant does not exist")
    await admin.fails("GET", "/admin/v2/namespaces/nope", 404, "Tenant not found")
    await admin.fails("PUT", "/admin/v2/namespaces/acme/b%20d", 412, "Namespace name is not valid")
    await admin.fails(
        "PUT", path, 400, "do not cover the whole hash range",
        json={"bundles": {"boundaries": ["0x00000000", "0x80000000"], "numBundles": 1}},
    )  # fmt: skip
    await admin.fails(
        "PUT", path, 403, "not in the list of allowed clusters",
        json={"replication_clusters": ["elsewhere"]},
    )  # fmt: skip
    await admin.ok("PUT", path)
    await admin.fails("PUT", path, 409, "Namespace already exists")
    await admin.fails("GET", "/admin/v2/namespaces/acme/nope", 404, "Namespace does not exist")
    await wire.produce("persistent://acme/ns/t", 1)
    await admin.fails("DELETE", path, 409, "Cannot delete non empty namespace")
    await admin.fails("DELETE", f"{path}?force=true", 405, "forced deletion")


async def test_namespace_delete(admin: Admin, broker: Broker, wire: Wire) -> None:
    await _tenant(admin)
    await admin.ok("PUT", "/admin/v2/namespaces/acme/gone")
    assert await admin.call("DELETE", "/admin/v2/namespaces/acme/gone") == (204, None)
    assert not broker.namespaces.exists(NamespaceName("acme", "gone"))
    await admin.fails(
        "DELETE", "/admin/v2/namespaces/acme/gone", 404, "Namespace acme/gone does not exist."
    )
    await admin.ok("DELETE", "/admin/v2/tenants/acme")


async def test_namespace_delete_counts_only_active_non_persistent_topics(
    admin: Admin, wire: Wire
) -> None:
    # Pulsar lists a namespace's non-persistent topics for its deletion only while they are
    # active (NonPersistentTopic.isActive: a producer or a subscription, which ends with its
    # last consumer): one left loaded and idle does not keep the namespace.
    await _tenant(admin)
    path = "/admin/v2/namespaces/acme/np"
    topic = "non-persistent://acme/np/t"
    await admin.ok("PUT", path)
    client = await wire.client()
    await client.send(c.Producer(topic=topic, producer_id=1, request_id=1))
    assert isinstance(await client.receive_command(), c.ProducerSuccess)
    await admin.fails("DELETE", path, 409, "Cannot delete non empty namespace")
    await client.send(c.CloseProducer(producer_id=1, request_id=2))
    assert await client.receive_command() == c.Success(request_id=2)
    consumer = await wire.consumer(topic, "s")
    await admin.fails("DELETE", path, 409, "Cannot delete non empty namespace")
    await consumer.send(c.CloseConsumer(consumer_id=1, request_id=2))
    assert await consumer.receive_command() == c.Success(request_id=2)
    assert await admin.call("DELETE", path) == (204, None)


async def test_deduplication_policy(admin: Admin, broker: Broker) -> None:
    path = "/admin/v2/namespaces/public/default/deduplication"
    # Never set: Pulsar's null, 200 without a body (as Pulsar 4.0.7 standalone answers).
    assert await admin.call("GET", path) == (200, None)
    assert await admin.call("POST", path, data="true") == (204, None)
    assert await admin.ok("GET", path) is True
    policies = broker.namespaces.policies(NamespaceName("public", "default"))
    assert policies is not None
    assert policies.deduplicationEnabled is True
    stored = await admin.ok("GET", "/admin/v2/namespaces/public/default")
    assert stored["deduplicationEnabled"] is True
    await admin.ok("POST", path, data="false")
    assert await admin.ok("GET", path) is False
    await admin.ok("DELETE", path)
    assert await admin.call("GET", path) == (200, None)
    await admin.fails("POST", path, 400, "Invalid deduplication flag", data='"yes"')


async def test_schema_compatibility_strategy(admin: Admin) -> None:
    path = "/admin/v2/namespaces/public/default/schemaCompatibilityStrategy"
    assert await admin.ok("GET", path) == "UNDEFINED"
    await admin.ok("PUT", path, data='"BACKWARD"')
    assert await admin.ok("GET", path) == "BACKWARD"
    await admin.ok("PUT", path, data="FULL_TRANSITIVE")  # bare text is accepted too
    assert await admin.ok("GET", path) == "FULL_TRANSITIVE"
    await admin.fails("PUT", path, 400, "Invalid schema compatibility strategy", data='"SOMETIMES"')
    assert await admin.ok("GET", path) == "FULL_TRANSITIVE"


async def test_namespace_topics_for_http_lookups(admin: Admin, wire: Wire) -> None:
    await wire.produce("persistent://public/default/a", 1)
    await wire.produce("non-persistent://public/default/b", 1)
    await admin.ok("PUT", "/admin/v2/persistent/public/default/p/partitions", data="2")
    path = "/admin/v2/namespaces/public/default/topics"
    persistent = [
        "persistent://public/default/a",
        "persistent://public/default/p-partition-0",
        "persistent://public/default/p-partition-1",
    ]
    assert await admin.ok("GET", path) == persistent
    assert await admin.ok("GET", f"{path}?mode=PERSISTENT") == persistent
    assert await admin.ok("GET", f"{path}?mode=NON_PERSISTENT") == [
        "non-persistent://public/default/b"
    ]
    assert await admin.ok("GET", f"{path}?mode=ALL") == sorted(
        [*persistent, "non-persistent://public/default/b"]
    )
    await admin.fails("GET", f"{path}?mode=SOME", 400, "Invalid mode")


async def test_policy_changes_from_another_writer_reach_the_registry(
    admin: Admin, broker: Broker
) -> None:
    # Another broker sharing the store writes through the metadata store; the watch applies it.
    await broker.metadata.put("/admin/policies/public/other", b'{"deduplicationEnabled": true}')
    with anyio.fail_after(5):
        while not broker.namespaces.exists(NamespaceName("public", "other")):
            await anyio.lowlevel.checkpoint()
    assert await admin.ok("GET", "/admin/v2/namespaces/public/other/deduplication") is True


async def test_retention_free_defaults_and_retention_round_trip(admin: Admin) -> None:
    path = "/admin/v2/namespaces/public/default/retention"
    assert "retention_policies" not in await admin.ok("GET", "/admin/v2/namespaces/public/default")
    assert await admin.call("GET", path) == (200, None)
    policy = {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    assert await admin.call("POST", path, json=policy) == (204, None)
    assert await admin.ok("GET", path) == policy
    # Pulsar's checkArgument: an IllegalArgumentException, so 400, with its texts.
    await admin.fails(
        "POST", path, 400,
        "Invalid retention policy: Setting a single time or size limit to 0 is invalid when one "
        "of the limits has a non-zero value. Use the value of -1 instead of 0 to ignore a "
        "specific limit. To disable retention both limits must be set to 0.",
        json={"retentionTimeInMinutes": 0, "retentionSizeInMB": 5},
    )  # fmt: skip
    await admin.fails("POST", path, 400, "Invalid retention policy: time limit must be >= -1",
                      json={"retentionTimeInMinutes": -2, "retentionSizeInMB": 5})  # fmt: skip
    await admin.fails("POST", path, 400, "Invalid retention policy: size limit must be >= -1",
                      json={"retentionTimeInMinutes": -2, "retentionSizeInMB": -3})  # fmt: skip
    await admin.ok("DELETE", path)
    assert await admin.call("GET", path) == (200, None)


async def test_fresh_namespace_reads_as_pulsar_standalones(admin: Admin) -> None:
    # As Pulsar 4.0.7 standalone answers (conformance/ scenario namespace_policies): an unset
    # is_allow_auto_update_schema reads as the broker's isAllowAutoUpdateSchemaEnabled, and the
    # backlog quota map is empty.
    await admin.ok("PUT", "/admin/v2/namespaces/public/fresh")
    policies = await admin.ok("GET", "/admin/v2/namespaces/public/fresh")
    assert policies["is_allow_auto_update_schema"] is True
    backlog_quotas = "/admin/v2/namespaces/public/fresh/backlogQuotaMap"
    assert await admin.call("GET", backlog_quotas) == (200, {})
