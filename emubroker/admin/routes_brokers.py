"""``/admin/v2/brokers``: active brokers, health, the leader and dynamic configuration.

Shapes follow Pulsar's ``BrokersBase``:

- ``GET /brokers[/{cluster}]``: the ids (``host:webServicePort``) of the registered brokers, the
  children of ``/loadbalance/brokers`` (``emubroker.loadbalance.runtime.broker_registry``);
- ``GET /brokers/{cluster}/{broker}/ownedNamespaces``: this broker's bundles with Pulsar's
  ``NamespaceOwnershipStatus``; asked of another broker, the request is redirected (307) to the
  ``webServiceUrl`` of that broker's report, and an unknown broker is 404 "Broker id '...' not
  found in available brokers." (``maybeRedirectToBroker``);
- ``GET /brokers/health[?topicVersion=V1|V2][&brokerId=...]``: produces and reads back a message
  on the broker's heartbeat topic (``emubroker.admin.health_check``), ``ok`` on success, 500 with
  the reason otherwise; ``brokerId`` naming another broker redirects as above;
- the leader is ``BrokerInfo`` ``{"serviceUrl", "brokerId"}`` as the leader election last read it
  (``emubroker.loadbalance.leader.election``); ``ready`` answers ``ok``.

A cluster other than this broker's is redirected to that cluster's ``serviceUrl``
(``validateClusterOwnership``); an unknown one is 404 "Cluster does not exist: cluster=...".
Dynamic configuration: ``configuration`` lists the keys that may change at runtime,
``configuration/values`` the values set so far, ``configuration/runtime`` every current value,
``POST configuration/{key}/{value}`` sets one for every broker and applies it live (412 "Can't
update non-dynamic configuration" or "Invalid dynamic-config value"), ``DELETE
configuration/{key}`` removes one. Pulsar answers those two writes with 200; like every other
successful write here they answer 204.
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from emubroker.admin.errors import INTERNAL, NOT_FOUND, PRECONDITION_FAILED, RestError
from emubroker.admin.health_check import HealthCheckError
from emubroker.admin.http import context, json_response, no_content, redirect_to
from emubroker.dynamic_config import DynamicConfigError
from emubroker.handlers.common import SERVER_VERSION
from emubroker.loadbalance.runtime.broker_registry import available_brokers, read_report
from emubroker.metadata import InvalidPathError

# Pulsar's validateClusterOwnership accepts these without a cluster lookup (isValidCluster).
_ANY_CLUSTER = frozenset({"global"})

__all__ = ["BrokerInfo", "add_routes"]


class BrokerInfo(msgspec.Struct, rename="camel"):
    """Pulsar's ``BrokerInfo``: the leader's web service URL and broker id."""

    service_url: str
    broker_id: str


class NamespaceOwnershipStatus(msgspec.Struct):
    """Pulsar's ``NamespaceOwnershipStatus`` of one owned bundle."""

    broker_assignment: str = "shared"
    is_controlled: bool = False
    is_active: bool = True


async def _validate_cluster_ownership(request: web.Request, cluster: str) -> None:
    """Pulsar's ``validateClusterOwnership``: another cluster is a redirect, none a 404."""
    ctx = context(request)
    if cluster == ctx.cluster or cluster in _ANY_CLUSTER:
        return
    data = await ctx.policies.get_cluster(cluster)
    if data is None:
        raise RestError(NOT_FOUND, f"Cluster does not exist: cluster={cluster}")
    url = data.service_url_tls if request.secure and data.service_url_tls else data.service_url
    if not url:
        raise RestError(INTERNAL, f"Cluster {cluster} has no serviceUrl to redirect to")
    raise redirect_to(request, url)


async def _maybe_redirect_to_broker(request: web.Request, broker_id: str) -> None:
    """Pulsar's ``maybeRedirectToBroker``: another registered broker answers instead."""
    ctx = context(request)
    cleaned = broker_id.removeprefix("http://").removeprefix("https://")
    if cleaned == ctx.broker_id or f"http://{cleaned}" == ctx.web_service_url:
        return
    not_found = RestError(NOT_FOUND, f"Broker id '{broker_id}' not found in available brokers.")
    try:
        report = await read_report(ctx.metadata, cleaned)
    except InvalidPathError:  # not a host:port: no broker has that id
        raise not_found from None
    url = None if report is None else report.web_service_url
    if report is not None and (request.secure or not url) and report.web_service_url_tls:
        url = report.web_service_url_tls
    if not url:
        raise not_found
    raise redirect_to(request, url)


