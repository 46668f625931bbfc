"""Authorization: the rules of Pulsar's ``PulsarAuthorizationProvider``.

Who may do what (``AuthorizationService`` + ``PulsarAuthorizationProvider``):

1. A **super-user** (``superUserRoles``) may do everything.
2. A **tenant admin** (a role in the tenant's ``adminRoles``) may do everything on the tenant's
   namespaces and topics; tenant-level operations need a super-user or a tenant admin.
3. Otherwise a topic operation needs a **permission** (``AuthAction``) granted to the role on the
   namespace (``namespace_auth``), on the topic (``destination_auth`` under the complete name),
   or, for a partition, on its partitioned topic; with ``authorizationAllowWildcardsMatching``
   a granted ``prefix*`` or ``*suffix`` role matches too:

   * LOOKUP, GET_STATS, GET_METADATA: ``produce`` or ``consume``;
   * PRODUCE: ``produce``;
   * CONSUME, SUBSCRIBE, UNSUBSCRIBE, SKIP, EXPIRE_MESSAGES, PEEK_MESSAGES, RESET_CURSOR,
     GET_SUBSCRIPTIONS, GET_BACKLOG_SIZE: ``consume``, and through a subscription that lists
     its roles (``subscription_auth_roles``) only those roles; with ``subscription_auth_mode``
     ``Prefix`` the subscription name must start with the role;
   * TERMINATE, COMPACT, UNLOAD, OFFLOAD, TRIM_TOPIC, metadata changes: tenant admins only.

4. Namespace operations: GET_TOPICS, GET_TOPIC, GET_BUNDLE need ``consume`` or ``produce`` on the
   namespace; UNSUBSCRIBE, CLEAR_BACKLOG, TRIM_TOPIC ``consume``; PACKAGES ``packages``;
   CREATE_TOPIC, DELETE_TOPIC, bundles and permissions tenant admins only. Namespace and topic
   *policies* (read or write) need a tenant admin.

Namespace policies are read from the broker's in-memory view (no store round trip); tenants
(``adminRoles``) from the metadata store, so a change through any broker counts at once.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from emubroker.policies import AuthAction

if TYPE_CHECKING:
    from collections.abc import Mapping

    from emubroker.config.security import SecurityConfig
    from emubroker.naming import NamespaceName, TopicName
    from emubroker.policies import Policies, TenantInfo

__all__ = [
    "AuthorizationDenied",
    "AuthorizationService",
    "NamespaceOperation",
    "TenantNotFound",
    "TopicOperation",
]


class AuthorizationDenied(Exception):
    """A refusal with Pulsar's own message (subscription prefix mode)."""


class TenantNotFound(Exception):
    """The tenant of a checked resource does not exist (Pulsar: "Tenant does not exist")."""


class TopicOperation(enum.Enum):
    LOOKUP = "lookup"
    GET_STATS = "get_stats"
    GET_METADATA = "get_metadata"
    PRODUCE = "produce"
    CONSUME = "consume"
    SUBSCRIBE = "subscribe"
    UNSUBSCRIBE = "unsubscribe"
    SKIP = "skip"
    EXPIRE_MESSAGES = "expire_messages"
    PEEK_MESSAGES = "peek_messages"
    RESET_CURSOR = "reset_cursor"
    GET_SUBSCRIPTIONS = "get_subscriptions"
    GET_BACKLOG_SIZE = "get_backlog_size"
    TERMINATE = "terminate"
    COMPACT = "compact"
    UNLOAD = "unload"
    OFFLOAD = "offload"
    TRIM_TOPIC = "trim_topic"
    UPDATE_METADATA = "update_metadata"
    DELETE_METADATA = "delete_metadata"


