"""Clusters, tenants and namespace policies: Pulsar's JSON shapes and where they live.

The metadata layout is Pulsar's (:mod:`emubroker.metadata.paths`): ``ClusterData`` at
``/admin/clusters/<cluster>``, ``TenantInfo`` at ``/admin/policies/<tenant>`` and a namespace's
``Policies`` at ``/admin/policies/<tenant>/<namespace>``, all JSON. Field names are Pulsar's
(``pulsar-common`` ``policies.data``): camelCase for clusters and tenants, the mixed snake/camel
names of ``Policies`` exactly as its Java fields are spelled. Pulsar's object mapper omits null
fields (``Include.NON_NULL``); :func:`to_json` does the same, so what we store and serve reads like
a Pulsar broker's.

:class:`PolicyStore` is the typed read/write API the admin REST layer uses; it knows paths and
versions, not HTTP. The broker's synchronous view of every namespace and its policies is
:class:`emubroker.namespace_registry.NamespaceRegistry`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Final

import msgspec

from emubroker.metadata import BadVersionError, NotFoundError
from emubroker.metadata.paths import (
    CLUSTERS_ROOT,
    POLICIES_ROOT,
    cluster_path,
    namespace_path,
    tenant_path,
)
from emubroker.naming import NamespaceName, bundle_boundaries

if TYPE_CHECKING:
    from collections.abc import Callable

    from emubroker.metadata import MetadataStore

__all__ = [
    "AuthAction",
    "AuthPolicies",
    "BundlesData",
    "ClusterData",
    "Policies",
    "PolicyExistsError",
    "PolicyNotFoundError",
    "PolicyStore",
    "PolicyStoreError",
    "SchemaCompatibilityStrategy",
    "TenantInfo",
    "bundles_data",
    "decode_policies",
    "default_policies",
    "to_json",
]

_CAS_ATTEMPTS: Final = 16
"""Read-modify-write retries on concurrent modification before giving up (another writer keeps
winning, which only a runaway loop elsewhere would cause)."""


class SchemaCompatibilityStrategy(enum.StrEnum):
    """Pulsar's ``SchemaCompatibilityStrategy`` names (``UNDEFINED``: use the broker's default)."""

    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


class ClusterData(msgspec.Struct, rename="camel"):
    """Pulsar's ``ClusterData`` (the connection fields; TLS key stores are not emulated)."""

    service_url: str | None = None
    service_url_tls: str | None = None
    broker_service_url: str | None = None
    broker_service_url_tls: str | None = None
    proxy_service_url: str | None = None
    proxy_protocol: str | None = None
    authentication_plugin: str | None = None
    authentication_parameters: str | None = None
    peer_cluster_names: list[str] | None = None
    broker_client_tls_enabled: bool = False
    tls_allow_insecure_connection: bool = False
    listener_name: str | None = None


class TenantInfo(msgspec.Struct, rename="camel"):
    """Pulsar's ``TenantInfo``: who administers the tenant and where its namespaces may live."""

    admin_roles: list[str] = msgspec.field(default_factory=list)
    allowed_clusters: list[str] | None = None


class BundlesData(msgspec.Struct, rename="camel"):
    """Pulsar's ``BundlesData``: sorted boundaries as ``0x%08x`` strings, and their count - 1."""

    boundaries: list[str] | None = None
    num_bundles: int = 0


class AuthAction(enum.StrEnum):
    """Pulsar's ``AuthAction``: what a permission lets a role do."""

    produce = "produce"
    consume = "consume"
    functions = "functions"
    sources = "sources"
    sinks = "sinks"
    packages = "packages"


class AuthPolicies(msgspec.Struct):
    """Pulsar's ``AuthPolicies``: the permissions that authorization reads (``emubroker.auth``).

    Attributes:
        namespace_auth: ``{role: actions}`` on every topic of the namespace.
        destination_auth: ``{complete topic name: {role: actions}}``.
        subscription_auth_roles: ``{subscription: roles}``: only these roles may consume
            through that subscription.
    """

    namespace_auth: dict[str, list[AuthAction]] = msgspec.field(default_factory=dict)
    destination_auth: dict[str, dict[str, list[AuthAction]]] = msgspec.field(default_factory=dict)
    subscription_auth_roles: dict[str, list[str]] = msgspec.field(default_factory=dict)


