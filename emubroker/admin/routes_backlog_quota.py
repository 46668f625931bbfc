"""Backlog quotas over REST: the namespace and topic policies ``topics.backlog_quota`` enforces.

* ``POST /admin/v2/namespaces/{tenant}/{namespace}/backlogQuota?backlogQuotaType=T`` with a
  ``BacklogQuota`` body sets the namespace's quota of type ``T`` (``destination_storage`` when
  not given); ``DELETE`` of the same path removes it. ``GET .../backlogQuotaMap`` (in
  ``routes_namespaces``) reads them back.
* ``POST`` / ``DELETE /admin/v2/{domain}/{tenant}/{namespace}/{topic}/backlogQuota`` likewise for
  a topic (stored with its other topic policies: the topic must exist), and
  ``GET .../{topic}/backlogQuotaMap`` reads its map; ``applied=true`` gives the quota of each
  type in force (topic, namespace, then the broker's default), as
  ``PersistentTopicsBase.internalGetBacklogQuota`` does.

The body is read as Pulsar's ``BacklogQuotaImpl`` (``policies.backlog_quota``); one that does not
decode is 400, an unknown ``backlogQuotaType`` too. A namespace write is applied to the registry
at once, as the other namespace policies are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from emubroker.admin.errors import BAD_REQUEST, NOT_FOUND, RestError
from emubroker.admin.http import context, json_response, namespace_of, no_content, query_bool
from emubroker.admin.routes_dispatch_rate import existing_topic, topic_throttling
from emubroker.admin.routes_topics import TOPIC
from emubroker.policies import TopicPolicies
from emubroker.policies.backlog_quota import (
    BACKLOG_QUOTA_TYPES,
    BacklogQuotaError,
    decode_backlog_quota,
)

if TYPE_CHECKING:
    from aiohttp import web

    from emubroker.policies import Policies

__all__ = ["add_routes"]

_NAMESPACE = "/admin/v2/namespaces/{tenant}/{namespace}"


def _kind(request: web.Request) -> str:
    kind = request.query.get("backlogQuotaType", BACKLOG_QUOTA_TYPES[0])
    if kind not in BACKLOG_QUOTA_TYPES:
        raise RestError(BAD_REQUEST, f"Invalid backlogQuotaType '{kind}'")
    return kind


async def _quota_json(request: web.Request) -> dict[str, object]:
    try:
        quota = decode_backlog_quota(await request.read())
    except BacklogQuotaError as exc:
        raise RestError(BAD_REQUEST, str(exc)) from None
    return msgspec.to_builtins(quota)  # type: ignore[no-any-return]  # a dict for this struct


async def _namespace_write(request: web.Request, quota: dict[str, object] | None) -> None:
    namespace = namespace_of(request)
    kind = _kind(request)
    ctx = context(request)
    if await ctx.policies.get_namespace(namespace) is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")

    def change(old: Policies) -> Policies:
        quotas = dict(old.backlog_quota_map)
        if quota is None:
            quotas.pop(kind, None)
        else:
            quotas[kind] = quota
        return msgspec.structs.replace(old, backlog_quota_map=quotas)

    policies = await ctx.policies.update_namespace(namespace, change)
    ctx.namespaces.apply(namespace, policies)


async def set_namespace_quota(request: web.Request) -> web.Response:
    """``POST .../{namespace}/backlogQuota``."""
    await _namespace_write(request, await _quota_json(request))
    return no_content()


async def remove_namespace_quota(request: web.Request) -> web.Response:
    """``DELETE .../{namespace}/backlogQuota``."""
    await _namespace_write(request, None)
    return no_content()


async def _topic_write(request: web.Request, quota: dict[str, object] | None) -> None:
    kind = _kind(request)
    ctx, name = existing_topic(request)
    throttling = topic_throttling(ctx)
    current = throttling.topic_policies(name) or TopicPolicies()
    quotas = dict(current.backLogQuotaMap)
    if quota is None:
        quotas.pop(kind, None)
    else:
        quotas[kind] = quota
    await throttling.store_topic_policies(
        name, msgspec.structs.replace(current, backLogQuotaMap=quotas)
    )


async def set_topic_quota(request: web.Request) -> web.Response:
    """``POST .../{topic}/backlogQuota``."""
    await _topic_write(request, await _quota_json(request))
    return no_content()


async def remove_topic_quota(request: web.Request) -> web.Response:
    """``DELETE .../{topic}/backlogQuota``."""
    await _topic_write(request, None)
    return no_content()


async def get_topic_quota_map(request: web.Request) -> web.Response:
    """``GET .../{topic}/backlogQuotaMap[?applied=true]``."""
    ctx, name = existing_topic(request)
    if query_bool(request, "applied"):
        quotas = ctx.topics.quotas
        return json_response({kind: quotas.quota(name, kind) for kind in BACKLOG_QUOTA_TYPES})
    policies = topic_throttling(ctx).topic_policies(name) or TopicPolicies()
    return json_response(policies.backLogQuotaMap)


def add_routes(app: web.Application) -> None:
    """Register the backlog quota routes."""
    router = app.router
    router.add_post(f"{_NAMESPACE}/backlogQuota", set_namespace_quota)
    router.add_delete(f"{_NAMESPACE}/backlogQuota", remove_namespace_quota)
    router.add_post(f"{TOPIC}/backlogQuota", set_topic_quota)
    router.add_delete(f"{TOPIC}/backlogQuota", remove_topic_quota)
    router.add_get(f"{TOPIC}/backlogQuotaMap", get_topic_quota_map)
