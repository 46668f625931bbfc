"""A cluster's failure domains: Pulsar's ``FailureDomainImpl`` JSON and where it lives.

Each domain is one node, ``/admin/clusters/<cluster>/failureDomain/<domain>``, holding
``{"brokers": [...]}`` (broker names as the load manager spells them, ``host:webServicePort``),
as Pulsar's ``ClusterResources.FailureDomainResources`` stores them. The load manager's
placement reads them (``loadbalance.ownership.placement_policies``) when ``failureDomainsEnabled``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import msgspec

from emubroker.metadata import NotFoundError
from emubroker.metadata.paths import cluster_path
from emubroker.policies.namespaces import to_json

if TYPE_CHECKING:
    from emubroker.metadata import MetadataStore

__all__ = [
    "FailureDomain",
    "delete_failure_domain",
    "delete_failure_domains",
    "failure_domains_path",
    "read_failure_domain",
    "read_failure_domains",
    "set_failure_domain",
]


class FailureDomain(msgspec.Struct, omit_defaults=True):
    """Pulsar's ``FailureDomainImpl``: the brokers of one domain."""

    brokers: list[str] | None = None


_DOMAIN = msgspec.json.Decoder(FailureDomain)


def failure_domains_path(cluster: str) -> str:
    """``/admin/clusters/<cluster>/failureDomain``."""
    return f"{cluster_path(cluster)}/failureDomain"


async def read_failure_domain(
    store: MetadataStore, cluster: str, name: str
) -> FailureDomain | None:
    """One domain; None when it does not exist.

    Raises:
        msgspec.DecodeError: The node is not the JSON Pulsar stores.
    """
    node = await store.get(f"{failure_domains_path(cluster)}/{name}")
    return None if node is None else _DOMAIN.decode(node.value)


async def read_failure_domains(store: MetadataStore, cluster: str) -> dict[str, FailureDomain]:
    """Every domain of the cluster by name.

    A node that does not parse is skipped, as Pulsar's list skips a domain it fails to read.
    """
    domains: dict[str, FailureDomain] = {}
    for name in sorted(await store.children(failure_domains_path(cluster))):
        try:
            found = await read_failure_domain(store, cluster, name)
        except msgspec.DecodeError:
            continue
        if found is not None:
            domains[name] = found
    return domains


async def set_failure_domain(
    store: MetadataStore, cluster: str, name: str, domain: FailureDomain
) -> None:
    """Create or replace a domain."""
    await store.put(f"{failure_domains_path(cluster)}/{name}", to_json(domain))


async def delete_failure_domain(store: MetadataStore, cluster: str, name: str) -> bool:
    """Delete a domain; whether it existed."""
    try:
        await store.delete(f"{failure_domains_path(cluster)}/{name}")
    except NotFoundError:
        return False
    return True


async def delete_failure_domains(store: MetadataStore, cluster: str) -> None:
    """Delete every domain of a cluster (with the cluster, as Pulsar's cluster delete does)."""
    path = failure_domains_path(cluster)
    for name in await store.children(path):
        await delete_failure_domain(store, cluster, name)
    with contextlib.suppress(NotFoundError):
        await store.delete(path)