class Policies(msgspec.Struct, kw_only=True):
    """A namespace's ``Policies``, under Pulsar's JSON names.

    The fields the emulator acts on are typed (bundles, replication clusters, deduplication,
    schema compatibility); the others keep whatever value they were given (``Any``), so a policy
    set through the REST API reads back unchanged. New fields go last (STYLE.md §1.6).
    """

    auth_policies: AuthPolicies = msgspec.field(default_factory=AuthPolicies)
    replication_clusters: list[str] = msgspec.field(default_factory=list)
    allowed_clusters: list[str] = msgspec.field(default_factory=list)
    bundles: BundlesData | None = None
    backlog_quota_map: dict[str, Any] = msgspec.field(default_factory=dict)
    clusterDispatchRate: dict[str, Any] = msgspec.field(default_factory=dict)
    topicDispatchRate: dict[str, Any] = msgspec.field(default_factory=dict)
    subscriptionDispatchRate: dict[str, Any] = msgspec.field(default_factory=dict)
    replicatorDispatchRate: dict[str, Any] = msgspec.field(default_factory=dict)
    clusterSubscribeRate: dict[str, Any] = msgspec.field(default_factory=dict)
    persistence: Any = None
    deduplicationEnabled: bool | None = None
    autoTopicCreationOverride: Any = None
    autoSubscriptionCreationOverride: Any = None
    publishMaxMessageRate: dict[str, Any] = msgspec.field(default_factory=dict)
    latency_stats_sample_rate: dict[str, Any] = msgspec.field(default_factory=dict)
    message_ttl_in_seconds: int | None = None
    subscription_expiration_time_minutes: int | None = None
    retention_policies: Any = None
    deleted: bool = False
    encryption_required: bool = False
    delayed_delivery_policies: Any = None
    inactive_topic_policies: Any = None
    subscription_auth_mode: str = "None"
    max_producers_per_topic: int | None = None
    max_consumers_per_topic: int | None = None
    max_consumers_per_subscription: int | None = None
    max_unacked_messages_per_consumer: int | None = None
    max_unacked_messages_per_subscription: int | None = None
    max_subscriptions_per_topic: int | None = None
    compaction_threshold: int | None = None
    offload_threshold: int = -1
    offload_threshold_in_seconds: int = -1
    offload_deletion_lag_ms: int | None = None
    max_topics_per_namespace: int | None = None
    schema_auto_update_compatibility_strategy: str | None = None
    schema_compatibility_strategy: SchemaCompatibilityStrategy = (
        SchemaCompatibilityStrategy.UNDEFINED
    )
    is_allow_auto_update_schema: bool | None = None
    schema_validation_enforced: bool = False
    offload_policies: Any = None
    deduplicationSnapshotIntervalSeconds: int | None = None
    subscription_types_enabled: list[str] = msgspec.field(default_factory=list)
    properties: dict[str, str] = msgspec.field(default_factory=dict)
    resource_group_name: str | None = None
    migrated: bool = False
    dispatcherPauseOnAckStatePersistentEnabled: bool | None = None
    entryFilters: Any = None


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def to_json(value: Any) -> bytes:
    """Encode as Pulsar does: JSON without null-valued fields (``Include.NON_NULL``)."""
    return msgspec.json.encode(_drop_nulls(msgspec.to_builtins(value)))


def bundles_data(boundaries: tuple[int, ...] | list[int]) -> BundlesData:
    """``BundlesData`` for sorted integer boundaries (first 0, last ``0xffffffff``)."""
    return BundlesData([f"0x{b:08x}" for b in boundaries], len(boundaries) - 1)


_CLUSTER = msgspec.json.Decoder(ClusterData)
_TENANT = msgspec.json.Decoder(TenantInfo)
_POLICIES = msgspec.json.Decoder(Policies)


def decode_policies(raw: bytes) -> Policies:
    """Decode stored namespace policies.

    Raises:
        msgspec.DecodeError: Not JSON, or a known field has the wrong type.
    """
    return _POLICIES.decode(raw)


class PolicyStoreError(Exception):
    """Base of the policy store's errors; the message names the entity."""


class PolicyNotFoundError(PolicyStoreError):
    """The cluster, tenant or namespace does not exist."""


class PolicyExistsError(PolicyStoreError):
    """The cluster, tenant or namespace already exists."""


