"""The placement policies over REST: namespace isolation policies and anti-affinity groups.

- ``/admin/v2/clusters/{cluster}/namespaceIsolationPolicies`` (GET: every policy by name) and
  ``.../{policyName}`` (GET, POST to create or replace, DELETE), as Pulsar's ``ClustersBase``:
  an unknown cluster is 404 for the list and 412 for one policy; no policy node is 404
  "NamespaceIsolationPolicies for cluster ... does not exist"; an unknown policy 404 "Cannot find
  NamespaceIsolationPolicy ..."; a policy ``validate()`` refuses is 400 "Invalid format of input
  policy data. policy: ...; data: ...". Super-user only (``admin/access.py``).
- ``/admin/v2/namespaces/{tenant}/{namespace}/antiAffinity`` (GET, POST, DELETE), as Pulsar's
  ``NamespacesBase``: the body of a POST is the group name as plain text (what ``pulsar-admin``
  sends), blank is 412 "antiAffinityGroup can't be empty"; a GET answers the name as plain text
  (Pulsar labels the bare string JSON), or 204 without a group (Pulsar's null). Stored in the
  namespace's local policies; an unknown namespace is 404 "Namespace does not exist".

Setting a policy unloads the cluster's namespaces it may move, as Pulsar's
``filterAndUnloadMatchedNamespaceAsync`` (``policies.isolation.namespaces_to_unload``): by the
policy's ``unload_scope``, ``changed`` by default (the namespaces matched by an added or removed
regex, every matching one when the primaries changed), ``all_matching`` or ``none``. Every owned
bundle of those namespaces is unloaded wherever it is owned (``routes_unload``), so that their
next lookup is placed under the new policy; the call answers 204 once they are. Deleting a
policy unloads nothing (Pulsar's neither).
"""

from __future__ import annotations

import logging

from aiohttp import web

from emubroker.admin.errors import BAD_REQUEST, NOT_FOUND, PRECONDITION_FAILED, RestError
from emubroker.admin.http import (
    context,
    json_response,
    namespace_of,
    no_content,
    read_body,
    read_json,
    valid_name,
)
from emubroker.admin.routes_unload import unload_namespace_bundles
from emubroker.loadbalance.runtime.broker_registry import available_brokers
from emubroker.loadbalance.strategies.isolation import re_matches
from emubroker.naming import NamespaceName, bundle_boundaries
from emubroker.policies import BundlesData, bundles_data, to_json
from emubroker.policies.isolation import (
    UNLOAD_SCOPES,
    InvalidIsolationDataError,
    NamespaceIsolationData,
    delete_isolation_policy,
    namespaces_to_unload,
    read_anti_affinity_group,
    read_isolation_policies,
    set_anti_affinity_group,
    set_isolation_policy,
)

__all__ = ["add_routes", "broker_isolation_data"]

log = logging.getLogger(__name__)


async def _cluster(request: web.Request, missing_status: int) -> str:
    cluster = request.match_info["cluster"]
    if not valid_name(cluster) or await context(request).policies.get_cluster(cluster) is None:
        raise RestError(missing_status, f"Cluster {cluster} does not exist.")
    return cluster


async def _policies(request: web.Request, cluster: str) -> dict[str, NamespaceIsolationData]:
    found = await read_isolation_policies(context(request).metadata, cluster)
    if found is None:
        raise RestError(
            NOT_FOUND, f"NamespaceIsolationPolicies for cluster {cluster} does not exist"
        )
    return found


async def get_isolation_policies(request: web.Request) -> web.Response:
    """``GET .../namespaceIsolationPolicies``: every policy by name."""
    cluster = await _cluster(request, NOT_FOUND)
    return json_response(await _policies(request, cluster))


async def get_isolation_policy(request: web.Request) -> web.Response:
    """``GET .../namespaceIsolationPolicies/{policyName}``."""
    cluster = await _cluster(request, PRECONDITION_FAILED)
    name = request.match_info["policy"]
    policy = (await _policies(request, cluster)).get(name)
    if policy is None:
        raise RestError(
            NOT_FOUND, f"Cannot find NamespaceIsolationPolicy {name} for cluster {cluster}"
        )
    return json_response(policy)


def broker_isolation_data(
    broker: str, policies: dict[str, NamespaceIsolationData]
) -> dict[str, object]:
    """Pulsar's ``BrokerNamespaceIsolationData`` of a broker (``internalGetBrokerNsIsolationData``).

    The broker name as given (``host:port``) is matched against the primary and secondary
    regexes, as Pulsar does here (placement matches the host alone). Every matching policy adds
    its namespace regexes; the last one names the policy and says whether it is primary. The
    JSON is Jackson's: ``primary`` (the getter ``isPrimary()``), ``policyName`` left out when
    no policy matches.
    """
    data: dict[str, object] = {"brokerName": broker}
    regexes: list[str] = []
    primary = False
    for name, stored in policies.items():
        if re_matches(stored.primary, broker) or re_matches(stored.secondary, broker):
            regexes += stored.namespaces or []
            primary = re_matches(stored.primary, broker)
            data["policyName"] = name
    data["primary"] = primary
    data["namespaceRegex"] = regexes
    return data


