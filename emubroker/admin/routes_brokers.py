"""``/admin/v2/brokers``: active brokers, health, the leader and dynamic configuration.

Shapes follow Pulsar's ``BrokersBase``: brokers are listed by id (``host:webServicePort``), the
leader is ``BrokerInfo`` ``{"serviceUrl", "brokerId"}`` as the leader election last read it
(``emubroker.loadbalance.leader_election``), ``health`` and ``ready`` answer ``ok``.
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

from emubroker.admin.errors import NOT_FOUND, PRECONDITION_FAILED, RestError
from emubroker.admin.http import context, json_response, no_content
from emubroker.dynamic_config import DynamicConfigError
from emubroker.handlers.common import SERVER_VERSION

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


async def _check_cluster(request: web.Request, cluster: str) -> None:
    ctx = context(request)
    if cluster != ctx.cluster and await ctx.policies.get_cluster(cluster) is None:
        raise RestError(NOT_FOUND, f"Cluster does not exist: cluster={cluster}")


async def active_brokers(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers[/{cluster}]``: ids of the cluster's active brokers."""
    ctx = context(request)
    cluster = request.match_info.get("cluster", ctx.cluster)
    await _check_cluster(request, cluster)
    return json_response([ctx.broker_id] if cluster == ctx.cluster else [])


async def health(request: web.Request) -> web.Response:
    """``GET /admin/v2/brokers/health`` (what ``pulsar-admin brokers healthcheck`` reads)."""
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
    await _check_cluster(request, request.match_info["cluster"])
    if request.match_info["broker"] != ctx.broker_id:
        raise RestError(NOT_FOUND, f"Broker {request.match_info['broker']} not found")
    return json_response(
        {str(bundle): NamespaceOwnershipStatus() for bundle in ctx.ownership.owned_bundles()}
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
    return no_content()


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
    router.add_get(f"{base}/ready", health)
    router.add_get(f"{base}/leaderBroker", leader)
    router.add_get(f"{base}/version", version)
    router.add_get(f"{base}/configuration", dynamic_names)
    router.add_get(f"{base}/configuration/values", dynamic_values)
    router.add_get(f"{base}/configuration/runtime", runtime_values)
    router.add_post(f"{base}/configuration/{{key}}/{{value}}", update_dynamic)
    router.add_delete(f"{base}/configuration/{{key}}", delete_dynamic)
    router.add_get(f"{base}/{{cluster}}", active_brokers)
    router.add_get(f"{base}/{{cluster}}/{{broker}}/ownedNamespaces", owned_namespaces)
