"""Unloading namespaces and bundles (Pulsar's ``NamespacesBase`` unload endpoints, spec §6.3).

``PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload[?destinationBroker=B]``:

1. The namespace must exist (404 ``Namespace does not exist``) and the range name one of its
   bundles (412 ``Invalid bundle range: ...`` for a malformed name, 412 ``Cannot find bundle
   <ns>/<range> in the bundles list`` for a range it does not have).
2. ``destinationBroker`` (a broker id, an ``http(s)://`` prefix is stripped) must be a
   registered broker (500 ``Not allowed unload namespace bundle to inactive destination
   broker``). The leader records it as the bundle range's one-shot affinity (§8.14): a broker
   that does not lead sends the call to the leader (307, ``authoritative=false``); the leader
   passes it on to the owner with ``authoritative=true``, which then skips this step.
3. A bundle nobody owns: nothing to do (204). Owned here: unloaded
   (``loadbalance.ownership.unloading``), 204 once its topics are closed and its ownership released.
   Owned by another broker: 307 to it. The owner writes the bundle's ``unload`` trace row,
   reason ``admin`` or the one the leader's call names (``emubrokerUnloadReason=shedding``).
   With a destination under the extensible load manager the owner *transfers* the bundle
   (``loadbalance.ownership.unloading`` rule 5): the clients reconnect to the destination,
   which owns it by then, without a lookup.

``PUT /admin/v2/namespaces/{tenant}/{namespace}/unload`` unloads every owned bundle of the
namespace: those owned here directly, the others through their owner's endpoint above with
``authoritative=true`` and the broker client's credentials (``OwnerCalls``, as Pulsar's broker
calls itself through its admin client).

The topic form, ``PUT /admin/v2/{domain}/{tenant}/{namespace}/{topic}/unload``, is in
``routes_topics`` (sent to the owner by ``topic_owner``).
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from emubroker.admin.errors import INTERNAL, NOT_FOUND, PRECONDITION_FAILED, RestError
from emubroker.admin.http import context, namespace_of, no_content, query_bool
from emubroker.admin.topic_owner import redirect_to_broker
from emubroker.loadbalance.ownership.owner_calls import OwnerCallError
from emubroker.loadbalance.ownership.records import BrokerInfo
from emubroker.loadbalance.runtime.broker_registry import available_brokers, read_report
from emubroker.naming import BundleRange, InvalidNameError, NamespaceBundle

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.naming import NamespaceName

__all__ = ["add_routes", "namespace_bundle", "namespace_bundles", "unload_namespace_bundles"]

log = logging.getLogger(__name__)


async def namespace_bundles(ctx: AdminContext, namespace: NamespaceName) -> list[NamespaceBundle]:
    """A namespace's bundles, from its policies.

    Raises:
        RestError: 404 for an unknown namespace.
    """
    policies = await ctx.policies.get_namespace(namespace)
    if policies is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    boundaries = ctx.ownership.boundaries(namespace)
    if policies.bundles is not None and policies.bundles.boundaries:
        boundaries = tuple(int(b, 16) for b in policies.bundles.boundaries)
    return [
        NamespaceBundle(namespace, BundleRange(lower, upper))
        for lower, upper in itertools.pairwise(boundaries)
    ]


async def namespace_bundle(
    ctx: AdminContext, namespace: NamespaceName, text: str
) -> NamespaceBundle:
    """One of a namespace's bundles by its range name (rule 1).

    Raises:
        RestError: 404 for an unknown namespace, 412 for a range it does not have.
    """
    bundles = await namespace_bundles(ctx, namespace)
    lower, sep, upper = text.partition("_")
    try:
        if not sep:
            raise ValueError(text)
        bundle_range = BundleRange(int(lower, 0), int(upper, 0))
    except (ValueError, InvalidNameError):
        raise RestError(PRECONDITION_FAILED, f"Invalid bundle range: {text}") from None
    bundle = NamespaceBundle(namespace, bundle_range)
    if bundle not in bundles:
        raise RestError(PRECONDITION_FAILED, f"Cannot find bundle {bundle} in the bundles list")
    return bundle


async def unload_bundle(request: web.Request) -> web.Response:
    """``PUT .../{namespace}/{bundle}/unload[?destinationBroker=]`` (rules 1-3)."""
    ctx = context(request)
    bundle = await namespace_bundle(ctx, namespace_of(request), request.match_info["bundle"])
    destination = request.query.get("destinationBroker", "").strip()
    destination = destination.removeprefix("http://").removeprefix("https://")
    leading = ctx.leader_election is not None and ctx.leader_election.is_leader()
    if destination:
        if destination not in await available_brokers(ctx.metadata):
            raise RestError(
                INTERNAL, "Not allowed unload namespace bundle to inactive destination broker"
            )
        if not query_bool(request, "authoritative"):
            if not leading:
                raise await _to_leader(request, ctx)
            if ctx.lookup is not None:
                ctx.lookup.selector.set_affinity(bundle.bundle_range.name, destination)
    owner = await ctx.ownership.get_owner(bundle)
    if owner is None:
        log.info("namespace bundle %s is not owned by any broker", bundle)
        return no_content()
    if owner.broker != ctx.ownership.me:
        raise redirect_to_broker(request, owner.broker, authoritative=leading)
    if ctx.unloader is not None:
        # The trace row's reason: the leader's calls name theirs ("shedding"), a user's is "admin".
        reason = request.query.get("emubrokerUnloadReason") or "admin"
        await ctx.unloader.unload(bundle, reason=reason, destination=destination)
    return no_content()


async def _to_leader(request: web.Request, ctx: AdminContext) -> web.HTTPTemporaryRedirect:
    leader = None if ctx.leader_election is None else ctx.leader_election.current_leader()
    if leader is None:
        raise RestError(PRECONDITION_FAILED, "The current leader is empty.")
    report = await read_report(ctx.metadata, leader.id)
    web_url = leader.service_url or (report.web_service_url if report else None)
    if not web_url:
        raise RestError(PRECONDITION_FAILED, "Redirected broker's service url is not configured.")
    broker = BrokerInfo("", web_url, "", (report.web_service_url_tls or "") if report else "")
    return redirect_to_broker(request, broker, authoritative=False)


async def unload_namespace_bundles(ctx: AdminContext, namespace: NamespaceName) -> None:
    """Unload every owned bundle of ``namespace``, wherever it is owned.

    Those owned here directly, the others at their owner through the broker's own admin calls
    (``OwnerCalls``, with the broker client's credentials, as Pulsar's broker calls itself
    through ``pulsar().getAdminClient()``).

    Raises:
        RestError: 404 for an unknown namespace, 500 when an owner could not unload a bundle.
    """
    for bundle in await namespace_bundles(ctx, namespace):
        if ctx.owner_calls is None:
            raise RestError(INTERNAL, "this broker cannot reach the owners of bundles")
        try:
            await ctx.owner_calls.unload(str(bundle))
        except OwnerCallError as exc:
            raise RestError(INTERNAL, f"Failed to unload bundle {bundle}: {exc}") from None


async def unload_namespace(request: web.Request) -> web.Response:
    """``PUT /admin/v2/namespaces/{tenant}/{namespace}/unload``: every owned bundle."""
    await unload_namespace_bundles(context(request), namespace_of(request))
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the namespace and bundle unload routes."""
    base = "/admin/v2/namespaces/{tenant}/{namespace}"
    app.router.add_put(f"{base}/unload", unload_namespace)
    app.router.add_put(f"{base}/{{bundle}}/unload", unload_bundle)
