"""Dispatch-rate policies over REST: Pulsar's namespace and topic-policy paths.

Namespace (``NamespacesBase.internal{Set,Get,Delete}{Topic,Subscription}DispatchRateAsync``):

* ``POST/GET/DELETE /admin/v2/namespaces/{tenant}/{namespace}/dispatchRate``: the per-topic
  rate of the namespace's topics; a set writes ``topicDispatchRate[cluster]`` *and* the legacy
  ``clusterDispatchRate[cluster]``, a delete removes both, a get reads ``topicDispatchRate``.
* ``.../subscriptionDispatchRate``: ``subscriptionDispatchRate[cluster]``.

Topic policies (``PersistentTopics``; both domains are routed, as Pulsar's paths are):

* ``POST/GET/DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}/dispatchRate``,
* ``.../{topic}/subscriptionDispatchRate`` (every subscription of the topic),
* ``.../{topic}/{subName}/dispatchRate`` (PIP-152: one subscription).

A GET of a value never set answers 204 without a body (Jersey's answer to Pulsar's ``null``);
with ``applied=true`` a topic GET answers the rate in force at that level instead. Bodies are
Pulsar's ``DispatchRate`` JSON, parsed and checked by ``quotas.decode_dispatch_rate`` (400 for
bad JSON or types, 412 for a rate below -1 or a period below 1). Changes reach the limiters at
once (``DispatchThrottling``): the next read of every affected dispatcher uses them, no
reconnect. Topic policies need the topic to exist (404 "Topic not found").
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
from aiohttp import web

from emubroker.admin.errors import NOT_FOUND, RestError
from emubroker.admin.http import (
    context,
    json_response,
    namespace_of,
    no_content,
    query_bool,
    read_body,
    topic_of,
    unset_value,
)
from emubroker.admin.routes_topics import TOPIC
from emubroker.policies import SubscriptionPolicies, TopicPolicies
from emubroker.ratelimit.quotas import (
    InvalidDispatchRateError,
    decode_dispatch_rate,
    resolve_subscription_rate,
    resolve_topic_rate,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from aiohttp.typedefs import Handler

    from emubroker.admin.context import AdminContext
    from emubroker.naming import TopicName
    from emubroker.policies import Policies
    from emubroker.ratelimit.quotas import DispatchRate
    from emubroker.topics.throttling import DispatchThrottling

__all__ = ["add_routes", "existing_topic", "topic_throttling"]

_NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"


async def _rate_body(request: web.Request) -> DispatchRate:
    body = await read_body(request, what="DispatchRate body")
    try:
        return decode_dispatch_rate(body)
    except InvalidDispatchRateError as exc:
        raise RestError(exc.http_status, str(exc)) from None


def topic_throttling(ctx: AdminContext) -> DispatchThrottling:
    """The broker's dispatch throttling, which keeps the topic policies (404 without one)."""
    throttling = ctx.topics.throttling
    if throttling is None:
        raise RestError(NOT_FOUND, "Dispatch throttling is not enabled on this broker")
    return throttling


# ---- namespaces ---------------------------------------------------------------------------------


async def _namespace_write(
    request: web.Request, fields: tuple[str, ...], rate: DispatchRate | None
) -> None:
    """Set (or with None remove) this cluster's entry of the namespace policy maps ``fields``."""
    namespace = namespace_of(request)
    ctx = context(request)
    if await ctx.policies.get_namespace(namespace) is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    cluster = ctx.cluster
    value = None if rate is None else msgspec.to_builtins(rate)

    def change(old: Policies) -> Policies:
        updates: dict[str, dict[str, Any]] = {}
        for field in fields:
            mapping = dict(getattr(old, field))
            if value is None:
                mapping.pop(cluster, None)
            else:
                mapping[cluster] = value
            updates[field] = mapping
        return msgspec.structs.replace(old, **updates)

    policies = await ctx.policies.update_namespace(namespace, change)
    ctx.namespaces.apply(namespace, policies)


async def _namespace_read(request: web.Request, field: str) -> web.Response:
    namespace = namespace_of(request)
    ctx = context(request)
    policies = await ctx.policies.get_namespace(namespace)
    if policies is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    value = getattr(policies, field).get(ctx.cluster)
    return unset_value() if value is None else json_response(value)


# ---- topic policies -----------------------------------------------------------------------------


