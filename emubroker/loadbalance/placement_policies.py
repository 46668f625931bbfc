"""The placement policies as the leader reads them from the metadata store, at each placement.

Pulsar's ``SimpleResourceAllocationPolicies`` and ``LoadManagerShared.
getNamespaceAntiAffinityGroup`` read through the metadata cache on every ``selectBroker``, so a
policy set over REST applies to the next bundle placed. :func:`read_placement_policies` does
the same reads:

- the cluster's namespace isolation policies (``emubroker.policies.isolation``);
- the anti-affinity group of the bundle's namespace and of every namespace the leader's
  bundle-range cache knows (the counts of a group's namespaces per broker need them, and the
  leader's shedding checks them before it moves a bundle).

A node that does not parse is logged and counts as absent: a bad policy never stops placement.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from emubroker.loadbalance.isolation import (
    NamespaceIsolationPolicies,
    NamespaceIsolationPolicy,
    PlacementPolicies,
)
from emubroker.naming import InvalidNameError, NamespaceName
from emubroker.policies.isolation import read_anti_affinity_group, read_isolation_policies

if TYPE_CHECKING:
    from collections.abc import Iterable

    from emubroker.metadata import MetadataStore
    from emubroker.policies.isolation import NamespaceIsolationData

__all__ = ["isolation_policy", "read_placement_policies"]

log = logging.getLogger(__name__)


def isolation_policy(data: NamespaceIsolationData) -> NamespaceIsolationPolicy:
    """The load manager's view of one stored policy."""
    return NamespaceIsolationPolicy(
        namespaces=tuple(data.namespaces or ()),
        primary=tuple(data.primary or ()),
        secondary=tuple(data.secondary or ()),
        min_limit=data.min_limit,
    )


async def _isolation(store: MetadataStore, cluster: str) -> NamespaceIsolationPolicies:
    try:
        stored = await read_isolation_policies(store, cluster)
    except msgspec.DecodeError as exc:
        log.warning("ignoring the namespace isolation policies of %s: %s", cluster, exc)
        return NamespaceIsolationPolicies()
    if not stored:
        return NamespaceIsolationPolicies()
    return NamespaceIsolationPolicies({name: isolation_policy(p) for name, p in stored.items()})


async def _group(store: MetadataStore, namespace: str) -> str | None:
    try:
        return await read_anti_affinity_group(store, NamespaceName.parse(namespace))
    except InvalidNameError:
        return None
    except msgspec.DecodeError as exc:
        log.warning("ignoring the local policies of %s: %s", namespace, exc)
        return None


async def read_placement_policies(
    store: MetadataStore, cluster: str, namespace: str, known_namespaces: Iterable[str]
) -> PlacementPolicies:
    """The policies placing a bundle of ``namespace`` reads.

    Args:
        store: The metadata store.
        cluster: This cluster's name (``clusterName``).
        namespace: The namespace of the bundle being placed (``tenant/ns``).
        known_namespaces: The namespaces the leader's bundle-range cache holds bundles of.

    Raises:
        MetadataStoreError: The store failed.
    """
    groups: dict[str, str] = {}
    for name in sorted({namespace, *known_namespaces}):
        group = await _group(store, name)
        if group is not None:
            groups[name] = group
    return PlacementPolicies(
        isolation=await _isolation(store, cluster), anti_affinity_groups=groups
    )