async def get_brokers_with_isolation_policies(request: web.Request) -> web.Response:
    """``GET .../namespaceIsolationPolicies/brokers``: every available broker's view."""
    cluster = await _cluster(request, PRECONDITION_FAILED)
    brokers = await available_brokers(context(request).metadata)
    policies = await _policies(request, cluster)
    return json_response([broker_isolation_data(b, policies) for b in brokers])


async def get_broker_with_isolation_policies(request: web.Request) -> web.Response:
    """``GET .../namespaceIsolationPolicies/brokers/{broker}`` (any name, registered or not)."""
    cluster = await _cluster(request, PRECONDITION_FAILED)
    policies = await _policies(request, cluster)
    return json_response(broker_isolation_data(request.match_info["broker"], policies))


async def set_isolation_policy_route(request: web.Request) -> web.Response:
    """``POST .../namespaceIsolationPolicies/{policyName}``: create or replace it."""
    cluster = await _cluster(request, PRECONDITION_FAILED)
    name = request.match_info["policy"]
    data = await read_json(request, NamespaceIsolationData, what="policy data")
    if data.unload_scope not in UNLOAD_SCOPES:
        data.unload_scope = None  # Jackson's READ_UNKNOWN_ENUM_VALUES_AS_NULL
    ctx = context(request)
    try:
        old = await set_isolation_policy(ctx.metadata, cluster, name, data)
    except InvalidIsolationDataError as exc:
        raise RestError(
            BAD_REQUEST,
            f"Invalid format of input policy data. policy: {name}; "
            f"data: {to_json(data).decode()} ({exc})",
        ) from None
    # Pulsar's filterAndUnloadMatchedNamespaceAsync: the namespaces of this cluster the change
    # may move are unloaded, so that their next placement honours the policy.
    in_cluster: list[str] = []
    for known in ctx.namespaces.namespaces():
        found = ctx.namespaces.policies(known)
        if found is not None and cluster in found.replication_clusters:
            in_cluster.append(str(known))
    for namespace in namespaces_to_unload(sorted(in_cluster), data, old):
        log.info("isolation policy %s of %s: unloading namespace %s", name, cluster, namespace)
        await unload_namespace_bundles(ctx, NamespaceName.parse(namespace))
    return no_content()


async def delete_isolation_policy_route(request: web.Request) -> web.Response:
    """``DELETE .../namespaceIsolationPolicies/{policyName}`` (204 whether or not it existed)."""
    cluster = await _cluster(request, PRECONDITION_FAILED)
    await delete_isolation_policy(context(request).metadata, cluster, request.match_info["policy"])
    return no_content()


async def _namespace_bundles(request: web.Request) -> tuple[NamespaceName, BundlesData]:
    ctx = context(request)
    namespace = namespace_of(request)
    policies = await ctx.policies.get_namespace(namespace)
    if policies is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    if policies.bundles is not None:
        return namespace, policies.bundles
    count = ctx.dynamic.config.defaultNumberOfNamespaceBundles
    return namespace, bundles_data(bundle_boundaries(count))


async def get_anti_affinity(request: web.Request) -> web.Response:
    """``GET .../antiAffinity``: the group as text; 204 without one."""
    namespace, _ = await _namespace_bundles(request)
    group = await read_anti_affinity_group(context(request).metadata, namespace)
    if group is None:
        return no_content()
    return web.Response(text=group, content_type="text/plain")


async def set_anti_affinity(request: web.Request) -> web.Response:
    """``POST .../antiAffinity``: the body is the group name."""
    namespace, bundles = await _namespace_bundles(request)
    group = (await read_body(request, what="antiAffinityGroup")).decode("utf-8", "replace")
    if not group.strip():
        raise RestError(PRECONDITION_FAILED, "antiAffinityGroup can't be empty")
    await set_anti_affinity_group(context(request).metadata, namespace, group, bundles=bundles)
    return no_content()


async def delete_anti_affinity(request: web.Request) -> web.Response:
    """``DELETE .../antiAffinity``."""
    namespace, bundles = await _namespace_bundles(request)
    await set_anti_affinity_group(context(request).metadata, namespace, None, bundles=bundles)
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the placement policy routes."""
    router = app.router
    isolation = "/admin/v2/clusters/{cluster}/namespaceIsolationPolicies"
    router.add_get(isolation, get_isolation_policies)
    # Before ``{policy}``: ``brokers`` is not a policy name here, as in Pulsar's resource.
    router.add_get(f"{isolation}/brokers", get_brokers_with_isolation_policies)
    router.add_get(f"{isolation}/brokers/{{broker}}", get_broker_with_isolation_policies)
    router.add_get(f"{isolation}/{{policy}}", get_isolation_policy)
    router.add_post(f"{isolation}/{{policy}}", set_isolation_policy_route)
    router.add_delete(f"{isolation}/{{policy}}", delete_isolation_policy_route)
    affinity = "/admin/v2/namespaces/{tenant}/{namespace}/antiAffinity"
    router.add_get(affinity, get_anti_affinity)
    router.add_post(affinity, set_anti_affinity)
    router.add_delete(affinity, delete_anti_affinity)