def existing_topic(request: web.Request) -> tuple[AdminContext, TopicName]:
    """The request's topic, which must exist (else 404: no such namespace, or topic)."""
    name = topic_of(request)
    ctx = context(request)
    if not ctx.namespaces.exists(name.namespace):
        raise RestError(NOT_FOUND, "Namespace does not exist")
    if not ctx.topics.topic_exists(name):
        raise RestError(NOT_FOUND, "Topic not found")
    return ctx, name


async def _topic_write(request: web.Request, level: str, rate: DispatchRate | None) -> None:
    ctx, name = existing_topic(request)
    throttling = topic_throttling(ctx)
    current = throttling.topic_policies(name) or TopicPolicies()
    if level == _ONE_SUBSCRIPTION:
        sub = request.match_info["subName"]
        subs = dict(current.subscriptionPolicies)
        subs[sub] = SubscriptionPolicies(dispatchRate=rate)
        if rate is None:
            del subs[sub]
        updated = msgspec.structs.replace(current, subscriptionPolicies=subs)
    else:
        updated = msgspec.structs.replace(current, **{level: rate})
    await throttling.store_topic_policies(name, updated)


async def _topic_read(request: web.Request, level: str) -> web.Response:
    ctx, name = existing_topic(request)
    throttling = topic_throttling(ctx)
    policies = throttling.topic_policies(name) or TopicPolicies()
    if level == _ONE_SUBSCRIPTION:
        found = policies.subscriptionPolicies.get(request.match_info["subName"])
        value = None if found is None else found.dispatchRate
    else:
        value = getattr(policies, level)
    if value is None and query_bool(request, "applied"):
        # The rate in force at that level when the topic sets none (namespace, then broker).
        resolve = resolve_topic_rate if level == "dispatchRate" else resolve_subscription_rate
        value = resolve(throttling.config, throttling.policies_of(name, None))
    return unset_value() if value is None else json_response(value)


# ---- the routes: one row per resource, POST sets, GET reads, DELETE removes ---------------------

_ONE_SUBSCRIPTION = "subscriptionPolicies[subName]"
"""The PIP-152 level: ``TopicPolicies.subscriptionPolicies[subName].dispatchRate``."""


class _Resource(NamedTuple):
    """One dispatch-rate resource: how its name is checked, read and written."""

    check_name: Callable[[web.Request], object]
    read: Callable[[web.Request], Awaitable[web.Response]]
    write: Callable[[web.Request, DispatchRate | None], Awaitable[None]]


def _namespace(read: str, *writes: str) -> _Resource:
    # A GET reads one namespace map; a POST or DELETE writes every map in ``writes``.
    return _Resource(
        namespace_of,
        partial(_namespace_read, field=read),
        lambda request, rate: _namespace_write(request, writes, rate),
    )


def _topic(level: str) -> _Resource:
    return _Resource(
        topic_of,
        partial(_topic_read, level=level),
        lambda request, rate: _topic_write(request, level, rate),
    )


_RESOURCES: dict[str, _Resource] = {
    # Pulsar writes the namespace's per-topic rate to the legacy clusterDispatchRate map too.
    f"{_NAMESPACE}/dispatchRate": _namespace(
        "topicDispatchRate", "topicDispatchRate", "clusterDispatchRate"
    ),
    f"{_NAMESPACE}/subscriptionDispatchRate": _namespace(
        "subscriptionDispatchRate", "subscriptionDispatchRate"
    ),
    f"{TOPIC}/dispatchRate": _topic("dispatchRate"),
    f"{TOPIC}/subscriptionDispatchRate": _topic("subscriptionDispatchRate"),
    TOPIC + "/{subName}/dispatchRate": _topic(_ONE_SUBSCRIPTION),
}


def _handlers(resource: _Resource) -> tuple[Handler, Handler, Handler]:
    async def set_rate(request: web.Request) -> web.Response:
        resource.check_name(request)  # a bad name is answered before a bad body
        await resource.write(request, await _rate_body(request))
        return no_content()

    async def remove_rate(request: web.Request) -> web.Response:
        await resource.write(request, None)
        return no_content()

    return set_rate, resource.read, remove_rate


def add_routes(app: web.Application) -> None:
    """Register the dispatch-rate routes."""
    router = app.router
    for path, resource in _RESOURCES.items():
        setter, getter, remover = _handlers(resource)
        router.add_post(path, setter)
        router.add_get(path, getter)
        router.add_delete(path, remover)
