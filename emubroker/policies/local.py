"""A namespace's ``LocalPolicies``: the bundle boundaries this cluster uses (spec §5.1, §6.1).

Pulsar keeps a namespace's bundle layout twice: in its (global) ``Policies`` and in the local
store's ``/admin/local-policies/<tenant>/<ns>``. A broker that first loads a namespace without
local policies copies the boundaries there (``NamespaceBundleFactory.copyToLocalPolicies``); a
split writes the new layout to both, local policies first and compare-and-set on their version
(``NamespaceService.updateNamespaceBundles``). The JSON is Jackson's with ``NON_NULL``:
``{"bundles": {"boundaries": [...], "numBundles": N}, "migrated": false}``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from emubroker.metadata import BadVersionError, NotFoundError
from emubroker.metadata.paths import local_policies_path
from emubroker.policies.namespaces import BundlesData, to_json

if TYPE_CHECKING:
    from emubroker.metadata import MetadataStore
    from emubroker.naming import NamespaceName

__all__ = [
    "LocalPolicies",
    "VersionedLocalPolicies",
    "delete_local_policies",
    "read_local_policies",
    "set_local_policy",
    "write_local_policies",
]


class LocalPolicies(msgspec.Struct, rename="camel"):
    """Pulsar's ``LocalPolicies`` (the emulator acts on ``bundles`` only; the rest is kept)."""

    bundles: BundlesData | None = None
    bookie_affinity_group: dict[str, Any] | None = None
    namespace_anti_affinity_group: str | None = None
    migrated: bool = False


class VersionedLocalPolicies(NamedTuple):
    """Local policies with the node version a compare-and-set write must name."""

    policies: LocalPolicies
    version: int


_DECODER = msgspec.json.Decoder(LocalPolicies)


async def read_local_policies(
    store: MetadataStore, namespace: NamespaceName
) -> VersionedLocalPolicies | None:
    """The namespace's local policies and their version, or None when there are none.

    Raises:
        msgspec.DecodeError: The node is not ``LocalPolicies`` JSON.
    """
    node = await store.get(local_policies_path(namespace))
    if node is None:
        return None
    return VersionedLocalPolicies(_DECODER.decode(node.value), node.version)


async def write_local_policies(
    store: MetadataStore, namespace: NamespaceName, policies: LocalPolicies, version: int
) -> int:
    """Write local policies if the node is still at ``version`` (-1: it must not exist).

    Returns:
        The node's new version.

    Raises:
        BadVersionError: Somebody else wrote (or created) the node in between.
    """
    try:
        result = await store.put(
            local_policies_path(namespace), to_json(policies), expected_version=version
        )
    except BadVersionError:
        raise BadVersionError(f"local policies of {namespace} changed concurrently") from None
    return result.version


async def delete_local_policies(store: MetadataStore, namespace: NamespaceName) -> None:
    """Delete the namespace's local policies, if any (Pulsar's ``deleteLocalPoliciesAsync``)."""
    with contextlib.suppress(NotFoundError):  # no broker ever wrote them
        await store.delete(local_policies_path(namespace))


_CAS_ATTEMPTS = 16
"""Read-modify-write retries before giving up (another writer keeps winning)."""


async def set_local_policy(
    store: MetadataStore, namespace: NamespaceName, field: str, value: Any, *, bundles: BundlesData
) -> None:
    """Set (or with None remove) one field of the local policies, keeping the rest.

    Local policies that do not exist yet are created with ``bundles``, the namespace's layout
    (Pulsar's ``setLocalPoliciesWithCreate`` writes its default layout there, which would
    disagree with a namespace created with another bundle count).

    Raises:
        BadVersionError: Other writers kept winning.
    """
    for _ in range(_CAS_ATTEMPTS):
        found = await read_local_policies(store, namespace)
        if found is None:
            if value is None:
                return
            policies = LocalPolicies(bundles=bundles)
            version = -1
        else:
            policies, version = found
        setattr(policies, field, value)
        try:
            await write_local_policies(store, namespace, policies, version)
        except BadVersionError:
            continue
        return
    raise BadVersionError(f"local policies of {namespace} keep changing concurrently")
