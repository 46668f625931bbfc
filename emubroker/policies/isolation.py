"""Namespace isolation policies and anti-affinity groups: Pulsar's JSON and where they live.

- A cluster's isolation policies are one node,
  ``/admin/clusters/<cluster>/namespaceIsolationPolicies``: a JSON object of policy name ->
  ``NamespaceIsolationData`` (snake_case fields, as Pulsar's ``NamespaceIsolationDataImpl``).
  :func:`set_isolation_policy` and :func:`delete_isolation_policy` change one entry with
  compare-and-set, so concurrent admin calls on several brokers never lose one.
- A namespace's anti-affinity group is ``namespaceAntiAffinityGroup`` of its local policies
  (``/admin/local-policies/<tenant>/<ns>``), beside the bundle layout.

The load manager's placement reads both (``loadbalance.ownership.placement_policies``).
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from typing import TYPE_CHECKING, Final

import msgspec

from emubroker.metadata import BadVersionError, NotFoundError
from emubroker.metadata.paths import cluster_path
from emubroker.policies.local import read_local_policies, set_local_policy
from emubroker.policies.namespaces import to_json

if TYPE_CHECKING:
    from collections.abc import Iterable

    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceName
    from emubroker.policies.namespaces import BundlesData

__all__ = [
    "MIN_AVAILABLE",
    "UNLOAD_SCOPES",
    "AutoFailoverPolicyData",
    "InvalidIsolationDataError",
    "NamespaceIsolationData",
    "decode_isolation_policies",
    "delete_isolation_policies",
    "delete_isolation_policy",
    "isolation_policies_path",
    "namespaces_to_unload",
    "read_anti_affinity_group",
    "read_isolation_policies",
    "set_anti_affinity_group",
    "set_isolation_policy",
]

UNLOAD_SCOPES: Final = ("all_matching", "none", "changed")
"""``NamespaceIsolationPolicyUnloadScope``; absent (or unknown: Jackson reads it as null) acts
as ``changed``."""

MIN_AVAILABLE: Final = "min_available"
"""The only auto-failover policy type Pulsar knows (``AutoFailoverPolicyFactory``)."""

_CAS_ATTEMPTS: Final = 16


class InvalidIsolationDataError(ValueError):
    """A policy Pulsar's ``NamespaceIsolationDataImpl.validate`` would refuse."""


class AutoFailoverPolicyData(msgspec.Struct, omit_defaults=True):
    """``AutoFailoverPolicyData``: ``min_available`` with ``min_limit`` and ``usage_threshold``."""

    policy_type: str | None = None
    parameters: dict[str, str] | None = None


class NamespaceIsolationData(msgspec.Struct, omit_defaults=True):
    """One isolation policy as Pulsar stores and serves it (``NamespaceIsolationDataImpl``)."""

    namespaces: list[str] | None = None
    primary: list[str] | None = None
    secondary: list[str] | None = None
    auto_failover_policy: AutoFailoverPolicyData | None = None
    unload_scope: str | None = None

    def validate(self) -> None:
        """Pulsar's checks: namespaces and primaries given, regexes compile, ``min_available``.

        Raises:
            InvalidIsolationDataError: What is wrong.
        """
        if not self.namespaces:
            raise InvalidIsolationDataError("namespaces are required")
        if not self.primary:
            raise InvalidIsolationDataError("primary brokers are required")
        if self.secondary is None:
            raise InvalidIsolationDataError("secondary brokers are required (may be empty)")
        for pattern in [*self.namespaces, *self.primary, *self.secondary]:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise InvalidIsolationDataError(f"invalid policy regex {pattern}: {exc}") from None
        failover = self.auto_failover_policy
        if failover is None or failover.parameters is None:
            raise InvalidIsolationDataError("auto_failover_policy with parameters is required")
        if failover.policy_type != MIN_AVAILABLE:
            raise InvalidIsolationDataError(
                f"Unrecognized auto_failover_policy: {failover.policy_type}"
            )
        for key in ("min_limit", "usage_threshold"):
            try:
                int(failover.parameters[key])
            except (KeyError, ValueError):
                raise InvalidIsolationDataError(f"{key} must be an integer parameter") from None

    @property
    def min_limit(self) -> int:
        """``MinAvailablePolicy.min_limit`` (0 when absent: never fail over)."""
        failover = self.auto_failover_policy
        try:
            return int((failover.parameters or {})["min_limit"]) if failover else 0
        except (KeyError, ValueError):
            return 0