async def active_brokers(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers[/{cluster}]``: ids of the cluster's registered brokers."""
    ctx = context(request)
    cluster = request.match_info.get("cluster", ctx.cluster)
    await _validate_cluster_ownership(request, cluster)
    return json_response(await available_brokers(ctx.metadata))


async def health(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/health`` (what ``pulsar-admin brokers healthcheck`` runs)."""
    ctx = context(request)
    broker_id = request.query.get("brokerId", "").strip()
    if broker_id:
        await _maybe_redirect_to_broker(request, broker_id)
    version = request.query.get("topicVersion") or "V1"
    if version not in ("V1", "V2"):
        raise RestError(NOT_FOUND, f"Invalid topicVersion {version!r}: use V1 or V2")
    try:
        await ctx.health.check(version)
    except HealthCheckError as exc:
        raise RestError(INTERNAL, str(exc)) from None
    return web.Response(text="ok")


async def ready(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/ready``: the broker has started."""
    return web.Response(text="ok")


async def leader(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/leaderBroker``: the elected leader as this broker last read it.

    404 "Couldn't find leader broker" while no leader is known (Pulsar's answer).
    """
    election = context(request).leader_election
    current = election.current_leader() if election is not None else None
    if current is None:
        raise RestError(NOT_FOUND, "Couldn't find leader broker")
    return json_response(BrokerInfo(service_url=current.service_url, broker_id=current.id))


async def version(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/version``."""
    return web.Response(text=SERVER_VERSION)


async def owned_namespaces(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces``: bundles this broker owns."""
    ctx = context(request)
    await _maybe_redirect_to_broker(request, request.match_info["broker"])
    await _validate_cluster_ownership(request, request.match_info["cluster"])
    return json_response(
        {
            str(bundle): NamespaceOwnershipStatus(is_active=ctx.ownership.is_serving(bundle))
            for bundle in ctx.ownership.owned_bundles()
        }
    )


async def dynamic_names(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/configuration``: keys that may change at runtime."""
    return json_response(context(request).dynamic.dynamic_keys())


async def dynamic_values(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/configuration/values``: the overrides set so far."""
    return json_response(context(request).dynamic.overrides())


async def runtime_values(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/configuration/runtime``: every current value, as strings."""
    return json_response(context(request).dynamic.runtime())


async def update_dynamic(request: web.Request) -> web.Response:
    """``POST /admin/v2/brokers/configuration/{key}/{value}``: set and apply one key."""
    try:
        await context(request).dynamic.update(
            request.match_info["key"], request.match_info["value"]
        )
    except DynamicConfigError as exc:
        raise RestError(PRECONDITION_FAILED, str(exc).strip()) from None
    return web.Response(status=200)  # as Pulsar answers it: 200 without a body


async def delete_dynamic(request: web.Request) -> web.Response:
    """``DELETE /admin/v2/brokers/configuration/{key}``: back to the start-up value."""
    try:
        await context(request).dynamic.delete(request.match_info["key"])
    except DynamicConfigError as exc:
        raise RestError(PRECONDITION_FAILED, str(exc).strip()) from None
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the broker routes (literal paths before ``{cluster}``)."""
    router = app.router
    base = "/admin/v2/brokers"
    router.add_get(base, active_brokers)
    router.add_get(f"{base}/health", health)
    router.add_get(f"{base}/ready", ready)
    router.add_get(f"{base}/leaderBroker", leader)
    router.add_get(f"{base}/version", version)
    router.add_get(f"{base}/configuration", dynamic_names)
    router.add_get(f"{base}/configuration/values", dynamic_values)
    router.add_get(f"{base}/configuration/runtime", runtime_values)
    # The value may hold "/" (a JSON map of URLs, sent %2F-encoded): it is the rest of the path.
    router.add_post(f"{base}/configuration/{{key}}/{{value:.+}}", update_dynamic)
    router.add_delete(f"{base}/configuration/{{key}}", delete_dynamic)
    router.add_get(f"{base}/{{cluster}}", active_brokers)
    router.add_get(f"{base}/{{cluster}}/{{broker}}/ownedNamespaces", owned_namespaces)
