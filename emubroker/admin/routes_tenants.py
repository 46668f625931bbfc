"""``/admin/v2/tenants``: list, get, create, update and delete tenants (Pulsar's ``Tenants``).

Validation follows Pulsar's ``TenantsBase``: the name must pass ``NamedEntity.checkName`` (412),
``allowedClusters`` must be present (412 "Clusters cannot be null"), non-empty and without blanks
(412 "Clusters cannot be empty or blank") and name existing clusters (412 "Clusters do not
exist"), admin roles may not have surrounding whitespace (412). A tenant with namespaces cannot be
deleted (409 "The tenant still has active namespaces"); forced deletion is disabled as in
Pulsar's default ``forceDeleteTenantAllowed=false`` (405).
"""

from __future__ import annotations

from aiohttp import web

from emubroker.admin.errors import (
    CONFLICT,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PRECONDITION_FAILED,
    RestError,
)
from emubroker.admin.http import (
    context,
    json_response,
    no_content,
    query_bool,
    read_json,
    valid_name,
)
from emubroker.policies import PolicyStore, TenantInfo

__all__ = ["add_routes"]

_GLOBAL = "global"


def _name(request: web.Request) -> str:
    name = request.match_info["tenant"]
    if not valid_name(name):
        raise RestError(PRECONDITION_FAILED, "Tenant name is not valid")
    return name


async def _checked_info(request: web.Request) -> TenantInfo:
    info = await read_json(request, TenantInfo, what="tenant info", default=None)
    if info is None:
        raise RestError(PRECONDITION_FAILED, "TenantInfo is null")
    await _check_clusters(context(request).policies, info)
    for role in info.admin_roles:
        if role != role.strip():
            raise RestError(
                PRECONDITION_FAILED, "AdminRoles contains whitespace in the beginning or end."
            )
    return info


async def _check_clusters(policies: PolicyStore, info: TenantInfo) -> None:
    clusters = info.allowed_clusters
    if clusters is None:
        raise RestError(PRECONDITION_FAILED, "Clusters cannot be null")
    if not clusters or any(not c.strip() for c in clusters):
        raise RestError(PRECONDITION_FAILED, "Clusters cannot be empty or blank")
    known = set(await policies.clusters())
    if any(c not in known and c != _GLOBAL for c in clusters):
        raise RestError(PRECONDITION_FAILED, "Clusters do not exist")


async def list_tenants(request: web.Request) -> web.Response:
    """``GET /admin/v2/tenants``: every tenant name."""
    return json_response(await context(request).policies.tenants())


async def get_tenant(request: web.Request) -> web.Response:
    """``GET /admin/v2/tenants/{tenant}``: its ``TenantInfo``."""
    info = await context(request).policies.get_tenant(_name(request))
    if info is None:
        raise RestError(NOT_FOUND, "Tenant does not exist")
    return json_response(info)


async def create_tenant(request: web.Request) -> web.Response:
    """``PUT /admin/v2/tenants/{tenant}``: create it (409 if it exists)."""
    name = _name(request)
    info = await _checked_info(request)
    policies = context(request).policies
    if await policies.get_tenant(name) is not None:
        raise RestError(CONFLICT, "Tenant already exist")
    await policies.create_tenant(name, info)
    return no_content()


async def update_tenant(request: web.Request) -> web.Response:
    """``POST /admin/v2/tenants/{tenant}``: replace its info (404 if unknown).

    A cluster may leave ``allowedClusters`` only when no namespace of the tenant replicates to it.
    """
    name = _name(request)
    info = await _checked_info(request)
    ctx = context(request)
    old = await ctx.policies.get_tenant(name)
    if old is None:
        raise RestError(NOT_FOUND, f"Tenant {name} not found")
    removed = set(old.allowed_clusters or ()) - set(info.allowed_clusters or ())
    for namespace in ctx.namespaces.namespaces():
        found = ctx.namespaces.policies(namespace)
        if namespace.tenant == name and found is not None:
            used = removed.intersection(found.replication_clusters)
            if used:
                raise RestError(
                    PRECONDITION_FAILED,
                    f"Cluster {sorted(used)[0]} still has active namespaces in tenant {name}",
                )
    await ctx.policies.update_tenant(name, info)
    return no_content()


async def delete_tenant(request: web.Request) -> web.Response:
    """``DELETE /admin/v2/tenants/{tenant}``: only when it has no namespaces."""
    name = _name(request)
    if query_bool(request, "force"):
        raise RestError(METHOD_NOT_ALLOWED, "Broker doesn't allow forced deletion of tenants")
    policies = context(request).policies
    if await policies.get_tenant(name) is None:
        raise RestError(NOT_FOUND, "Tenant doesn't exist")
    if await policies.namespaces(name):
        raise RestError(CONFLICT, "The tenant still has active namespaces")
    await policies.delete_tenant(name)
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the tenant routes."""
    router = app.router
    router.add_get("/admin/v2/tenants", list_tenants)
    router.add_get("/admin/v2/tenants/{tenant}", get_tenant)
    router.add_put("/admin/v2/tenants/{tenant}", create_tenant)
    router.add_post("/admin/v2/tenants/{tenant}", update_tenant)
    router.add_delete("/admin/v2/tenants/{tenant}", delete_tenant)
