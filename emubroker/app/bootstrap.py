"""The metadata a new cluster starts with, as Pulsar lays it out (spec/pulsar-behaviour.md §6.1).

Cluster ``/admin/clusters/<cluster>``, tenant ``/admin/policies/public`` and namespaces
``/admin/policies/public/default`` and ``/admin/policies/public/default-2``, system tenant
``/admin/policies/pulsar`` and namespace ``/admin/policies/pulsar/system`` (what
``pulsar standalone`` creates: ``pulsar-admin tenants list`` answers ``public`` and
``pulsar``), as msgspec JSON, written only when missing.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from emubroker.auth.broker_client import broker_client_role
from emubroker.metadata import BadVersionError
from emubroker.metadata.paths import (
    cluster_path,
    namespace_path,
    partitioned_topic_path,
    tenant_path,
)
from emubroker.naming import NamespaceName, TopicName, bundle_boundaries
from emubroker.policies import ClusterData, Policies, TenantInfo, bundles_data, to_json

if TYPE_CHECKING:
    from emubroker.config import BrokerConfig
    from emubroker.metadata import MetadataStore

log = logging.getLogger(__name__)

DEFAULT_TENANTS = ("public", "pulsar")
DEFAULT_NAMESPACES = (
    NamespaceName("public", "default"),
    NamespaceName("public", "default-2"),
    NamespaceName("pulsar", "system"),
)
"""What ``pulsar standalone`` creates at first start."""

TRANSACTION_COORDINATOR_ASSIGN = TopicName.parse(
    "persistent://pulsar/system/transaction_coordinator_assign"
)
"""The partitioned topic whose partitions name the transaction coordinators (a client asks its
partition count, then connects to each coordinator)."""
CLUSTER_TRANSACTION_COORDINATORS = 16
"""Its partitions in a cluster: ``pulsar initialize-cluster-metadata`` creates it with
``--initial-num-transaction-coordinators`` (16) whether or not the brokers enable transactions,
so that a client enabling them there is told "Transactions are not enabled." by a coordinator;
``pulsar standalone`` creates it only with transactions enabled, which emubroker never is."""


def may_bootstrap(config: BrokerConfig, *, wall_time: float) -> bool:
    """Whether ``pulsar standalone`` would create its defaults under this configuration.

    Pulsar's standalone creates them through its own admin client, which authenticates with
    ``brokerClientAuthenticationPlugin`` (``auth.broker_client.broker_client_role``: without
    one, as ``anonymousUserRole``); with authorization on, that role must be a super-user.
    Otherwise Pulsar logs the refusal and starts without them (the operator creates them over
    REST).
    """
    if not config.authenticationEnabled:
        return True
    role = broker_client_role(config, wall_time=wall_time)
    if not role:
        return False
    return not config.authorizationEnabled or role in config.csv(config.superUserRoles)


async def bootstrap_metadata(
    store: MetadataStore,
    config: BrokerConfig,
    *,
    http_url: str,
    tls_urls: tuple[str, str] = ("", ""),
    wall_time: float = 0.0,
    transaction_coordinators: int = 0,
) -> None:
    """Create the cluster, the ``public`` and ``pulsar`` tenants and their namespaces if missing.

    Every node is created with ``expected_version=-1``: brokers of a cluster starting together
    against one empty store race here, and the first creator's value must stand (a plain write
    after an ``exists`` check would let a later broker overwrite what an earlier one, or an
    operator in between, wrote).

    Args:
        store: The metadata store.
        config: The broker configuration.
        http_url: The admin API's ``http://`` URL (``serviceUrl``).
        tls_urls: ``(https URL, pulsar+ssl URL)``, empty without TLS ports.
        wall_time: Now, epoch seconds (the broker client's token may expire).
        transaction_coordinators: Partitions of ``TRANSACTION_COORDINATOR_ASSIGN``, created
            if missing; 0: not created.
    """
    if not may_bootstrap(config, wall_time=wall_time):
        log.warning(
            "authentication is on and the broker's own client (brokerClientAuthentication"
            "Plugin, else the anonymous role %r) may not administer the cluster: the cluster, "
            "tenant 'public' and its namespaces are not created (create them over REST as a "
            "super-user)",
            config.anonymousUserRole,
        )
        return
    cluster = ClusterData(
        service_url=http_url or None,
        service_url_tls=tls_urls[0] or None,
        broker_service_url=f"pulsar://{config.advertised_host()}:{config.brokerServicePort}",
        broker_service_url_tls=tls_urls[1] or None,
    )
    policies = Policies(
        bundles=bundles_data(bundle_boundaries(config.defaultNumberOfNamespaceBundles)),
        replication_clusters=[config.clusterName],
    )
    nodes: list[tuple[str, object]] = [
        (cluster_path(config.clusterName), cluster),
        *(
            (tenant_path(tenant), TenantInfo([], [config.clusterName]))
            for tenant in DEFAULT_TENANTS
        ),
        *((namespace_path(namespace), policies) for namespace in DEFAULT_NAMESPACES),
    ]
    if transaction_coordinators:
        nodes.append(
            (
                partitioned_topic_path(TRANSACTION_COORDINATOR_ASSIGN),
                {"partitions": transaction_coordinators, "deleted": False},
            )
        )
    for path, value in nodes:
        if await store.exists(path):
            continue
        with contextlib.suppress(BadVersionError):  # another broker created it first
            await store.put(path, to_json(value), expected_version=-1)
