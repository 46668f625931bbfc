"""A cluster's failure domains over REST, as Pulsar's ``ClustersBase`` serves them.

- ``GET /admin/v2/clusters/{cluster}/failureDomains``: every domain by name, ``{name:
  {"brokers": [...]}}`` (``{}`` when none; the cluster is not checked, as Pulsar's list does
  not).
- ``GET .../failureDomains/{domain}``: one domain; 412 "Cluster X does not exist." for an
  unknown cluster, 404 "Domain D for cluster X does not exist".
- ``POST .../failureDomains/{domain}`` with ``{"brokers": [...]}``: create or replace it (204). A
  broker already in another domain of the cluster is **409** "[b1:8080] already exists in d2"
  (Java's list form of the duplicates, then the other domain's name).
- ``DELETE .../failureDomains/{domain}``: **200** (Pulsar's ``Response.ok()``); 404 "Domain-name
  D or cluster X does not exist" when there is no such domain.

All of them need a super-user (``validateBothSuperuserAndClusterOperation``; ``admin/access.py``
gives every cluster sub-path that rule). Placement reads the domains through its cache
(``loadbalance.ownership.placement_policies``) when ``failureDomainsEnabled``.
"""

from __future__ import annotations

from aiohttp import web

from emubroker.admin.errors import CONFLICT, NOT_FOUND, PRECONDITION_FAILED, RestError
from emubroker.admin.http import context, json_response, no_content, read_json, valid_name
from emubroker.policies.failure_domains import (
    FailureDomain,
    delete_failure_domain,
    read_failure_domain,
    read_failure_domains,
    set_failure_domain,
)

__all__ = ["add_routes"]


async def _cluster(request: web.Request) -> str:
    cluster = request.match_info["cluster"]
    if not valid_name(cluster) or await context(request).policies.get_cluster(cluster) is None:
        raise RestError(PRECONDITION_FAILED, f"Cluster {cluster} does not exist.")
    return cluster


async def list_failure_domains(request: web.Request) -> web.Response:
    """``GET .../failureDomains``."""
    cluster = request.match_info["cluster"]
    return json_response(await read_failure_domains(context(request).metadata, cluster))


async def get_failure_domain(request: web.Request) -> web.Response:
    """``GET .../failureDomains/{domain}``."""
    cluster = await _cluster(request)
    name = request.match_info["domain"]
    found = await read_failure_domain(context(request).metadata, cluster, name)
    if found is None:
        raise RestError(NOT_FOUND, f"Domain {name} for cluster {cluster} does not exist")
    return json_response(found)


async def set_failure_domain_route(request: web.Request) -> web.Response:
    """``POST .../failureDomains/{domain}``: refused when a broker is in another domain."""
    cluster = await _cluster(request)
    name = request.match_info["domain"]
    domain = await read_json(request, FailureDomain, what="failure domain")
    store = context(request).metadata
    if domain.brokers is not None:
        domain.brokers = list(dict.fromkeys(domain.brokers))  # Pulsar's is a set
        for other, existing in (await read_failure_domains(store, cluster)).items():
            if other == name:
                continue
            duplicates = [b for b in existing.brokers or () if b in domain.brokers]
            if duplicates:
                shown = "[" + ", ".join(duplicates) + "]"
                raise RestError(CONFLICT, f"{shown} already exists in {other}")
    await set_failure_domain(store, cluster, name, domain)
    return no_content()


async def delete_failure_domain_route(request: web.Request) -> web.Response:
    """``DELETE .../failureDomains/{domain}``."""
    cluster = await _cluster(request)
    name = request.match_info["domain"]
    if not await delete_failure_domain(context(request).metadata, cluster, name):
        raise RestError(NOT_FOUND, f"Domain-name {name} or cluster {cluster} does not exist")
    return web.Response(status=200)


def add_routes(app: web.Application) -> None:
    """Register the failure domain routes."""
    router = app.router
    base = "/admin/v2/clusters/{cluster}/failureDomains"
    router.add_get(base, list_failure_domains)
    router.add_get(f"{base}/{{domain}}", get_failure_domain)
    router.add_post(f"{base}/{{domain}}", set_failure_domain_route)
    router.add_delete(f"{base}/{{domain}}", delete_failure_domain_route)
