"""``/admin/v2/namespaces``: namespaces and the policies the emulator acts on.

Creation follows ``NamespacesBase.internalCreateNamespace``: the body is an optional ``Policies``
document; ``replication_clusters`` defaults to this cluster and every cluster must be allowed for
the tenant (403); ``bundles`` may give a count (``{"bundles": {"numBundles": N}}``) or explicit
boundaries, which must cover the whole hash range (400, Pulsar's ``validateBundlesData``); without
either the namespace gets ``defaultNumberOfNamespaceBundles``. A namespace with topics cannot be
deleted (409 "Cannot delete non empty namespace"); forced deletion is off as in Pulsar's default
``forceDeleteNamespaceAllowed=false`` (405).

New namespaces have no retention (``retention_policies`` is null, as in Pulsar's defaults);
``retention`` can be set and read back but its limits are not enforced: an in-memory topic of a
namespace with retention keeps every ledger (``Topic.trim_consumed``).

Every write updates the namespace registry at once (``NamespaceRegistry.apply``), so a client
acting on the ``204`` never races the metadata watch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec
from aiohttp import web

from emubroker.admin.errors import (
    BAD_REQUEST,
    CONFLICT,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PRECONDITION_FAILED,
    RestError,
)
from emubroker.admin.http import (
    context,
    json_response,
    namespace_of,
    no_content,
    query_bool,
    read_body,
    read_json,
    unset_value,
    valid_name,
)
from emubroker.admin.policy_bodies import RetentionPolicies, check_retention
from emubroker.admin.routes_limits import check_count_limit, read_count_limit
from emubroker.naming import MAX_HASH, bundle_boundaries
from emubroker.policies import (
    BundlesData,
    Policies,
    PolicyExistsError,
    SchemaCompatibilityStrategy,
    bundles_data,
)
from emubroker.policies.local import delete_local_policies
from protocol.commands import TopicsMode

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from emubroker.admin.context import AdminContext
    from emubroker.naming import NamespaceName

    Handler = Callable[[web.Request], Awaitable[web.Response]]

__all__ = ["add_routes", "checked_bundles", "policies_of"]

FORBIDDEN: Final = 403

MAX_BUNDLES: Final = 65_536
"""Most bundles a namespace may be created with. Pulsar has no such check (its split limit,
``loadBalancerNamespaceMaximumBundles``, defaults to 128); without one a body asking for 2**32
bundles would make us build billions of boundaries."""

_MODES: Final = {m.name: m for m in TopicsMode}


def checked_bundles(bundles: BundlesData | None, default_count: int) -> BundlesData:
    """The bundles a new namespace gets (Pulsar's ``validatePoliciesAsync``).

    Args:
        bundles: What the request asked for, if anything.
        default_count: ``defaultNumberOfNamespaceBundles``.

    Raises:
        RestError: 400 for boundaries that do not parse or do not cover the hash range, or a
            bundle count above :data:`MAX_BUNDLES`.
    """
    if bundles is None or bundles.num_bundles <= 0:
        return bundles_data(bundle_boundaries(default_count))
    if not bundles.boundaries:
        if bundles.num_bundles > MAX_BUNDLES:
            raise RestError(BAD_REQUEST, f"Too many bundles: at most {MAX_BUNDLES}")
        return bundles_data(bundle_boundaries(bundles.num_bundles))
    points: set[int] = set()
    for text in bundles.boundaries:
        try:
            # Java's Long.decode: 0x-prefixed hex or decimal.
            value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
        except ValueError:
            raise RestError(BAD_REQUEST, f"Invalid bundle boundary '{text}'") from None
        if not 0 <= value <= MAX_HASH:
            raise RestError(BAD_REQUEST, f"Bundle boundary '{text}' is outside the hash range")
        points.add(value)
    ordered = sorted(points)
    if len(ordered) > MAX_BUNDLES + 1:
        raise RestError(BAD_REQUEST, f"Too many bundles: at most {MAX_BUNDLES}")
    if len(ordered) < 2 or ordered[0] != 0 or ordered[-1] != MAX_HASH:
        raise RestError(
            BAD_REQUEST,
            "Input bundles do not cover the whole hash range. "
            f"first:0x{ordered[0]:08x}, last:0x{ordered[-1]:08x}",
        )
    return bundles_data(ordered)


async def policies_of(ctx: AdminContext, namespace: NamespaceName) -> Policies:
    """The namespace's policies (404 "Namespace does not exist" without them)."""
    policies = await ctx.policies.get_namespace(namespace)
    if policies is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    return policies


async def list_namespaces(request: web.Request) -> web.Response:
    """``GET /admin/v2/namespaces/{tenant}``: the tenant's namespaces as ``tenant/ns``."""
    tenant = request.match_info["tenant"]
    if not valid_name(tenant):
        raise RestError(PRECONDITION_FAILED, "Tenant name is not valid")
    policies = context(request).policies
    if await policies.get_tenant(tenant) is None:
        raise RestError(NOT_FOUND, "Tenant not found")
    return json_response([str(ns) for ns in await policies.namespaces(tenant)])


async def create_namespace(request: web.Request) -> web.Response:
    """``PUT /admin/v2/namespaces/{tenant}/{namespace}``: create it with optional policies."""
    namespace = namespace_of(request)
    requested = await read_json(request, Policies, what="policies", default=None)
    policies = Policies() if requested is None else requested
    ctx = context(request)
    tenant = await ctx.policies.get_tenant(namespace.tenant)
    if tenant is None:
        raise RestError(NOT_FOUND, "Tenant does not exist")
    clusters = policies.replication_clusters or [ctx.cluster]
    for cluster in clusters:
        if cluster not in (tenant.allowed_clusters or ()):
            raise RestError(
                FORBIDDEN,
                f"Cluster [{cluster}] is not in the list of allowed clusters list for tenant "
                f"[{namespace.tenant}]",
            )
    if policies.message_ttl_in_seconds is not None and policies.message_ttl_in_seconds < 0:
        raise RestError(PRECONDITION_FAILED, "Invalid value for message TTL")
    bundles = checked_bundles(policies.bundles, ctx.dynamic.config.defaultNumberOfNamespaceBundles)
    policies = msgspec.structs.replace(
        policies, replication_clusters=clusters, bundles=bundles, deleted=False
    )
    try:
        await ctx.policies.create_namespace(namespace, policies)
    except PolicyExistsError:
        raise RestError(CONFLICT, "Namespace already exists") from None
    ctx.namespaces.apply(namespace, policies)
    return no_content()


async def delete_namespace(request: web.Request) -> web.Response:
    """``DELETE /admin/v2/namespaces/{tenant}/{namespace}``: only when it has no topics."""
    namespace = namespace_of(request)
    ctx = context(request)
    if query_bool(request, "force"):
        raise RestError(METHOD_NOT_ALLOWED, "Broker doesn't allow forced deletion of namespaces")
    if await ctx.policies.get_namespace(namespace) is None:
        # NamespacesBase.internalDeleteNamespace's own 404, unlike the other namespace calls'.
        raise RestError(NOT_FOUND, f"Namespace {namespace} does not exist.")
    # The store's topics, as Pulsar reads them: this broker's own list may still hold a topic
    # that its new owner deleted after the bundle moved on.
    if await ctx.topics.namespace_has_topics(namespace):
        raise RestError(CONFLICT, "Cannot delete non empty namespace")
    await ctx.policies.delete_namespace(namespace)
    # As Pulsar's internalClearZkSources: a namespace created again later starts from its own
    # bundle layout, not from a split of the deleted one.
    await delete_local_policies(ctx.metadata, namespace)
    ctx.namespaces.apply(namespace, None)
    for bundle in ctx.ownership.owned_bundles():
        if bundle.namespace == namespace:
            await ctx.ownership.release(bundle)
    return no_content()


async def get_policies(request: web.Request) -> web.Response:
    """``GET /admin/v2/namespaces/{tenant}/{namespace}``: its ``Policies``.

    An unset ``is_allow_auto_update_schema`` reads as the broker's
    ``isAllowAutoUpdateSchemaEnabled``, as Pulsar's AdminResource fills it in when it reads them.
    """
    ctx = context(request)
    policies = await policies_of(ctx, namespace_of(request))
    if policies.is_allow_auto_update_schema is None:
        policies = msgspec.structs.replace(
            policies, is_allow_auto_update_schema=ctx.dynamic.config.isAllowAutoUpdateSchemaEnabled
        )
    return json_response(policies)


async def get_backlog_quota_map(request: web.Request) -> web.Response:
    """``GET .../{namespace}/backlogQuotaMap``: its quotas by type (``{}`` when none is set)."""
    policies = await policies_of(context(request), namespace_of(request))
    return json_response(policies.backlog_quota_map)


async def get_bundles(request: web.Request) -> web.Response:
    """``GET .../{namespace}/bundles``: its ``BundlesData``."""
    policies = await policies_of(context(request), namespace_of(request))
    return json_response(policies.bundles)


async def get_topics(request: web.Request) -> web.Response:
    """``GET .../{namespace}/topics?mode=PERSISTENT|NON_PERSISTENT|ALL`` (spec §13)."""
    namespace = namespace_of(request)
    mode_name = request.query.get("mode", "PERSISTENT").upper()
    mode = _MODES.get(mode_name)
    if mode is None:
        raise RestError(BAD_REQUEST, f"Invalid mode '{request.query['mode']}'")
    ctx = context(request)
    await policies_of(ctx, namespace)
    if not ctx.namespaces.exists(namespace):
        return json_response([])  # created by another broker a moment ago: no topics yet
    return json_response(ctx.topics.topics_of_namespace(namespace, mode))


async def _update(request: web.Request, **changes: object) -> web.Response:
    namespace = namespace_of(request)
    ctx = context(request)
    await policies_of(ctx, namespace)
    policies = await ctx.policies.update_namespace(
        namespace, lambda old: msgspec.structs.replace(old, **changes)
    )
    ctx.namespaces.apply(namespace, policies)
    return no_content()


async def set_deduplication(request: web.Request) -> web.Response:
    """``POST .../{namespace}/deduplication`` with a bare ``true``/``false`` body."""
    namespace_of(request)
    enabled = await read_json(request, bool, what="deduplication flag")
    return await _update(request, deduplicationEnabled=enabled)


async def set_message_ttl(request: web.Request) -> web.Response:
    """``POST .../{namespace}/messageTTL`` with a bare integer body (seconds, 0: no TTL)."""
    namespace_of(request)
    ttl = await read_json(request, int, what="message TTL")
    if ttl < 0:
        raise RestError(PRECONDITION_FAILED, "Invalid value for message TTL, message TTL must >= 0")
    return await _update(request, message_ttl_in_seconds=ttl)


async def get_schema_compatibility(request: web.Request) -> web.Response:
    """``GET .../{namespace}/schemaCompatibilityStrategy``: the strategy name as a JSON string."""
    policies = await policies_of(context(request), namespace_of(request))
    return json_response(policies.schema_compatibility_strategy.value)


async def set_schema_compatibility(request: web.Request) -> web.Response:
    """``PUT .../{namespace}/schemaCompatibilityStrategy`` with the name (JSON string or text)."""
    namespace_of(request)
    raw = (await read_body(request, what="schema compatibility strategy")).strip()
    text = raw.decode("utf-8", "replace")
    if text.startswith('"'):
        try:
            text = msgspec.json.decode(raw, type=str)
        except msgspec.DecodeError:
            raise RestError(BAD_REQUEST, f"Malformed JSON in strategy: {text}") from None
    try:
        strategy = SchemaCompatibilityStrategy(text)
    except ValueError:
        names = ", ".join(s.value for s in SchemaCompatibilityStrategy)
        shown = text if len(text) <= 64 else f"{text[:61]}..."  # the body may be a megabyte
        raise RestError(
            BAD_REQUEST, f"Invalid schema compatibility strategy '{shown}': use one of {names}"
        ) from None
    return await _update(request, schema_compatibility_strategy=strategy)


async def set_retention(request: web.Request) -> web.Response:
    """``POST .../{namespace}/retention`` (Pulsar's ``validateRetentionPolicies`` rules)."""
    namespace_of(request)
    retention = await read_json(request, RetentionPolicies, what="retention policies")
    check_retention(retention)
    return await _update(request, retention_policies=msgspec.to_builtins(retention))


# Count limits (``emubroker.topics.limits``): Pulsar's path segment, which is also the name its
# 412 reason uses ("<segment> must be 0 or more"), -> the Policies field it sets.
_COUNT_LIMITS: Final = {
    "maxProducersPerTopic": "max_producers_per_topic",
    "maxConsumersPerTopic": "max_consumers_per_topic",
    "maxConsumersPerSubscription": "max_consumers_per_subscription",
    "maxSubscriptionsPerTopic": "max_subscriptions_per_topic",
}


def _count_limit_setter(segment: str, field: str) -> Handler:
    # POST of one limit: a JSON integer, 412 below 0 (NamespacesBase.internalSetMax*).
    async def set_limit(request: web.Request) -> web.Response:
        namespace_of(request)
        value = check_count_limit(await read_count_limit(request), f"{segment} must be 0 or more")
        return await _update(request, **{field: value})

    return set_limit


def _optional_policy(field: str) -> tuple[Handler, Handler]:
    """GET and DELETE of a namespace policy that may be unset (None).

    GET answers 200 with an empty body while it is unset (Pulsar's null: no body and no content
    type, as Pulsar standalone answers); DELETE unsets it, back to the broker's default.
    """

    async def get_policy(request: web.Request) -> web.Response:
        value = getattr(await policies_of(context(request), namespace_of(request)), field)
        return unset_value() if value is None else json_response(value)

    async def remove_policy(request: web.Request) -> web.Response:
        return await _update(request, **{field: None})

    return get_policy, remove_policy


# Policies set by POST and read and unset by GET and DELETE on ``{namespace}/<segment>``.
_OPTIONAL_POLICIES: Final = {
    "deduplication": ("deduplicationEnabled", set_deduplication),
    "messageTTL": ("message_ttl_in_seconds", set_message_ttl),
    "retention": ("retention_policies", set_retention),
    **{
        segment: (field, _count_limit_setter(segment, field))
        for segment, field in _COUNT_LIMITS.items()
    },
}


def add_routes(app: web.Application) -> None:
    """Register the namespace routes."""
    router = app.router
    base = "/admin/v2/namespaces/{tenant}/{namespace}"
    router.add_get("/admin/v2/namespaces/{tenant}", list_namespaces)
    router.add_get(base, get_policies)
    router.add_put(base, create_namespace)
    router.add_delete(base, delete_namespace)
    router.add_get(f"{base}/bundles", get_bundles)
    router.add_get(f"{base}/backlogQuotaMap", get_backlog_quota_map)
    router.add_get(f"{base}/topics", get_topics)
    router.add_get(f"{base}/schemaCompatibilityStrategy", get_schema_compatibility)
    router.add_put(f"{base}/schemaCompatibilityStrategy", set_schema_compatibility)
    for segment, (field, setter) in _OPTIONAL_POLICIES.items():
        getter, remover = _optional_policy(field)
        router.add_post(f"{base}/{segment}", setter)
        router.add_get(f"{base}/{segment}", getter)
        router.add_delete(f"{base}/{segment}", remover)
