"""More namespace policies over REST: one table of Pulsar's ``Namespaces`` policy resources.

Each row of :data:`_POLICIES` is a resource under ``/admin/v2/namespaces/{tenant}/{namespace}``:
a write (``POST`` or ``PUT``, as Pulsar's resource is annotated) decodes the body into Pulsar's
type (``policy_bodies``), checks it with Pulsar's status and reason and stores it in the
namespace's ``Policies``; a ``GET`` answers it (Pulsar's null, 200 without a body, while unset);
a ``DELETE`` unsets it. So ``namespaces policies`` shows them as Pulsar's does.

* ``autoTopicCreation``, ``autoSubscriptionCreation`` (``autoTopicCreationOverride``,
  ``autoSubscriptionCreationOverride``);
* ``subscriptionExpirationTime`` (minutes, 412 below 0);
* ``maxTopicsPerNamespace`` (412 below 0), enforced on topic creation
  (``emubroker.topics.namespace_limits``);
* ``compactionThreshold`` (bytes, ``PUT``, 412 below 0);
* ``persistence`` (``PersistencePolicies``, 400 for Pulsar's quorum checks);
* ``offloadThreshold``, ``offloadThresholdInSeconds`` (``PUT``, no ``DELETE``) and
  ``offloadDeletionLagMs`` (``PUT``): Pulsar writes them into ``offload_policies``
  (``managedLedgerOffload{ThresholdInBytes,ThresholdInSeconds,DeletionLagInMillis}``) and a
  ``GET`` reads them from there, else from the legacy fields (``offload_threshold`` -1 ...).

Stored only (docs/broker-behaviour.md): compaction threshold, persistence, offload and bookie
affinity (no automatic compaction, no bookies, no tiered storage here), subscription expiration
and the auto-creation overrides.

Besides the table: ``properties`` (``PUT`` merges a map, ``GET`` answers it, ``DELETE`` clears
it; ``property/{key}`` reads or removes one, ``property/{key}/{value}`` sets one), which Pulsar
lets the tenant's admins change; and ``persistence/bookieAffinity``, kept in the namespace's
*local* policies as Pulsar does (super-user only; a GET before anything wrote local policies
answers null, where Pulsar is 404 until a broker loaded the namespace's bundles). And
``publishRate`` (``PublishRate``), kept per cluster in ``publishMaxMessageRate`` as Pulsar does
(this cluster's entry is read and written); stored only: publish rate limiting
is not emulated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec
from aiohttp import web

from emubroker.admin.errors import NOT_FOUND, RestError
from emubroker.admin.http import (
    context,
    json_response,
    namespace_of,
    no_content,
    read_json,
    unset_value,
)
from emubroker.admin.policy_bodies import (
    OFFLOAD_DEFAULTS,
    AutoSubscriptionCreationOverride,
    AutoTopicCreationOverride,
    BookieAffinityGroupData,
    JavaInt,
    JavaLong,
    PersistencePolicies,
    PublishRate,
    check_auto_topic_creation,
    check_not_negative,
    check_persistence,
)
from emubroker.admin.routes_namespaces import policies_of
from emubroker.policies.local import read_local_policies, set_local_policy

if TYPE_CHECKING:
    from emubroker.admin.context import AdminContext
    from emubroker.policies import Policies

__all__ = ["add_routes"]

_BASE: Final = "/admin/v2/namespaces/{tenant}/{namespace}"


async def _update(request: web.Request, change: Callable[[Policies], Policies]) -> web.Response:
    namespace = namespace_of(request)
    ctx = context(request)
    await policies_of(ctx, namespace)
    policies = await ctx.policies.update_namespace(namespace, change)
    ctx.namespaces.apply(namespace, policies)
    return no_content()


class _Policy(NamedTuple):
    """One resource: its body type, the check of a value, and where the value lives."""

    body: Any
    check: Callable[[Any, AdminContext], None]
    read: Callable[[Policies], Any]
    write: Callable[[Policies, Any], Policies]
    set_method: str = "POST"
    removable: bool = True
    set_status: int = 204


def _no_check(_value: Any, _ctx: AdminContext) -> None:
    return None


def _at_least_zero(reason: str) -> Callable[[Any, AdminContext], None]:
    return lambda value, _ctx: check_not_negative(value, reason)


def _field(name: str) -> tuple[Callable[[Policies], Any], Callable[[Policies, Any], Policies]]:
    def read(policies: Policies) -> Any:
        return getattr(policies, name)

    def write(policies: Policies, value: Any) -> Policies:
        stored = None if value is None else msgspec.to_builtins(value)
        return msgspec.structs.replace(policies, **{name: stored})

    return read, write


def _offload(key: str, legacy: str | None) -> tuple[Callable[..., Any], Callable[..., Policies]]:
    # NamespacesBase writes the value into offload_policies (creating them) and empties the
    # legacy field; a GET reads offload_policies' value, else the legacy field.
    def read(policies: Policies) -> Any:
        offload = policies.offload_policies
        if offload is None or (legacy is not None and offload.get(key) is None):
            return None if legacy is None else getattr(policies, legacy)
        return offload.get(key)

    def write(policies: Policies, value: Any) -> Policies:
        offload = dict(policies.offload_policies or OFFLOAD_DEFAULTS)
        offload[key] = value
        return msgspec.structs.replace(
            policies, offload_policies=offload, **({} if legacy is None else {legacy: -1})
        )

    return read, write


def _auto_topic_creation(value: AutoTopicCreationOverride, ctx: AdminContext) -> None:
    check_auto_topic_creation(value, ctx.dynamic.config.maxNumPartitionsPerPartitionedTopic)


def _persistence(value: PersistencePolicies, _ctx: AdminContext) -> None:
    check_persistence(value)


_POLICIES: Final = {
    "autoTopicCreation": _Policy(
        AutoTopicCreationOverride, _auto_topic_creation, *_field("autoTopicCreationOverride")
    ),
    "autoSubscriptionCreation": _Policy(
        AutoSubscriptionCreationOverride, _no_check, *_field("autoSubscriptionCreationOverride")
    ),
    "subscriptionExpirationTime": _Policy(
        JavaInt,
        _at_least_zero("Invalid value for subscription expiration time"),
        *_field("subscription_expiration_time_minutes"),
    ),
    "maxTopicsPerNamespace": _Policy(
        JavaInt,
        _at_least_zero("maxTopicsPerNamespace must be 0 or more"),
        lambda policies: policies.max_topics_per_namespace or 0,  # unset reads 0, as Pulsar
        _field("max_topics_per_namespace")[1],
    ),
    "compactionThreshold": _Policy(
        JavaLong,
        _at_least_zero("compactionThreshold must be 0 or more"),
        *_field("compaction_threshold"),
        set_method="PUT",
    ),
    "persistence": _Policy(PersistencePolicies, _persistence, *_field("persistence")),
    "offloadThreshold": _Policy(
        JavaLong,
        _no_check,
        *_offload("managedLedgerOffloadThresholdInBytes", "offload_threshold"),
        set_method="PUT",
        removable=False,
    ),
    "offloadThresholdInSeconds": _Policy(
        JavaLong,
        _no_check,
        *_offload("managedLedgerOffloadThresholdInSeconds", "offload_threshold_in_seconds"),
        set_method="PUT",
        removable=False,
        set_status=200,  # an async resource resumed with null: 200, not 204
    ),
    "offloadDeletionLagMs": _Policy(
        JavaLong,
        _no_check,
        *_offload("managedLedgerOffloadDeletionLagInMillis", None),
        set_method="PUT",
    ),
}


def _handlers(
    segment: str, policy: _Policy
) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    async def set_policy(request: web.Request) -> web.Response:
        namespace_of(request)  # a bad name before a bad body
        value = await read_json(request, policy.body, what=segment)
        policy.check(value, context(request))
        await _update(request, lambda old: policy.write(old, value))
        return web.Response(status=policy.set_status)

    async def get_policy(request: web.Request) -> web.Response:
        value = policy.read(await policies_of(context(request), namespace_of(request)))
        return unset_value() if value is None else json_response(value)

    async def remove_policy(request: web.Request) -> web.Response:
        return await _update(request, lambda old: policy.write(old, None))

    return set_policy, get_policy, remove_policy


# ---- properties (the tenant's admins) -----------------------------------------------------------


async def _set_properties(request: web.Request) -> web.Response:
    namespace_of(request)
    added = await read_json(request, dict[str, str], what="properties")
    return await _update(
        request,
        lambda old: msgspec.structs.replace(old, properties={**old.properties, **added}),
    )


async def _get_properties(request: web.Request) -> web.Response:
    policies = await policies_of(context(request), namespace_of(request))
    return json_response(policies.properties)


async def _clear_properties(request: web.Request) -> web.Response:
    return await _update(request, lambda old: msgspec.structs.replace(old, properties={}))


async def _set_property(request: web.Request) -> web.Response:
    key, value = request.match_info["key"], request.match_info["value"]
    return await _update(
        request,
        lambda old: msgspec.structs.replace(old, properties={**old.properties, key: value}),
    )


async def _get_property(request: web.Request) -> web.Response:
    policies = await policies_of(context(request), namespace_of(request))
    value = policies.properties.get(request.match_info["key"])
    return unset_value() if value is None else json_response(value)


async def _remove_property(request: web.Request) -> web.Response:
    key = request.match_info["key"]
    policies = await policies_of(context(request), namespace_of(request))
    old_value = policies.properties.get(key)

    def change(old: Policies) -> Policies:
        return msgspec.structs.replace(
            old, properties={k: v for k, v in old.properties.items() if k != key}
        )

    await _update(request, change)
    # internalRemoveProperty answers the removed value (Pulsar's null: no body).
    return unset_value() if old_value is None else json_response(old_value)


# ---- publish rate (per cluster) ----------------------------------------------------------------


def _with_publish_rate(old: Policies, cluster: str, rate: PublishRate | None) -> Policies:
    rates = {k: v for k, v in old.publishMaxMessageRate.items() if k != cluster}
    if rate is not None:
        rates[cluster] = msgspec.to_builtins(rate)
    return msgspec.structs.replace(old, publishMaxMessageRate=rates)


async def _set_publish_rate(request: web.Request) -> web.Response:
    namespace_of(request)  # a bad name before a bad body
    rate = await read_json(request, PublishRate, what="publishRate")
    cluster = context(request).cluster
    return await _update(request, lambda old: _with_publish_rate(old, cluster, rate))


async def _get_publish_rate(request: web.Request) -> web.Response:
    ctx = context(request)
    rate = (await policies_of(ctx, namespace_of(request))).publishMaxMessageRate.get(ctx.cluster)
    return unset_value() if rate is None else json_response(rate)


async def _remove_publish_rate(request: web.Request) -> web.Response:
    cluster = context(request).cluster
    return await _update(request, lambda old: _with_publish_rate(old, cluster, None))


# ---- bookie affinity (local policies, super-user) -----------------------------------------------


async def _write_bookie_affinity(request: web.Request, group: dict[str, Any] | None) -> None:
    namespace = namespace_of(request)
    ctx = context(request)
    policies = await policies_of(ctx, namespace)
    if policies.bundles is None:  # never: a namespace is created with its bundles
        raise RestError(NOT_FOUND, "Namespace does not exist")
    await set_local_policy(
        ctx.metadata, namespace, "bookie_affinity_group", group, bundles=policies.bundles
    )


async def _set_bookie_affinity(request: web.Request) -> web.Response:
    namespace_of(request)
    group = await read_json(request, BookieAffinityGroupData, what="bookie affinity group")
    await _write_bookie_affinity(request, msgspec.to_builtins(group))
    return no_content()


async def _get_bookie_affinity(request: web.Request) -> web.Response:
    namespace = namespace_of(request)
    ctx = context(request)
    await policies_of(ctx, namespace)
    found = await read_local_policies(ctx.metadata, namespace)
    # Pulsar answers 404 "Namespace local-policies does not exist" until a broker has loaded
    # the namespace's bundles (which copies them there); emubroker does not copy them on load,
    # so an existing namespace without local policies reads as one with no group. No group is
    # 204, as Pulsar 4.0.7 answers this route's null (other unset policies are 200 empty).
    group = None if found is None else found.policies.bookie_affinity_group
    return no_content() if group is None else json_response(group)


async def _remove_bookie_affinity(request: web.Request) -> web.Response:
    await _write_bookie_affinity(request, None)
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the namespace policy routes of the table, the properties and bookie affinity."""
    router = app.router
    for segment, policy in _POLICIES.items():
        setter, getter, remover = _handlers(segment, policy)
        path = f"{_BASE}/{segment}"
        router.add_route(policy.set_method, path, setter)
        router.add_get(path, getter)
        if policy.removable:
            router.add_delete(path, remover)
    router.add_put(f"{_BASE}/properties", _set_properties)
    router.add_get(f"{_BASE}/properties", _get_properties)
    router.add_delete(f"{_BASE}/properties", _clear_properties)
    router.add_put(_BASE + "/property/{key}/{value}", _set_property)
    router.add_get(_BASE + "/property/{key}", _get_property)
    router.add_delete(_BASE + "/property/{key}", _remove_property)
    router.add_post(f"{_BASE}/publishRate", _set_publish_rate)
    router.add_get(f"{_BASE}/publishRate", _get_publish_rate)
    router.add_delete(f"{_BASE}/publishRate", _remove_publish_rate)
    bookie_affinity = f"{_BASE}/persistence/bookieAffinity"
    router.add_post(bookie_affinity, _set_bookie_affinity)
    router.add_get(bookie_affinity, _get_bookie_affinity)
    router.add_delete(bookie_affinity, _remove_bookie_affinity)
