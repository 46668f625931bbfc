"""``/admin/v2/clusters``: list, get, create, update and delete clusters (Pulsar's ``Clusters``).

Statuses and reasons follow Pulsar's ``ClustersBase``: an invalid name is 412 "Cluster name is not
valid", a missing body 400, an existing cluster 409, an unknown one 404, and a cluster still named
by a tenant or a namespace cannot be deleted (412 "Cluster not empty"); its namespace isolation
policies go with it (``routes_placement_policies``). Successful writes are 204.
"""

from __future__ import annotations

from aiohttp import web

from emubroker.admin.errors import (
    BAD_REQUEST,
    NOT_FOUND,
    PRECONDITION_FAILED,
    RestError,
)
from emubroker.admin.http import context, json_response, no_content, read_json, valid_name
from emubroker.policies import ClusterData
from emubroker.policies.failure_domains import delete_failure_domains
from emubroker.policies.isolation import delete_isolation_policies

__all__ = ["add_routes"]

_GLOBAL = "global"
"""Pulsar's pseudo-cluster of global namespaces; never listed."""


def _name(request: web.Request) -> str:
    name = request.match_info["cluster"]
    if not valid_name(name):
        raise RestError(PRECONDITION_FAILED, "Cluster name is not valid")
    return name


async def list_clusters(request: web.Request) -> web.Response:
    """``GET /admin/v2/clusters``: every cluster name."""
    names = await context(request).policies.clusters()
    return json_response([n for n in names if n != _GLOBAL])


async def get_cluster(request: web.Request) -> web.Response:
    """``GET /admin/v2/clusters/{cluster}``: its ``ClusterData``."""
    data = await context(request).policies.get_cluster(_name(request))
    if data is None:
        raise RestError(NOT_FOUND, "Cluster does not exist")
    return json_response(data)


async def create_cluster(request: web.Request) -> web.Response:
    """``PUT /admin/v2/clusters/{cluster}``: create it (409 if it exists)."""
    name = _name(request)
    data = await read_json(request, ClusterData, what="cluster data", default=None)
    if data is None:
        raise RestError(BAD_REQUEST, "cluster data is required")
    await context(request).policies.create_cluster(name, data)
    return web.Response(status=200)  # Pulsar answers cluster writes 200 without a body


async def update_cluster(request: web.Request) -> web.Response:
    """``POST /admin/v2/clusters/{cluster}``: replace its data (404 if unknown)."""
    name = _name(request)
    data = await read_json(request, ClusterData, what="cluster data", default=None)
    if data is None:
        raise RestError(BAD_REQUEST, "cluster data is required")
    await context(request).policies.update_cluster(name, data)
    return web.Response(status=200)


async def delete_cluster(request: web.Request) -> web.Response:
    """``DELETE /admin/v2/clusters/{cluster}``: only when no tenant or namespace uses it."""
    ctx = context(request)
    name = _name(request)
    policies = ctx.policies
    if await policies.get_cluster(name) is None:
        raise RestError(NOT_FOUND, "Cluster does not exist")
    for tenant in await policies.tenants():
        info = await policies.get_tenant(tenant)
        if info is not None and name in (info.allowed_clusters or ()):
            raise RestError(PRECONDITION_FAILED, "Cluster not empty")
    for namespace in ctx.namespaces.namespaces():
        found = ctx.namespaces.policies(namespace)
        if found is not None and name in found.replication_clusters:
            raise RestError(PRECONDITION_FAILED, "Cluster not empty")
    await delete_isolation_policies(ctx.metadata, name)
    await delete_failure_domains(ctx.metadata, name)
    await policies.delete_cluster(name)
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the cluster routes."""
    router = app.router
    router.add_get("/admin/v2/clusters", list_clusters)
    router.add_get("/admin/v2/clusters/{cluster}", get_cluster)
    router.add_put("/admin/v2/clusters/{cluster}", create_cluster)
    router.add_post("/admin/v2/clusters/{cluster}", update_cluster)
    router.add_delete("/admin/v2/clusters/{cluster}", delete_cluster)