class PolicyStore:
    """Typed reads and writes of clusters, tenants and namespace policies.

    Creates are conditional on absence and updates are compare-and-set on the node version, so
    concurrent admin calls on several brokers never lose a write.

    Args:
        store: A metadata store session.
    """

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    # ---- generic helpers ----------------------------------------------------------------------

    async def _names(self, root: str) -> list[str]:
        return [
            n for n in await self._store.children(root) if await self._store.exists(f"{root}/{n}")
        ]

    async def _create(self, path: str, value: Any, what: str) -> None:
        try:
            await self._store.put(path, to_json(value), expected_version=-1)
        except BadVersionError:
            raise PolicyExistsError(f"{what} already exists") from None

    async def _delete(self, path: str, what: str) -> None:
        try:
            await self._store.delete(path)
        except NotFoundError:
            raise PolicyNotFoundError(f"{what} does not exist") from None

    # ---- clusters -----------------------------------------------------------------------------

    async def clusters(self) -> list[str]:
        """Every cluster name, sorted."""
        return await self._names(CLUSTERS_ROOT)

    async def get_cluster(self, name: str) -> ClusterData | None:
        """A cluster's data, or None."""
        node = await self._store.get(cluster_path(name))
        return None if node is None else _CLUSTER.decode(node.value)

    async def create_cluster(self, name: str, data: ClusterData) -> None:
        """Create a cluster.

        Raises:
            PolicyExistsError: It exists.
        """
        await self._create(cluster_path(name), data, "Cluster")

    async def update_cluster(self, name: str, data: ClusterData) -> None:
        """Replace an existing cluster's data.

        Raises:
            PolicyNotFoundError: No such cluster.
        """
        path = cluster_path(name)
        node = await self._store.get(path)
        if node is None:
            raise PolicyNotFoundError("Cluster does not exist")
        await self._store.put(path, to_json(data))

    async def delete_cluster(self, name: str) -> None:
        """Delete a cluster.

        Raises:
            PolicyNotFoundError: No such cluster.
        """
        await self._delete(cluster_path(name), "Cluster")

    # ---- tenants ------------------------------------------------------------------------------

    async def tenants(self) -> list[str]:
        """Every tenant name, sorted."""
        return await self._names(POLICIES_ROOT)

    async def get_tenant(self, name: str) -> TenantInfo | None:
        """A tenant's info, or None."""
        node = await self._store.get(tenant_path(name))
        return None if node is None else _TENANT.decode(node.value)

    async def create_tenant(self, name: str, info: TenantInfo) -> None:
        """Create a tenant.

        Raises:
            PolicyExistsError: It exists.
        """
        await self._create(tenant_path(name), info, "Tenant")

    async def update_tenant(self, name: str, info: TenantInfo) -> None:
        """Replace an existing tenant's info.

        Raises:
            PolicyNotFoundError: No such tenant.
        """
        path = tenant_path(name)
        if await self._store.get(path) is None:
            raise PolicyNotFoundError(f"Tenant {name} not found")
        await self._store.put(path, to_json(info))

    async def delete_tenant(self, name: str) -> None:
        """Delete a tenant (the caller checks that it has no namespaces).

        Raises:
            PolicyNotFoundError: No such tenant.
        """
        await self._delete(tenant_path(name), "Tenant")

    # ---- namespaces ---------------------------------------------------------------------------

    async def namespaces(self, tenant: str) -> list[NamespaceName]:
        """The tenant's namespaces, sorted."""
        return [NamespaceName(tenant, n) for n in await self._names(tenant_path(tenant))]

    async def get_namespace(self, namespace: NamespaceName) -> Policies | None:
        """A namespace's policies, or None."""
        node = await self._store.get(namespace_path(namespace))
        return None if node is None else decode_policies(node.value)

    async def create_namespace(self, namespace: NamespaceName, policies: Policies) -> None:
        """Create a namespace with its policies.

        Raises:
            PolicyExistsError: It exists.
        """
        await self._create(namespace_path(namespace), policies, "Namespace")

    async def update_namespace(
        self, namespace: NamespaceName, change: Callable[[Policies], Policies]
    ) -> Policies:
        """Apply ``change`` to a namespace's policies with compare-and-set.

        Returns:
            The policies written.

        Raises:
            PolicyNotFoundError: No such namespace.
            PolicyStoreError: Other writers kept winning.
        """
        path = namespace_path(namespace)
        for _ in range(_CAS_ATTEMPTS):
            node = await self._store.get(path)
            if node is None:
                raise PolicyNotFoundError("Namespace does not exist")
            policies = change(decode_policies(node.value))
            try:
                await self._store.put(path, to_json(policies), expected_version=node.version)
            except BadVersionError:
                continue
            return policies
        raise PolicyStoreError("Concurrent modification")

    async def delete_namespace(self, namespace: NamespaceName) -> None:
        """Delete a namespace's policies (the caller checks that it has no topics).

        Raises:
            PolicyNotFoundError: No such namespace.
        """
        await self._delete(namespace_path(namespace), "Namespace")


def default_policies(cluster: str, num_bundles: int) -> Policies:
    """What a new namespace gets when created without policies (Pulsar's defaults)."""
    return Policies(
        bundles=bundles_data(bundle_boundaries(num_bundles)), replication_clusters=[cluster]
    )
