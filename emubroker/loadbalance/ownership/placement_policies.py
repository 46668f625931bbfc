"""The placement policies, cached from the metadata store and kept current by a watch.

Placement reads, at every choice, the cluster's namespace isolation policies, the anti-affinity
group of the bundle's namespace and of every namespace the leader's bundle-range cache holds
(the counts of a group's namespaces per broker need them), and the failure domains. Pulsar reads
them through its metadata cache (``SimpleResourceAllocationPolicies``, ``LoadManagerShared.
getNamespaceAntiAffinityGroup``, and ``brokerToFailureDomainMap``, which a store listener
refreshes). :class:`PlacementPolicyCache` does the same: it reads everything once, then one
watch on ``/admin`` applies each change to what it caches:

- ``/admin/local-policies/<tenant>/<ns>`` written or deleted: that namespace's group, re-read;
- ``/admin/clusters/<cluster>/namespaceIsolationPolicies``: the isolation policies, re-read;
- anything under ``/admin/clusters/<cluster>/failureDomain``: the broker -> domain map, re-read.

A choice then costs no store read: :meth:`PlacementPolicyCache.policies` answers the current
:class:`~emubroker.loadbalance.strategies.isolation.PlacementPolicies`, rebuilt only when a policy
changes. A change made through any broker reaches every broker's cache once its watch delivers it
(the same delay a Pulsar metadata cache has). A node that does not parse is logged and counts as
absent: a bad policy never stops placement.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import msgspec

from emubroker.loadbalance.strategies.isolation import (
    NamespaceIsolationPolicies,
    NamespaceIsolationPolicy,
    PlacementPolicies,
)
from emubroker.metadata import WatchOverflowError
from emubroker.metadata.paths import LOCAL_POLICIES_ROOT
from emubroker.naming import InvalidNameError, NamespaceName
from emubroker.policies.failure_domains import failure_domains_path, read_failure_domains
from emubroker.policies.isolation import (
    isolation_policies_path,
    read_anti_affinity_group,
    read_isolation_policies,
)

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from emubroker.metadata import MetadataStore
    from emubroker.policies.isolation import NamespaceIsolationData

__all__ = ["PlacementPolicyCache", "isolation_policy"]

log = logging.getLogger(__name__)

WATCHED_PREFIX = "/admin"
"""Local policies and the cluster's policy nodes both live below it: one watch serves both."""


def isolation_policy(data: NamespaceIsolationData) -> NamespaceIsolationPolicy:
    """The load manager's view of one stored policy."""
    return NamespaceIsolationPolicy(
        namespaces=tuple(data.namespaces or ()),
        primary=tuple(data.primary or ()),
        secondary=tuple(data.secondary or ()),
        min_limit=data.min_limit,
    )


class PlacementPolicyCache:
    """The placement policies of one cluster, read once and kept current (module docstring).

    Args:
        store: The metadata store.
        cluster: This cluster's name (``clusterName``).
    """

    def __init__(self, store: MetadataStore, cluster: str) -> None:
        self._store = store
        self._cluster = cluster
        self._isolation = NamespaceIsolationPolicies()
        self._groups: dict[str, str] = {}
        self._domains: dict[str, str] = {}
        self._current = PlacementPolicies()

    def policies(self) -> PlacementPolicies:
        """The current policies (no store read)."""
        return self._current

    async def watch(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Load the policies, then follow their changes until cancelled.

        Started once everything is loaded: placement never sees a half-read cache.

        Raises:
            MetadataStoreError: The store failed.
        """
        while True:
            async with self._store.watch(WATCHED_PREFIX) as notifications:
                await self.load()  # after subscribing: no change can fall in between
                task_status.started()
                task_status = anyio.TASK_STATUS_IGNORED
                try:
                    async for note in notifications:
                        await self._apply(note.path)
                except WatchOverflowError:
                    log.warning("placement policy watch overflowed; re-reading")
                    continue
            return  # the store was closed

    async def load(self) -> None:
        """Read every policy placement uses.

        Raises:
            MetadataStoreError: The store failed.
        """
        self._isolation = await self._read_isolation()
        self._domains = await self._read_domains()
        groups: dict[str, str] = {}
        for tenant in await self._store.children(LOCAL_POLICIES_ROOT):
            for local in await self._store.children(f"{LOCAL_POLICIES_ROOT}/{tenant}"):
                group = await self._read_group(f"{tenant}/{local}")
                if group is not None:
                    groups[f"{tenant}/{local}"] = group
        self._groups = groups
        self._rebuild()

    async def _apply(self, path: str) -> None:
        if path.startswith(LOCAL_POLICIES_ROOT + "/"):
            namespace = path[len(LOCAL_POLICIES_ROOT) + 1 :]
            if namespace.count("/") != 1:
                return  # a tenant node
            # Read the node rather than trust the kind: a later write may have replaced it.
            group = await self._read_group(namespace)
            if group == self._groups.get(namespace):
                return  # a bundle layout change, most often
            if group is None:
                del self._groups[namespace]
            else:
                self._groups[namespace] = group
        elif path == isolation_policies_path(self._cluster):
            self._isolation = await self._read_isolation()
        elif path.startswith(failure_domains_path(self._cluster)):
            self._domains = await self._read_domains()
        else:
            return
        self._rebuild()

    def _rebuild(self) -> None:
        self._current = PlacementPolicies(
            isolation=self._isolation,
            anti_affinity_groups=dict(self._groups),
            failure_domains=dict(self._domains),
        )

    async def _read_isolation(self) -> NamespaceIsolationPolicies:
        try:
            stored = await read_isolation_policies(self._store, self._cluster)
        except msgspec.DecodeError as exc:
            log.warning("ignoring the namespace isolation policies of %s: %s", self._cluster, exc)
            return NamespaceIsolationPolicies()
        if not stored:
            return NamespaceIsolationPolicies()
        return NamespaceIsolationPolicies({n: isolation_policy(p) for n, p in stored.items()})

    async def _read_domains(self) -> dict[str, str]:
        domains: dict[str, str] = {}
        for name, domain in (await read_failure_domains(self._store, self._cluster)).items():
            for broker in domain.brokers or ():
                domains[broker] = name
        return domains

    async def _read_group(self, namespace: str) -> str | None:
        try:
            return await read_anti_affinity_group(self._store, NamespaceName.parse(namespace))
        except InvalidNameError:
            return None
        except msgspec.DecodeError as exc:
            log.warning("ignoring the local policies of %s: %s", namespace, exc)
            return None