class NamespaceOperation(enum.Enum):
    GET_TOPICS = "get_topics"
    GET_TOPIC = "get_topic"
    GET_BUNDLE = "get_bundle"
    UNSUBSCRIBE = "unsubscribe"
    CLEAR_BACKLOG = "clear_backlog"
    TRIM_TOPIC = "trim_topic"
    PACKAGES = "packages"
    CREATE_TOPIC = "create_topic"
    DELETE_TOPIC = "delete_topic"
    ADD_BUNDLE = "add_bundle"
    DELETE_BUNDLE = "delete_bundle"
    GRANT_PERMISSION = "grant_permission"
    GET_PERMISSION = "get_permission"
    REVOKE_PERMISSION = "revoke_permission"


_LOOKUP_OPS = frozenset(
    {TopicOperation.LOOKUP, TopicOperation.GET_STATS, TopicOperation.GET_METADATA}
)
_CONSUME_OPS = frozenset(
    {
        TopicOperation.CONSUME,
        TopicOperation.SUBSCRIBE,
        TopicOperation.UNSUBSCRIBE,
        TopicOperation.SKIP,
        TopicOperation.EXPIRE_MESSAGES,
        TopicOperation.PEEK_MESSAGES,
        TopicOperation.RESET_CURSOR,
        TopicOperation.GET_SUBSCRIPTIONS,
        TopicOperation.GET_BACKLOG_SIZE,
    }
)
_NAMESPACE_ACTIONS: Mapping[NamespaceOperation, tuple[AuthAction, ...]] = {
    NamespaceOperation.GET_TOPICS: (AuthAction.consume, AuthAction.produce),
    NamespaceOperation.GET_TOPIC: (AuthAction.consume, AuthAction.produce),
    NamespaceOperation.GET_BUNDLE: (AuthAction.consume, AuthAction.produce),
    NamespaceOperation.UNSUBSCRIBE: (AuthAction.consume,),
    NamespaceOperation.CLEAR_BACKLOG: (AuthAction.consume,),
    NamespaceOperation.TRIM_TOPIC: (AuthAction.consume,),
    NamespaceOperation.PACKAGES: (AuthAction.packages,),
}


