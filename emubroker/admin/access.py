"""Who may call which REST route: Pulsar's checks, by route, in one table-like function.

Pulsar's admin resources each call one validation before doing anything (``PulsarWebResource``):

* ``validateSuperUserAccess`` -> 401 "This operation requires super-user access";
* ``validateAdminAccessForTenant`` -> 401 "Don't have permission to administrate resources on
  this tenant" (a super-user or one of the tenant's ``adminRoles``);
* ``validateNamespaceOperation`` / ``validateNamespacePolicyOperation`` /
  ``validateTopicPolicyOperation`` -> **403** "Unauthorized to validate...";
* ``validateTopicOperation`` -> 401 "Unauthorized to validateTopicOperation for operation [X]
  on topic [t]"; HTTP lookups -> 401 "Don't have permission to connect to this namespace".

:func:`rule_for` maps a route (method and canonical path) to its check; a route it does not know
needs a super-user, so a route added later is closed until someone decides otherwise.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from emubroker.auth import NamespaceOperation, TopicOperation

__all__ = ["Check", "Rule", "rule_for"]


class Check(enum.Enum):
    ANYONE = "anyone"  # authenticated is enough
    SUPER_USER = "super-user"
    TENANT_ADMIN = "tenant-admin"
    NAMESPACE_OPERATION = "namespace-operation"
    NAMESPACE_POLICY = "namespace-policy"
    TOPIC_OPERATION = "topic-operation"
    TOPIC_POLICY = "topic-policy"
    LOOKUP = "lookup"


@dataclass(frozen=True, slots=True)
class Rule:
    """The check a route needs.

    Attributes:
        check: Which validation.
        topic_operation: For ``TOPIC_OPERATION`` and ``LOOKUP``.
        namespace_operation: For ``NAMESPACE_OPERATION``.
    """

    check: Check
    topic_operation: TopicOperation | None = None
    namespace_operation: NamespaceOperation | None = None


ANYONE: Final = Rule(Check.ANYONE)
SUPER_USER: Final = Rule(Check.SUPER_USER)
TENANT_ADMIN: Final = Rule(Check.TENANT_ADMIN)
NAMESPACE_POLICY: Final = Rule(Check.NAMESPACE_POLICY)
TOPIC_POLICY: Final = Rule(Check.TOPIC_POLICY)


def _topic(operation: TopicOperation) -> Rule:
    return Rule(Check.TOPIC_OPERATION, topic_operation=operation)


def _namespace(operation: NamespaceOperation) -> Rule:
    return Rule(Check.NAMESPACE_OPERATION, namespace_operation=operation)


_TOPIC_READS: Final = {
    "stats": TopicOperation.GET_STATS,
    "partitioned-stats": TopicOperation.GET_STATS,
    "internalStats": TopicOperation.GET_STATS,
    "lastMessageId": TopicOperation.GET_STATS,
    "subscriptions": TopicOperation.GET_SUBSCRIPTIONS,
    "unload": TopicOperation.UNLOAD,
    "compaction": TopicOperation.COMPACT,
    "all_subscription": TopicOperation.EXPIRE_MESSAGES,
    "examinemessage": TopicOperation.PEEK_MESSAGES,
    "ledger": TopicOperation.PEEK_MESSAGES,
}
_SUBSCRIPTION_ACTIONS: Final = {
    "skip": TopicOperation.SKIP,
    "skip_all": TopicOperation.SKIP,
    "resetcursor": TopicOperation.RESET_CURSOR,
    "expireMessages": TopicOperation.EXPIRE_MESSAGES,
    "position": TopicOperation.PEEK_MESSAGES,
}
_DOMAINS: Final = frozenset({"{domain}", "persistent", "non-persistent"})


def rule_for(method: str, canonical: str) -> Rule:
    """The check of a route (see the module docstring).

    Args:
        method: The HTTP method (``HEAD`` counts as ``GET``).
        canonical: The route's canonical path, e.g. ``/admin/v2/tenants/{tenant}``.
    """
    if method == "HEAD":
        method = "GET"
    segments = canonical.strip("/").split("/")
    if segments[0] == "metrics":
        return ANYONE
    if segments[0] == "dashboard":
        # The page and its JSON show every broker's load report and the bundles' owners: what
        # Pulsar's brokers and broker-stats endpoints give super-users only.
        return SUPER_USER
    if segments[0] == "lookup":
        if segments[-1] == "bundle":
            return _namespace(NamespaceOperation.GET_BUNDLE)
        return Rule(Check.LOOKUP, topic_operation=TopicOperation.LOOKUP)
    if segments[:2] != ["admin", "v2"] or len(segments) < 3:
        return SUPER_USER
    head, rest = segments[2], segments[3:]
    if head == "clusters":
        return ANYONE if not rest and method == "GET" else SUPER_USER
    if head == "brokers":
        return ANYONE if rest in (["ready"], ["version"]) else SUPER_USER
    if head == "tenants":
        if not rest or method == "PUT":
            return SUPER_USER
        return TENANT_ADMIN
    if head == "namespaces":
        return _namespace_rule(method, rest)
    if head == "schemas":
        return _topic(TopicOperation.GET_METADATA) if method == "GET" else TENANT_ADMIN
    if head in _DOMAINS:
        return _topic_rule(method, rest)
    return SUPER_USER


def _namespace_rule(method: str, rest: list[str]) -> Rule:
    # rest: [tenant, namespace, what...]
    if len(rest) == 1:
        return TENANT_ADMIN  # list a tenant's namespaces (validateTenantOperation)
    if len(rest) == 2:
        return NAMESPACE_POLICY if method == "GET" else TENANT_ADMIN  # policies / create, delete
    what = rest[2]
    if "unload" in (what, *rest[3:4]):
        return SUPER_USER  # validateSuperUserAccess (a namespace's and a bundle's unload)
    if rest[3:] == ["split"]:
        return SUPER_USER  # internalSplitNamespaceBundle: validateSuperUserAccess
    if what == "topics":
        return _namespace(NamespaceOperation.GET_TOPICS)
    if what == "bundles":
        return _namespace(NamespaceOperation.GET_BUNDLE)
    if what == "permissions":
        if method == "GET":
            return _namespace(NamespaceOperation.GET_PERMISSION)
        if method == "POST" and rest[3:4] == ["subscription"]:
            return _namespace(NamespaceOperation.GRANT_PERMISSION)
        return _namespace(
            NamespaceOperation.GRANT_PERMISSION
            if method == "POST"
            else NamespaceOperation.REVOKE_PERMISSION
        )
    return NAMESPACE_POLICY


def _topic_rule(method: str, rest: list[str]) -> Rule:
    # rest: [tenant, namespace, topic-or-"partitioned", what...]
    if len(rest) < 3 or rest[2] == "partitioned":
        return _namespace(NamespaceOperation.GET_TOPICS)
    if len(rest) == 3:
        return _namespace(
            NamespaceOperation.DELETE_TOPIC
            if method == "DELETE"
            else NamespaceOperation.CREATE_TOPIC
        )
    what = rest[3]
    if what == "partitions":
        if method == "GET":
            return _topic(TopicOperation.GET_METADATA)
        if method == "DELETE":
            return _namespace(NamespaceOperation.DELETE_TOPIC)
        return _namespace(NamespaceOperation.CREATE_TOPIC) if method == "PUT" else TOPIC_POLICY
    if what == "permissions":
        return TENANT_ADMIN
    if what == "subscription":
        if len(rest) == 5:
            return _topic(
                TopicOperation.UNSUBSCRIBE if method == "DELETE" else TopicOperation.SUBSCRIBE
            )
        return _topic(_SUBSCRIPTION_ACTIONS.get(rest[5], TopicOperation.CONSUME))
    if what in _TOPIC_READS:
        return _topic(_TOPIC_READS[what])
    return TOPIC_POLICY
