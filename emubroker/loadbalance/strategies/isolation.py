"""Namespace placement policies the modular load manager honours (spec §3.2 steps 2, 4, 5).

- Namespace isolation policies (``/admin/clusters/<cluster>/namespaceIsolationPolicies``): a
  namespace matching a policy may only go to its primary brokers, plus its secondaries when
  fewer than ``min_limit`` primaries are available; brokers that are primary for any policy
  take no other namespace.
- Anti-affinity groups (``LocalPolicies.namespaceAntiAffinityGroup``): namespaces of one group
  go to brokers (and failure domains) owning the fewest namespaces of that group.
- ``BundleRangeCache``: broker -> namespace -> bundle ranges it owns or was given, for the
  even distribution of a namespace's bundles and for the anti-affinity counts.

Regular expressions are Java's ``String.matches`` (whole-string match); Python's ``re`` agrees
on the patterns operators write (literal host names, ``.*``, character classes).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "BundleRangeCache",
    "NamespaceIsolationPolicies",
    "NamespaceIsolationPolicy",
    "PlacementPolicies",
    "bundle_range_of",
    "namespace_of",
    "re_matches",
]


def _split(bundle: str) -> tuple[str, str]:
    index = bundle.rfind("/")
    if index == -1:
        raise ValueError(f"Invalid bundle name format: {bundle}")
    return bundle[:index], bundle[index + 1 :]


def namespace_of(bundle: str) -> str:
    """``tenant/ns`` of ``tenant/ns/0x..._0x...`` (``getNamespaceNameFromBundleName``).

    Raises:
        ValueError: The name has no ``/``.
    """
    return _split(bundle)[0]


def bundle_range_of(bundle: str) -> str:
    """``0x..._0x...`` of ``tenant/ns/0x..._0x...`` (``getBundleRangeFromBundleName``).

    Raises:
        ValueError: The name has no ``/``.
    """
    return _split(bundle)[1]


def re_matches(patterns: Iterable[str] | None, text: str) -> bool:
    """Whether ``text`` matches one of the regexes whole (Java's ``String.matches``)."""
    return any(re.fullmatch(pattern, text) for pattern in patterns or ())


class NamespaceIsolationPolicy(msgspec.Struct, frozen=True):
    """One isolation policy (``NamespaceIsolationData`` with a ``min_available`` failover).

    Attributes:
        namespaces: Regexes of the namespaces it governs.
        primary: Regexes of its primary broker hosts.
        secondary: Regexes of its secondary broker hosts.
        min_limit: Fail over to secondaries when fewer primaries than this are available.
    """

    namespaces: tuple[str, ...] = ()
    primary: tuple[str, ...] = ()
    secondary: tuple[str, ...] = ()
    min_limit: int = 0

    def is_primary_broker(self, host: str) -> bool:
        """Whether a broker host matches a primary regex."""
        return re_matches(self.primary, host)

    def is_secondary_broker(self, host: str) -> bool:
        """Whether a broker host matches a secondary regex."""
        return re_matches(self.secondary, host)

    def should_failover(self, primaries: int) -> bool:
        """Whether secondaries join because fewer than ``min_limit`` primaries are available."""
        return primaries < self.min_limit


class NamespaceIsolationPolicies(msgspec.Struct, frozen=True):
    """A cluster's isolation policies by name (``SimpleResourceAllocationPolicies``' view)."""

    policies: dict[str, NamespaceIsolationPolicy] = msgspec.field(default_factory=dict)

    def policy_for(self, namespace: str) -> NamespaceIsolationPolicy | None:
        """The first policy whose namespace regexes match ``namespace``."""
        for policy in self.policies.values():
            if re_matches(policy.namespaces, namespace):
                return policy
        return None

    def are_present(self, namespace: str) -> bool:
        """Whether some policy governs ``namespace``."""
        return self.policy_for(namespace) is not None

    def is_shared_broker(self, host: str) -> bool:
        """A broker no policy claims as primary serves namespaces without policies."""
        return not any(p.is_primary_broker(host) for p in self.policies.values())


class BundleRangeCache:
    """Broker -> namespace -> bundle ranges (Pulsar's ``BundleRangeCache``)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, set[str]]] = {}

    def reload_from_bundles(self, broker: str, bundles: Iterable[str]) -> None:
        """Replace a broker's entry with the given bundle names."""
        namespaces: dict[str, set[str]] = {}
        for bundle in bundles:
            namespaces.setdefault(namespace_of(bundle), set()).add(bundle_range_of(bundle))
        self._data[broker] = namespaces

    def add(self, broker: str, namespace: str, bundle_range: str) -> None:
        """Record one more bundle range of ``namespace`` on ``broker``."""
        self._data.setdefault(broker, {}).setdefault(namespace, set()).add(bundle_range)

    def bundle_range_count(self, broker: str, namespace: str) -> int:
        """How many ranges of ``namespace`` ``broker`` has."""
        return len(self._data.get(broker, {}).get(namespace, ()))

    def broker_to_namespaces(self) -> dict[str, list[str]]:
        """Broker -> the namespaces it has bundles of."""
        return {broker: list(namespaces) for broker, namespaces in self._data.items()}

    def remove_broker(self, broker: str) -> None:
        """Forget a broker."""
        self._data.pop(broker, None)


class PlacementPolicies(msgspec.Struct, frozen=True):
    """The policy data placement reads, as one snapshot.

    Attributes:
        isolation: The cluster's namespace isolation policies.
        anti_affinity_groups: Namespace -> its anti-affinity group (namespaces in none are
            absent).
        failure_domains: Broker id -> its failure domain (used with ``failureDomainsEnabled``).
    """

    isolation: NamespaceIsolationPolicies = NamespaceIsolationPolicies()
    anti_affinity_groups: dict[str, str] = msgspec.field(default_factory=dict)
    failure_domains: dict[str, str] = msgspec.field(default_factory=dict)

    def anti_affinity_group(self, namespace: str) -> str | None:
        """The namespace's group, ``None`` if it has none (blank counts as none)."""
        group = self.anti_affinity_groups.get(namespace)
        return group if group and group.strip() else None

    def has_policies(self, bundle: str) -> bool:
        """Whether the bundle's namespace has an isolation policy or an anti-affinity group."""
        namespace = namespace_of(bundle)
        return (
            self.isolation.are_present(namespace) or self.anti_affinity_group(namespace) is not None
        )

    def anti_affinity_counts(
        self, namespace: str, ranges: BundleRangeCache
    ) -> Mapping[str, int] | None:
        """Broker -> namespaces of ``namespace``'s group it has; ``None`` without a group.

        Group names compare case-insensitively, as Pulsar's ``equalsIgnoreCase``.
        """
        group = self.anti_affinity_group(namespace)
        if group is None:
            return None
        counts: dict[str, int] = {}
        for broker, namespaces in ranges.broker_to_namespaces().items():
            for other in namespaces:
                other_group = self.anti_affinity_group(other)
                if other_group is not None and other_group.lower() == group.lower():
                    counts[broker] = counts.get(broker, 0) + 1
        return counts
