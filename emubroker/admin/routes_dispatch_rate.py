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

from typing import TYPE_CHECKING, Any

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
)
from emubroker.admin.routes_topics import TOPIC
from emubroker.ratelimit.quotas import (
    InvalidDispatchRateError,
    decode_dispatch_rate,
    resolve_subscription_rate,
    resolve_topic_rate,
)
from emubroker.topics.throttling import SubscriptionPolicies, TopicPolicies

if TYPE_CHECKING:
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


async def _namespace_update(request: web.Request, **changes: object) -> web.Response:
    namespace = namespace_of(request)
    ctx = context(request)
    if await ctx.policies.get_namespace(namespace) is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    cluster = ctx.cluster

    def change(old: Policies) -> Policies:
        updates: dict[str, dict[str, Any]] = {}
        for field, value in changes.items():
            mapping = dict(getattr(old, field))
            if value is None:
                mapping.pop(cluster, None)
            else:
                mapping[cluster] = value
            updates[field] = mapping
        return msgspec.structs.replace(old, **updates)

    policies = await ctx.policies.update_namespace(namespace, change)
    ctx.namespaces.apply(namespace, policies)
    return no_content()


async def _namespace_get(request: web.Request, field: str) -> web.Response:
    namespace = namespace_of(request)
    ctx = context(request)
    policies = await ctx.policies.get_namespace(namespace)
    if policies is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    value = getattr(policies, field).get(ctx.cluster)
    return no_content() if value is None else json_response(value)


async def set_namespace_dispatch_rate(request: web.Request) -> web.Response:
    """``POST .../namespaces/{tenant}/{namespace}/dispatchRate``."""
    namespace_of(request)
    rate = msgspec.to_builtins(await _rate_body(request))
    return await _namespace_update(request, topicDispatchRate=rate, clusterDispatchRate=rate)


async def get_namespace_dispatch_rate(request: web.Request) -> web.Response:
    """``GET .../namespaces/{tenant}/{namespace}/dispatchRate``."""
    return await _namespace_get(request, "topicDispatchRate")


async def remove_namespace_dispatch_rate(request: web.Request) -> web.Response:
    """``DELETE .../namespaces/{tenant}/{namespace}/dispatchRate``."""
    return await _namespace_update(request, topicDispatchRate=None, clusterDispatchRate=None)


async def set_namespace_subscription_rate(request: web.Request) -> web.Response:
    """``POST .../namespaces/{tenant}/{namespace}/subscriptionDispatchRate``."""
    namespace_of(request)
    rate = msgspec.to_builtins(await _rate_body(request))
    return await _namespace_update(request, subscriptionDispatchRate=rate)


async def get_namespace_subscription_rate(request: web.Request) -> web.Response:
    """``GET .../namespaces/{tenant}/{namespace}/subscriptionDispatchRate``."""
    return await _namespace_get(request, "subscriptionDispatchRate")


async def remove_namespace_subscription_rate(request: web.Request) -> web.Response:
    """``DELETE .../namespaces/{tenant}/{namespace}/subscriptionDispatchRate``."""
    return await _namespace_update(request, subscriptionDispatchRate=None)


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
    if level == "subscription":
        sub = request.match_info["subName"]
        subs = dict(current.subscriptionPolicies)
        subs[sub] = SubscriptionPolicies(dispatchRate=rate)
        if rate is None:
            del subs[sub]
        updated = msgspec.structs.replace(current, subscriptionPolicies=subs)
    else:
        updated = msgspec.structs.replace(current, **{level: rate})
    await throttling.store_topic_policies(name, updated)


def _topic_read(request: web.Request, level: str) -> web.Response:
    ctx, name = existing_topic(request)
    throttling = topic_throttling(ctx)
    policies = throttling.topic_policies(name) or TopicPolicies()
    if level == "subscription":
        found = policies.subscriptionPolicies.get(request.match_info["subName"])
        value = None if found is None else found.dispatchRate
    else:
        value = getattr(policies, level)
    if value is None and query_bool(request, "applied"):
        # The rate in force at that level when the topic sets none (namespace, then broker).
        resolve = resolve_topic_rate if level == "dispatchRate" else resolve_subscription_rate
        value = resolve(throttling.config, throttling.policies_of(name, None))
    return no_content() if value is None else json_response(value)


async def set_topic_dispatch_rate(request: web.Request) -> web.Response:
    """``POST .../{topic}/dispatchRate``."""
    topic_of(request)
    await _topic_write(request, "dispatchRate", await _rate_body(request))
    return no_content()


async def get_topic_dispatch_rate(request: web.Request) -> web.Response:
    """``GET .../{topic}/dispatchRate[?applied=true]``."""
    return _topic_read(request, "dispatchRate")


async def remove_topic_dispatch_rate(request: web.Request) -> web.Response:
    """``DELETE .../{topic}/dispatchRate``."""
    await _topic_write(request, "dispatchRate", None)
    return no_content()


async def set_topic_subscription_rate(request: web.Request) -> web.Response:
    """``POST .../{topic}/subscriptionDispatchRate``."""
    topic_of(request)
    await _topic_write(request, "subscriptionDispatchRate", await _rate_body(request))
    return no_content()


async def get_topic_subscription_rate(request: web.Request) -> web.Response:
    """``GET .../{topic}/subscriptionDispatchRate[?applied=true]``."""
    return _topic_read(request, "subscriptionDispatchRate")


async def remove_topic_subscription_rate(request: web.Request) -> web.Response:
    """``DELETE .../{topic}/subscriptionDispatchRate``."""
    await _topic_write(request, "subscriptionDispatchRate", None)
    return no_content()


async def set_subscription_rate(request: web.Request) -> web.Response:
    """``POST .../{topic}/{subName}/dispatchRate`` (PIP-152)."""
    topic_of(request)
    await _topic_write(request, "subscription", await _rate_body(request))
    return no_content()


async def get_subscription_rate(request: web.Request) -> web.Response:
    """``GET .../{topic}/{subName}/dispatchRate``."""
    return _topic_read(request, "subscription")


async def remove_subscription_rate(request: web.Request) -> web.Response:
    """``DELETE .../{topic}/{subName}/dispatchRate``."""
    await _topic_write(request, "subscription", None)
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the dispatch-rate routes."""
    router = app.router
    for path, (setter, getter, remover) in {
        f"{_NAMESPACE}/dispatchRate": (
            set_namespace_dispatch_rate,
            get_namespace_dispatch_rate,
            remove_namespace_dispatch_rate,
        ),
        f"{_NAMESPACE}/subscriptionDispatchRate": (
            set_namespace_subscription_rate,
            get_namespace_subscription_rate,
            remove_namespace_subscription_rate,
        ),
        f"{TOPIC}/dispatchRate": (
            set_topic_dispatch_rate,
            get_topic_dispatch_rate,
            remove_topic_dispatch_rate,
        ),
        f"{TOPIC}/subscriptionDispatchRate": (
            set_topic_subscription_rate,
            get_topic_subscription_rate,
            remove_topic_subscription_rate,
        ),
        TOPIC + "/{subName}/dispatchRate": (
            set_subscription_rate,
            get_subscription_rate,
            remove_subscription_rate,
        ),
    }.items():
        router.add_post(path, setter)
        router.add_get(path, getter)
        router.add_delete(path, remover)
