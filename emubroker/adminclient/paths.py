"""Every admin REST path our clients call, in one table (Pulsar's admin REST v2 and lookup).

A route's template names its parts: ``{topic}`` is a complete topic name
(``persistent://tenant/ns/x``, written ``persistent/tenant/ns/x``), ``{namespace}`` is
``tenant/ns``; every other part is one path segment. Each segment is URL-quoted.
"""

from __future__ import annotations

import urllib.parse
from typing import Final, Literal

__all__ = [
    "DISPATCH_RATE_ROUTES",
    "ROUTES",
    "DispatchScope",
    "dispatch_rate_path",
    "path",
    "topic_part",
]

ROUTES: Final = {
    "topic": "/admin/v2/{topic}",
    "topic.partitions": "/admin/v2/{topic}/partitions",
    "topic.unload": "/admin/v2/{topic}/unload",
    "topic.bundle": "/lookup/v2/topic/{topic}/bundle",
    "topic.lookup": "/lookup/v2/topic/{topic}",
    "topic.dispatch_rate": "/admin/v2/{topic}/dispatchRate",
    "topic.subscription_dispatch_rate": "/admin/v2/{topic}/subscriptionDispatchRate",
    "subscription.dispatch_rate": "/admin/v2/{topic}/{subscription}/dispatchRate",
    "namespace": "/admin/v2/namespaces/{namespace}",
    "namespace.unload": "/admin/v2/namespaces/{namespace}/unload",
    "namespace.bundles": "/admin/v2/namespaces/{namespace}/bundles",
    "namespace.dispatch_rate": "/admin/v2/namespaces/{namespace}/dispatchRate",
    "namespace.subscription_dispatch_rate": (
        "/admin/v2/namespaces/{namespace}/subscriptionDispatchRate"
    ),
    "bundle.unload": "/admin/v2/namespaces/{namespace}/{bundle}/unload",
    "bundle.split": "/admin/v2/namespaces/{namespace}/{bundle}/split",
    "brokers.leader": "/admin/v2/brokers/leaderBroker",
    "brokers.owned_namespaces": "/admin/v2/brokers/{cluster}/{broker}/ownedNamespaces",
    "brokers.dynamic_config": "/admin/v2/brokers/configuration/{key}/{value}",
}
"""Route name -> path template."""

DispatchScope = Literal[
    "namespace", "namespace_subscription", "topic", "topic_subscription", "subscription"
]

DISPATCH_RATE_ROUTES: Final[dict[str, str]] = {
    "namespace": "namespace.dispatch_rate",  # each topic of the namespace
    "namespace_subscription": "namespace.subscription_dispatch_rate",  # each subscription
    "topic": "topic.dispatch_rate",
    "topic_subscription": "topic.subscription_dispatch_rate",  # each subscription of the topic
    "subscription": "subscription.dispatch_rate",  # one subscription (PIP-152)
}
"""A dispatch-rate policy's scope -> its route (the target is the namespace or the topic)."""


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def topic_part(topic: str) -> str:
    """``persistent://t/ns/x`` -> ``persistent/t/ns/x``, each part URL-quoted.

    Raises:
        ValueError: Not a complete topic name.
    """
    domain, sep, rest = topic.partition("://")
    if not sep or rest.count("/") < 2:
        raise ValueError(f"not a complete topic name: {topic!r}")
    tenant, namespace, local = rest.split("/", 2)
    return "/".join(_quote(part) for part in (domain, tenant, namespace, local))


def path(route: str, **parts: str) -> str:
    """The path of ``route`` (a key of :data:`ROUTES`) with its parts filled in and quoted."""
    quoted = {}
    for name, value in parts.items():
        if name == "topic":
            quoted[name] = topic_part(value)
        elif name == "namespace":
            quoted[name] = "/".join(_quote(part) for part in value.split("/"))
        else:
            quoted[name] = _quote(value)
    return ROUTES[route].format(**quoted)


def dispatch_rate_path(scope: str, target: str, subscription: str | None = None) -> str:
    """The path of a dispatch-rate policy of ``scope`` (a key of :data:`DISPATCH_RATE_ROUTES`).

    ``target`` is the namespace (``tenant/ns``) of the ``namespace*`` scopes, else the complete
    topic name.

    Raises:
        ValueError: An unknown scope, or ``subscription`` without a subscription name.
    """
    route = DISPATCH_RATE_ROUTES.get(scope)
    if route is None:
        raise ValueError(f"unknown dispatch-rate scope {scope!r}")
    if scope.startswith("namespace"):
        return path(route, namespace=target)
    if scope == "subscription":
        if not subscription:
            raise ValueError("scope = 'subscription' needs a subscription")
        return path(route, topic=target, subscription=subscription)
    return path(route, topic=target)
