"""Permissions: grant-permission, revoke-permission and permissions, on namespaces and topics.

Pulsar keeps permissions in the namespace's ``Policies.auth_policies`` (``namespace_auth``,
``destination_auth`` by complete topic name, ``subscription_auth_roles``), written with
compare-and-set like any policy, so every broker's authorization sees a change at once
(``PulsarAuthorizationProvider.grantPermissionAsync`` and friends):

* ``GET    /admin/v2/namespaces/{t}/{ns}/permissions``: ``{role: [actions]}``;
* ``POST   /admin/v2/namespaces/{t}/{ns}/permissions/{role}`` (body: actions): set them;
* ``DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{role}``: remove the role;
* ``GET    /admin/v2/namespaces/{t}/{ns}/permissions/subscription``: ``{sub: [roles]}``;
* ``POST   /admin/v2/namespaces/{t}/{ns}/permissions/subscription/{sub}`` (body: roles);
* ``DELETE /admin/v2/namespaces/{t}/{ns}/permissions/{sub}/{role}``;
* ``GET/POST/DELETE /admin/v2/{domain}/{t}/{ns}/{topic}/permissions[/{role}]``: the same on one
  topic; GET merges the namespace's grants with the topic's (a union per role), and a topic
  must exist (``allowAclChangesOnNonExistentTopics`` is false by default). Revoking on a
  partitioned topic revokes on its partitions too.

Who may call them is decided before the handler runs (``emubroker.admin.access``). Granting
works whether or not authorization is enabled, as in Pulsar.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web

from emubroker.admin.errors import NOT_FOUND, RestError
from emubroker.admin.http import (
    context,
    json_response,
    namespace_of,
    no_content,
    read_json,
    topic_of,
)
from emubroker.policies import AuthAction, Policies, PolicyNotFoundError

__all__ = ["add_routes"]


def _sorted(actions: list[AuthAction]) -> list[AuthAction]:
    return sorted(set(actions), key=list(AuthAction).index)


async def _namespace_policies(request: web.Request) -> Policies:
    policies = await context(request).policies.get_namespace(namespace_of(request))
    if policies is None:
        raise RestError(NOT_FOUND, "Namespace does not exist")
    return policies


async def _update(request: web.Request, change: Callable[[Policies], Policies]) -> None:
    namespace = namespace_of(request)
    try:
        await context(request).policies.update_namespace(namespace, change)
    except PolicyNotFoundError:
        raise RestError(NOT_FOUND, "Namespace does not exist") from None


async def get_namespace_permissions(request: web.Request) -> web.Response:
    """``GET .../permissions``."""
    policies = await _namespace_policies(request)
    return json_response(policies.auth_policies.namespace_auth)


async def grant_on_namespace(request: web.Request) -> web.Response:
    """``POST .../permissions/{role}``: the role's actions on every topic of the namespace."""
    role = request.match_info["role"]
    actions = await read_json(request, list[AuthAction], what="actions")

    def change(policies: Policies) -> Policies:
        policies.auth_policies.namespace_auth[role] = _sorted(actions)
        return policies

    await _update(request, change)
    return no_content()


async def revoke_on_namespace(request: web.Request) -> web.Response:
    """``DELETE .../permissions/{role}``."""
    role = request.match_info["role"]

    def change(policies: Policies) -> Policies:
        policies.auth_policies.namespace_auth.pop(role, None)
        return policies

    await _update(request, change)
    return no_content()


async def get_subscription_permissions(request: web.Request) -> web.Response:
    """``GET .../permissions/subscription``."""
    policies = await _namespace_policies(request)
    return json_response(policies.auth_policies.subscription_auth_roles)


async def grant_on_subscription(request: web.Request) -> web.Response:
    """``POST .../permissions/subscription/{subscription}``: only these roles may consume."""
    subscription = request.match_info["subscription"]
    roles = await read_json(request, list[str], what="roles")

    def change(policies: Policies) -> Policies:
        policies.auth_policies.subscription_auth_roles[subscription] = sorted(set(roles))
        return policies

    await _update(request, change)
    return no_content()


async def revoke_on_subscription(request: web.Request) -> web.Response:
    """``DELETE .../permissions/{subscription}/{role}``."""
    subscription, role = request.match_info["subscription"], request.match_info["role"]

    def change(policies: Policies) -> Policies:
        roles = policies.auth_policies.subscription_auth_roles.get(subscription)
        if roles is None:
            raise RestError(NOT_FOUND, "couldn't find subscription")
        remaining = [r for r in roles if r != role]
        if remaining:
            policies.auth_policies.subscription_auth_roles[subscription] = remaining
        else:
            del policies.auth_policies.subscription_auth_roles[subscription]
        return policies

    await _update(request, change)
    return no_content()


def _existing_topic(request: web.Request) -> str:
    name = topic_of(request)
    if not context(request).topics.topic_exists(name):
        raise RestError(NOT_FOUND, f"Topic {name} not found")
    return str(name)


async def get_topic_permissions(request: web.Request) -> web.Response:
    """``GET TOPIC/permissions``: the namespace's grants united with the topic's."""
    topic = _existing_topic(request)
    auth = (await _namespace_policies(request)).auth_policies
    merged = {role: list(actions) for role, actions in auth.namespace_auth.items()}
    for role, actions in auth.destination_auth.get(topic, {}).items():
        merged[role] = _sorted([*merged.get(role, []), *actions])
    return json_response(merged)


async def grant_on_topic(request: web.Request) -> web.Response:
    """``POST TOPIC/permissions/{role}``."""
    topic = _existing_topic(request)
    role = request.match_info["role"]
    actions = await read_json(request, list[AuthAction], what="actions")

    def change(policies: Policies) -> Policies:
        policies.auth_policies.destination_auth.setdefault(topic, {})[role] = _sorted(actions)
        return policies

    await _update(request, change)
    return no_content()


async def revoke_on_topic(request: web.Request) -> web.Response:
    """``DELETE TOPIC/permissions/{role}``: on the topic and each of its partitions."""
    name = topic_of(request)
    _existing_topic(request)
    role = request.match_info["role"]
    partitions = context(request).topics.partitions_of(name)
    names = [str(name), *(str(name.partition(i)) for i in range(partitions))]

    def change(policies: Policies) -> Policies:
        auth = policies.auth_policies.destination_auth
        for topic in names:
            roles = auth.get(topic)
            if roles is not None:
                roles.pop(role, None)
                if not roles:
                    del auth[topic]
        return policies

    await _update(request, change)
    return no_content()


def add_routes(app: web.Application) -> None:
    """Register the permission routes."""
    router = app.router
    ns = "/admin/v2/namespaces/{tenant}/{namespace}/permissions"
    router.add_get(ns, get_namespace_permissions)
    router.add_get(f"{ns}/subscription", get_subscription_permissions)
    router.add_post(f"{ns}/subscription/{{subscription}}", grant_on_subscription)
    router.add_post(f"{ns}/{{role}}", grant_on_namespace)
    router.add_delete(f"{ns}/{{role}}", revoke_on_namespace)
    router.add_delete(f"{ns}/{{subscription}}/{{role}}", revoke_on_subscription)
    topic = "/admin/v2/{domain:persistent|non-persistent}/{tenant}/{namespace}/{topic}/permissions"
    router.add_get(topic, get_topic_permissions)
    router.add_post(f"{topic}/{{role}}", grant_on_topic)
    router.add_delete(f"{topic}/{{role}}", revoke_on_topic)
