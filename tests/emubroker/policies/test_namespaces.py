"""Pulsar's policy JSON shapes, the policy store over the metadata store, the namespace registry."""

from __future__ import annotations

import json

import anyio
import msgspec
import pytest

from emubroker.metadata import MemoryMetadataStore
from emubroker.namespace_registry import NamespaceRegistry
from emubroker.naming import NamespaceName
from emubroker.policies import (
    BundlesData,
    ClusterData,
    Policies,
    PolicyExistsError,
    PolicyNotFoundError,
    PolicyStore,
    SchemaCompatibilityStrategy,
    TenantInfo,
    decode_policies,
    default_policies,
    to_json,
)

pytestmark = pytest.mark.anyio

NS = NamespaceName("acme", "orders")


def test_json_omits_nulls_like_pulsars_mapper() -> None:
    doc = json.loads(to_json(Policies(bundles=BundlesData(["0x00000000", "0xffffffff"], 1))))
    assert "deduplicationEnabled" not in doc
    assert "message_ttl_in_seconds" not in doc
    assert doc["deleted"] is False
    assert doc["offload_threshold"] == -1
    assert doc["schema_compatibility_strategy"] == "UNDEFINED"
    assert doc["bundles"] == {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}
    cluster = json.loads(to_json(ClusterData(service_url="http://h:8080")))
    assert cluster == {
        "serviceUrl": "http://h:8080",
        "brokerClientTlsEnabled": False,
        "tlsAllowInsecureConnection": False,
    }


def test_policies_decode_pulsars_json_and_keep_opaque_fields() -> None:
    raw = json.dumps(
        {
            "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
            "deduplicationEnabled": True,
            "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10},
            "schema_compatibility_strategy": "BACKWARD",
            "someFutureField": [1, 2, 3],
        }
    ).encode()
    policies = decode_policies(raw)
    assert policies.deduplicationEnabled is True
    assert policies.schema_compatibility_strategy is SchemaCompatibilityStrategy.BACKWARD
    again = json.loads(to_json(policies))
    assert again["retention_policies"] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    with pytest.raises(msgspec.ValidationError):
        decode_policies(b'{"deduplicationEnabled": "yes"}')


def test_default_policies_have_the_bundle_count_and_the_local_cluster() -> None:
    policies = default_policies("c1", 2)
    assert policies.replication_clusters == ["c1"]
    assert policies.bundles == BundlesData(["0x00000000", "0x80000000", "0xffffffff"], 2)


async def test_store_round_trips_clusters_tenants_namespaces() -> None:
    async with MemoryMetadataStore() as store:
        policies = PolicyStore(store)
        await policies.create_cluster("c1", ClusterData(broker_service_url="pulsar://h:6650"))
        with pytest.raises(PolicyExistsError, match="Cluster already exists"):
            await policies.create_cluster("c1", ClusterData())
        assert await policies.clusters() == ["c1"]
        await policies.update_cluster("c1", ClusterData(service_url="http://h:8080"))
        assert await policies.get_cluster("c1") == ClusterData(service_url="http://h:8080")
        with pytest.raises(PolicyNotFoundError):
            await policies.update_cluster("c2", ClusterData())

        await policies.create_tenant("acme", TenantInfo(["ops"], ["c1"]))
        assert await policies.get_tenant("acme") == TenantInfo(["ops"], ["c1"])
        await policies.create_namespace(NS, default_policies("c1", 4))
        assert await policies.namespaces("acme") == [NS]
        node = await store.get("/admin/policies/acme/orders")
        assert node is not None
        assert json.loads(node.value)["replication_clusters"] == ["c1"]

        await policies.delete_namespace(NS)
        assert await policies.get_namespace(NS) is None
        with pytest.raises(PolicyNotFoundError, match="Namespace does not exist"):
            await policies.delete_namespace(NS)
        await policies.delete_tenant("acme")
        assert await policies.tenants() == []
        await policies.delete_cluster("c1")
        assert await policies.clusters() == []


async def test_namespace_updates_retry_on_concurrent_writes() -> None:
    async with MemoryMetadataStore() as store:
        policies = PolicyStore(store)
        await policies.create_namespace(NS, default_policies("c1", 1))
        calls = 0

        def enable_dedup(old: Policies) -> Policies:
            nonlocal calls
            calls += 1
            return msgspec.structs.replace(old, deduplicationEnabled=True)

        # A writer that lands between our read and our write: the first attempt must lose.
        original_get = store.get

        async def racing_get(path: str):  # type: ignore[no-untyped-def]
            found = await original_get(path)
            if calls == 0 and found is not None:
                other = msgspec.structs.replace(
                    decode_policies(found.value), message_ttl_in_seconds=9
                )
                await store.put(path, to_json(other))
            return found

        store.get = racing_get  # type: ignore[method-assign]
        result = await policies.update_namespace(NS, enable_dedup)
        store.get = original_get  # type: ignore[method-assign]
        assert calls == 2
        assert (result.deduplicationEnabled, result.message_ttl_in_seconds) == (True, 9)
        stored = await policies.get_namespace(NS)
        assert stored == result
        with pytest.raises(PolicyNotFoundError):
            await policies.update_namespace(NamespaceName("acme", "nope"), enable_dedup)


async def test_registry_follows_the_store_and_reports_changes() -> None:
    seen: list[tuple[NamespaceName, bool | None]] = []
    registry = NamespaceRegistry(
        on_change=lambda ns, p: seen.append((ns, None if p is None else p.deduplicationEnabled))
    )
    async with MemoryMetadataStore() as store, anyio.create_task_group() as tg:
        await store.put("/admin/policies/acme/orders", to_json(default_policies("c1", 1)))
        await tg.start(registry.watch, store)
        assert registry.namespaces() == [NS]
        assert seen == [(NS, None)]
        await store.put("/admin/policies/acme/orders", b'{"deduplicationEnabled": true}')
        await store.put("/admin/policies/acme/broken", b"not json")
        await store.put("/admin/policies/acme", b"{}")  # a tenant node: not a namespace
        await anyio.wait_all_tasks_blocked()
        policies = registry.policies(NS)
        assert policies is not None
        assert policies.deduplicationEnabled is True
        broken = NamespaceName("acme", "broken")
        assert registry.policies(broken) == Policies()  # unreadable: defaults, still exists
        await store.delete("/admin/policies/acme/orders")
        await anyio.wait_all_tasks_blocked()
        assert not registry.exists(NS)
        assert seen[-1:] == [(NS, None)]
        registry.apply(NS, Policies(deduplicationEnabled=False))  # the admin API's own write
        assert registry(NS)
        assert seen[-2:] == [(NS, None), (NS, False)]
        tg.cancel_scope.cancel()