class AuthorizationService:
    """Answers "may this role do that" (see the module docstring for the rules).

    Args:
        config: ``superUserRoles``, ``authorizationAllowWildcardsMatching``.
        namespace_policies: A namespace's policies, None if it does not exist (synchronous).
        tenant_info: A tenant's ``TenantInfo``, None if it does not exist.
    """

    def __init__(
        self,
        config: SecurityConfig,
        *,
        namespace_policies: Callable[[NamespaceName], Policies | None],
        tenant_info: Callable[[str], Awaitable[TenantInfo | None]],
    ) -> None:
        self._super_users = frozenset(config.csv(config.superUserRoles))
        self._wildcards = config.authorizationAllowWildcardsMatching
        self._policies = namespace_policies
        self._tenant_info = tenant_info

    @classmethod
    def from_config(
        cls,
        config: SecurityConfig,
        *,
        namespace_policies: Callable[[NamespaceName], Policies | None],
        tenant_info: Callable[[str], Awaitable[TenantInfo | None]],
    ) -> AuthorizationService | None:
        """The service ``config`` asks for; None when ``authorizationEnabled`` is false."""
        if not config.authorizationEnabled:
            return None
        return cls(config, namespace_policies=namespace_policies, tenant_info=tenant_info)

    # ---- roles -------------------------------------------------------------------------------

    def is_super_user(self, role: str | None) -> bool:
        """Rule 1."""
        return role is not None and role in self._super_users

    async def is_tenant_admin(self, tenant: str, role: str | None) -> bool:
        """Rule 2 (a super-user counts).

        Raises:
            TenantNotFound: The tenant does not exist (and the role is no super-user), as
                ``validateTenantAdminAccess`` fails; callers answer it each in their own way.
        """
        if self.is_super_user(role):
            return True
        info = await self._tenant_info(tenant)
        if info is None:
            raise TenantNotFound("Tenant does not exist")
        return role is not None and role in info.admin_roles

    # ---- topics ------------------------------------------------------------------------------

    async def allow_topic_operation(
        self,
        topic: TopicName,
        role: str | None,
        operation: TopicOperation,
        *,
        subscription: str | None = None,
    ) -> bool:
        """Whether ``role`` may do ``operation`` on ``topic`` (rules 1-3).

        Raises:
            AuthorizationDenied: Refused with Pulsar's message (subscription prefix mode).
            TenantNotFound: The topic's tenant does not exist.
        """
        if await self.is_tenant_admin(topic.tenant, role):
            return True
        if operation in _LOOKUP_OPS:
            return self.can_lookup(topic, role)
        if operation is TopicOperation.PRODUCE:
            return self.has_permission(topic, role, AuthAction.produce)
        if operation in _CONSUME_OPS:
            return self.can_consume(topic, role, subscription)
        return False  # admin-only operations

    def can_lookup(self, topic: TopicName, role: str | None) -> bool:
        """``produce`` or ``consume`` (``canLookupAsync``)."""
        return self.has_permission(topic, role, AuthAction.produce) or self.can_consume(
            topic, role, None
        )

    def can_consume(self, topic: TopicName, role: str | None, subscription: str | None) -> bool:
        """``consume``, within the subscription's roles and naming mode (``canConsumeAsync``).

        Raises:
            AuthorizationDenied: Prefix mode and the subscription does not start with the role.
        """
        policies = self._policies(topic.namespace)
        if policies is not None and subscription:
            roles = policies.auth_policies.subscription_auth_roles.get(subscription)
            if roles and role not in roles:
                return False
            if policies.subscription_auth_mode == "Prefix" and not subscription.startswith(
                role or ""
            ):
                raise AuthorizationDenied(
                    "Failed to create consumer - The subscription name needs to be prefixed by"
                    f" the authentication role, like {role}-xxxx for topic: {topic}"
                )
        return self.has_permission(topic, role, AuthAction.consume)

    def has_permission(self, topic: TopicName, role: str | None, action: AuthAction) -> bool:
        """Rule 3: a grant on the namespace, the topic or its partitioned topic."""
        policies = self._policies(topic.namespace)
        if policies is None or role is None:
            return False
        auth = policies.auth_policies
        if action in auth.namespace_auth.get(role, ()):
            return True
        topic_roles = auth.destination_auth.get(str(topic))
        if topic_roles is not None and action in topic_roles.get(role, ()):
            return True
        if self._wildcards and (
            _wildcard_match(role, action, auth.namespace_auth)
            or (topic_roles is not None and _wildcard_match(role, action, topic_roles))
        ):
            return True
        if topic.partition_index >= 0:
            base_roles = auth.destination_auth.get(str(topic.partitioned_topic_name))
            if base_roles is not None and action in base_roles.get(role, ()):
                return True
        return False

    # ---- namespaces --------------------------------------------------------------------------

    async def allow_namespace_operation(
        self, namespace: NamespaceName, role: str | None, operation: NamespaceOperation
    ) -> bool:
        """Rule 4 for namespace operations.

        Raises:
            TenantNotFound: The namespace's tenant does not exist.
        """
        if await self.is_tenant_admin(namespace.tenant, role):
            return True
        actions = _NAMESPACE_ACTIONS.get(operation)
        if actions is None or role is None:
            return False
        policies = self._policies(namespace)
        if policies is None:
            return False
        granted = policies.auth_policies.namespace_auth
        return any(
            action in granted.get(role, ())
            or (self._wildcards and _wildcard_match(role, action, granted))
            for action in actions
        )


def _wildcard_match(
    role: str, action: AuthAction, granted: Mapping[str, Iterable[AuthAction]]
) -> bool:
    # PulsarAuthorizationProvider.checkWildcardPermission: "abc*" and "*xyz" entries.
    for permitted, actions in granted.items():
        if not permitted or action not in actions:
            continue
        if permitted.endswith("*") and role.startswith(permitted[:-1]):
            return True
        if permitted.startswith("*") and role.endswith(permitted[1:]):
            return True
    return False