def namespaces_to_unload(
    namespaces: Iterable[str],
    new: NamespaceIsolationData,
    old: NamespaceIsolationData | None,
) -> list[str]:
    """Which of the cluster's namespaces setting ``new`` (over ``old``) unloads.

    Pulsar's ``ClustersBase.filterAndUnloadMatchedNamespaceAsync``: nothing with
    ``unload_scope`` ``none``; with ``all_matching``, or when the primary brokers changed, every
    namespace a regex of either policy matches; otherwise (``changed``, the default) those
    matched by a regex that was added or removed.

    Args:
        namespaces: The namespaces of the cluster (``tenant/ns``).
        new: The policy just stored.
        old: The policy it replaced, if any.
    """
    if new.unload_scope == "none":
        return []
    new_regexes = set(new.namespaces or ())
    old_regexes = set(old.namespaces or ()) if old is not None else set()
    combined = new_regexes | old_regexes
    primaries_changed = old is not None and Counter(old.primary or ()) != Counter(new.primary or ())
    if new.unload_scope != "all_matching" and not primaries_changed:
        combined -= new_regexes & old_regexes
    return [ns for ns in namespaces if any(re.fullmatch(r, ns) for r in combined)]


_POLICIES = msgspec.json.Decoder(dict[str, NamespaceIsolationData])


def isolation_policies_path(cluster: str) -> str:
    """``/admin/clusters/<cluster>/namespaceIsolationPolicies``."""
    return f"{cluster_path(cluster)}/namespaceIsolationPolicies"


def decode_isolation_policies(raw: bytes) -> dict[str, NamespaceIsolationData]:
    """The policies of a stored node.

    Raises:
        msgspec.DecodeError: Not the JSON Pulsar stores.
    """
    return _POLICIES.decode(raw)


async def read_isolation_policies(
    store: MetadataStore, cluster: str
) -> dict[str, NamespaceIsolationData] | None:
    """The cluster's policies by name; None when the node does not exist.

    Raises:
        msgspec.DecodeError: The node is not the JSON Pulsar stores.
    """
    node = await store.get(isolation_policies_path(cluster))
    return None if node is None else decode_isolation_policies(node.value)


async def _update(
    store: MetadataStore, cluster: str, change: dict[str, NamespaceIsolationData | None]
) -> dict[str, NamespaceIsolationData]:
    """Apply ``change`` (None deletes) with compare-and-set; the entries it replaced or removed."""
    path = isolation_policies_path(cluster)
    for _ in range(_CAS_ATTEMPTS):
        node = await store.get(path)
        policies = {} if node is None else decode_isolation_policies(node.value)
        previous = {name: policies[name] for name in change if name in policies}
        changed = False
        for name, data in change.items():
            if data is None:
                changed |= policies.pop(name, None) is not None
            else:
                policies[name] = data
                changed = True
        if not changed:
            return previous
        try:
            await store.put(
                path, to_json(policies), expected_version=-1 if node is None else node.version
            )
        except BadVersionError:
            continue
        return previous
    raise BadVersionError(f"{path} keeps changing concurrently")


async def set_isolation_policy(
    store: MetadataStore, cluster: str, name: str, data: NamespaceIsolationData
) -> NamespaceIsolationData | None:
    """Create or replace one policy (validated first); returns the one it replaced.

    Raises:
        InvalidIsolationDataError: The policy is invalid.
    """
    data.validate()
    return (await _update(store, cluster, {name: data})).get(name)


async def delete_isolation_policy(store: MetadataStore, cluster: str, name: str) -> bool:
    """Delete one policy; whether it existed."""
    return bool(await _update(store, cluster, {name: None}))


async def delete_isolation_policies(store: MetadataStore, cluster: str) -> None:
    """Delete all of a cluster's policies (with the cluster, as Pulsar's cluster delete does)."""
    with contextlib.suppress(NotFoundError):
        await store.delete(isolation_policies_path(cluster))


async def read_anti_affinity_group(store: MetadataStore, namespace: NamespaceName) -> str | None:
    """The namespace's anti-affinity group, None when it has none.

    Raises:
        msgspec.DecodeError: The local policies are not ``LocalPolicies`` JSON.
    """
    found = await read_local_policies(store, namespace)
    return None if found is None else found.policies.namespace_anti_affinity_group


async def set_anti_affinity_group(
    store: MetadataStore, namespace: NamespaceName, group: str | None, *, bundles: BundlesData
) -> None:
    """Set (or with None remove) the group in the local policies, keeping the rest.

    Local policies that do not exist yet are created with ``bundles``, the namespace's layout
    (Pulsar's ``setLocalPoliciesWithCreate`` writes its default layout there, which would
    disagree with a namespace created with another bundle count).
    """
    await set_local_policy(
        store, namespace, "namespace_anti_affinity_group", group, bundles=bundles
    )
