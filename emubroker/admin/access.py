"""Who may call which REST route: Pulsar's check per route, as one table (:data:`ROUTE_RULES`).

Pulsar's admin resources each call one validation before doing anything (``PulsarWebResource``
and the ``*Base`` resources; read at Pulsar 4.x, the version the official clients' CI runs):

* ``validateSuperUserAccess`` (and the 4.x ``validateBothSuperuserAnd{Broker,Cluster}Operation``,
  whose provider check is the super-user check again) -> 401 "This operation requires
  super-user access";
* ``TenantsBase.validateBothSuperUserAndTenantOperation`` -> a super-user **or** one of the
  tenant's ``adminRoles`` (``PulsarAuthorizationProvider.allowTenantOperationAsync`` is
  ``validateTenantAdminAccess`` since apache/pulsar#23660, 4.0.2), else 401
  "Unauthorized to validateBothTenantOperationAndSuperUser ..." (a missing tenant too);
* ``validateAdminAccessForTenant`` / ``validateTenantOperation`` -> 401 "Don't have permission
  to administrate resources on this tenant" (404 "Tenant does not exist" for a missing tenant);
* ``validateNamespaceOperation`` / ``validateNamespacePolicyOperation`` /
  ``validateTopicPolicyOperation`` -> **403** "Unauthorized to validate...";
* ``validateTopicOperation`` -> 401 "Unauthorized to validateTopicOperation for operation [X]
  on topic [t]" (HTTP lookups included: ``TopicLookupBase`` checks ``LOOKUP`` this way).

:data:`ROUTE_RULES` is data: one ``(method, canonical path)`` line per served route. A route it
does not list needs a super-user (closed until someone decides), and
``tests/emubroker/admin/test_route_authorization.py`` fails for a served route missing here or
from its own table of Pulsar's levels: adding a route means adding a line to both.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final

import msgspec

from emubroker.auth import NamespaceOperation, TopicOperation

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ROUTE_RULES", "Check", "Rule", "TenantOperation", "rule_for"]


class Check(enum.Enum):
    ANYONE = "anyone"  # authenticated is enough
    SUPER_USER = "super-user"
    TENANT_OPERATION = "tenant-operation"  # super-user or tenant admin, 401 either way
    TENANT_ADMIN = "tenant-admin"
    NAMESPACE_OPERATION = "namespace-operation"
    NAMESPACE_POLICY = "namespace-policy"
    TOPIC_OPERATION = "topic-operation"
    TOPIC_POLICY = "topic-policy"


class TenantOperation(enum.Enum):
    """Pulsar's ``TenantOperation`` names that ``TenantsBase`` checks (they appear in messages)."""

    LIST_TENANTS = "list_tenants"
    GET_TENANT = "get_tenant"
    CREATE_TENANT = "create_tenant"
    UPDATE_TENANT = "update_tenant"
    DELETE_TENANT = "delete_tenant"


class Rule(msgspec.Struct, frozen=True):
    """The check a route needs.

    Attributes:
        check: Which validation.
        topic_operation: For ``TOPIC_OPERATION``.
        namespace_operation: For ``NAMESPACE_OPERATION``.
        tenant_operation: For ``TENANT_OPERATION``.
    """

    check: Check
    topic_operation: TopicOperation | None = None
    namespace_operation: NamespaceOperation | None = None
    tenant_operation: TenantOperation | None = None


ANYONE: Final = Rule(Check.ANYONE)
SUPER_USER: Final = Rule(Check.SUPER_USER)
TENANT_ADMIN: Final = Rule(Check.TENANT_ADMIN)
NAMESPACE_POLICY: Final = Rule(Check.NAMESPACE_POLICY)
TOPIC_POLICY: Final = Rule(Check.TOPIC_POLICY)


def _topic(operation: TopicOperation) -> Rule:
    return Rule(Check.TOPIC_OPERATION, topic_operation=operation)


def _namespace(operation: NamespaceOperation) -> Rule:
    return Rule(Check.NAMESPACE_OPERATION, namespace_operation=operation)


def _tenant(operation: TenantOperation) -> Rule:
    return Rule(Check.TENANT_OPERATION, tenant_operation=operation)


def _policy(
    path: str, rule: Rule, methods: tuple[str, ...] = ("GET", "POST", "DELETE")
) -> dict[tuple[str, str], Rule]:
    """The read/write/remove trio a policy endpoint has."""
    return {(method, path): rule for method in methods}


_V2: Final = "/admin/v2"
_B: Final = f"{_V2}/brokers"
_C: Final = f"{_V2}/clusters/{{cluster}}"
_N: Final = f"{_V2}/namespaces/{{tenant}}/{{namespace}}"
_T: Final = f"{_V2}/{{domain}}/{{tenant}}/{{namespace}}/{{topic}}"
_SUB: Final = f"{_T}/subscription/{{subscription}}"
_SCHEMA: Final = f"{_V2}/schemas/{{tenant}}/{{namespace}}/{{topic}}"
_LOOKUP: Final = "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"

_Ns = NamespaceOperation
_To = TopicOperation
_Te = TenantOperation

# The served routes: emubroker.admin.routing registers exactly these, in this order, which
# matters where two paths of one method can match the same URL (aiohttp tries them in
# registration order): a path with a literal segment comes before one with a variable there.
ROUTE_RULES: Final[Mapping[tuple[str, str], Rule]] = {
    # Prometheus: outside the admin resources (authenticateMetricsEndpoint decides on login).
    ("GET", "/metrics"): ANYONE,
    ("GET", "/metrics/"): ANYONE,
    # The dashboard shows every broker's load report and the bundles' owners: what Pulsar's
    # brokers and broker-stats endpoints give super-users only.
    **{
        ("GET", path): SUPER_USER
        for path in (
            "/dashboard",
            "/dashboard/",
            "/dashboard/static/{name}",
            "/dashboard/api/state",
            "/dashboard/api/local",
        )
    },
    # BrokersBase: everything validateBothSuperuserAndBrokerOperation but ready and version.
    ("GET", _B): SUPER_USER,
    ("GET", f"{_B}/health"): SUPER_USER,
    ("GET", f"{_B}/leaderBroker"): SUPER_USER,
    ("GET", f"{_B}/ready"): ANYONE,
    ("GET", f"{_B}/version"): ANYONE,
    ("GET", f"{_B}/configuration"): SUPER_USER,
    ("GET", f"{_B}/configuration/values"): SUPER_USER,
    ("GET", f"{_B}/configuration/runtime"): SUPER_USER,
    ("POST", f"{_B}/configuration/{{key}}/{{value}}"): SUPER_USER,
    ("DELETE", f"{_B}/configuration/{{key}}"): SUPER_USER,
    ("GET", f"{_B}/{{cluster}}"): SUPER_USER,
    ("GET", f"{_B}/{{cluster}}/{{broker}}/ownedNamespaces"): SUPER_USER,
    # BrokerStatsBase: validateSuperUserAccess.
    ("GET", f"{_V2}/broker-stats/load-report"): SUPER_USER,
    ("GET", f"{_V2}/broker-stats/topics"): SUPER_USER,
    # ClustersBase: getClusters checks nothing; the rest validateBothSuperuserAndCluster*.
    ("GET", f"{_V2}/clusters"): ANYONE,
    **_policy(_C, SUPER_USER, ("GET", "PUT", "POST", "DELETE")),
    ("GET", f"{_C}/namespaceIsolationPolicies"): SUPER_USER,
    # Before ``{policy}``: "brokers" is not a policy name here, as in Pulsar's resource.
    ("GET", f"{_C}/namespaceIsolationPolicies/brokers"): SUPER_USER,
    ("GET", f"{_C}/namespaceIsolationPolicies/brokers/{{broker}}"): SUPER_USER,
    **_policy(f"{_C}/namespaceIsolationPolicies/{{policy}}", SUPER_USER),
    ("GET", f"{_C}/failureDomains"): SUPER_USER,
    **_policy(f"{_C}/failureDomains/{{domain}}", SUPER_USER),
    # TenantsBase: validateBothSuperUserAndTenantOperation.
    ("GET", f"{_V2}/tenants"): _tenant(_Te.LIST_TENANTS),
    ("GET", f"{_V2}/tenants/{{tenant}}"): _tenant(_Te.GET_TENANT),
    ("PUT", f"{_V2}/tenants/{{tenant}}"): _tenant(_Te.CREATE_TENANT),
    ("POST", f"{_V2}/tenants/{{tenant}}"): _tenant(_Te.UPDATE_TENANT),
    ("DELETE", f"{_V2}/tenants/{{tenant}}"): _tenant(_Te.DELETE_TENANT),
    # NamespacesBase.
    ("GET", f"{_V2}/namespaces/{{tenant}}"): TENANT_ADMIN,  # LIST_NAMESPACES
    ("GET", _N): NAMESPACE_POLICY,  # getPolicies: ALL / READ
    ("PUT", _N): TENANT_ADMIN,  # CREATE_NAMESPACE
    ("DELETE", _N): TENANT_ADMIN,  # DELETE_NAMESPACE
    ("GET", f"{_N}/topics"): _namespace(_Ns.GET_TOPICS),
    ("GET", f"{_N}/bundles"): _namespace(_Ns.GET_BUNDLE),
    ("PUT", f"{_N}/unload"): SUPER_USER,
    ("PUT", f"{_N}/{{bundle}}/unload"): SUPER_USER,
    ("PUT", f"{_N}/{{bundle}}/split"): SUPER_USER,
    ("GET", f"{_N}/permissions"): _namespace(_Ns.GET_PERMISSION),
    ("GET", f"{_N}/permissions/subscription"): _namespace(_Ns.GET_PERMISSION),
    ("POST", f"{_N}/permissions/subscription/{{subscription}}"): _namespace(_Ns.GRANT_PERMISSION),
    ("POST", f"{_N}/permissions/{{role}}"): _namespace(_Ns.GRANT_PERMISSION),
    ("DELETE", f"{_N}/permissions/{{role}}"): _namespace(_Ns.REVOKE_PERMISSION),
    ("DELETE", f"{_N}/permissions/{{subscription}}/{{role}}"): _namespace(_Ns.REVOKE_PERMISSION),
    **_policy(f"{_N}/schemaCompatibilityStrategy", NAMESPACE_POLICY, ("GET", "PUT")),
    **_policy(f"{_N}/deduplication", NAMESPACE_POLICY),
    **_policy(f"{_N}/messageTTL", NAMESPACE_POLICY),
    **_policy(f"{_N}/retention", NAMESPACE_POLICY),
    ("GET", f"{_N}/backlogQuotaMap"): NAMESPACE_POLICY,
    **_policy(f"{_N}/backlogQuota", NAMESPACE_POLICY, ("POST", "DELETE")),
    **_policy(f"{_N}/maxProducersPerTopic", NAMESPACE_POLICY),
    **_policy(f"{_N}/maxConsumersPerTopic", NAMESPACE_POLICY),
    **_policy(f"{_N}/maxConsumersPerSubscription", NAMESPACE_POLICY),
    **_policy(f"{_N}/maxSubscriptionsPerTopic", NAMESPACE_POLICY),
    **_policy(f"{_N}/antiAffinity", NAMESPACE_POLICY),
    **_policy(f"{_N}/dispatchRate", NAMESPACE_POLICY),
    **_policy(f"{_N}/subscriptionDispatchRate", NAMESPACE_POLICY),
    **_policy(f"{_N}/autoTopicCreation", NAMESPACE_POLICY),
    **_policy(f"{_N}/autoSubscriptionCreation", NAMESPACE_POLICY),
    **_policy(f"{_N}/subscriptionExpirationTime", NAMESPACE_POLICY),
    **_policy(f"{_N}/maxTopicsPerNamespace", NAMESPACE_POLICY),
    **_policy(f"{_N}/persistence", NAMESPACE_POLICY),
    **_policy(f"{_N}/publishRate", NAMESPACE_POLICY),
    **_policy(f"{_N}/compactionThreshold", NAMESPACE_POLICY, ("GET", "PUT", "DELETE")),
    **_policy(f"{_N}/offloadThreshold", NAMESPACE_POLICY, ("GET", "PUT")),
    **_policy(f"{_N}/offloadThresholdInSeconds", NAMESPACE_POLICY, ("GET", "PUT")),
    **_policy(f"{_N}/offloadDeletionLagMs", NAMESPACE_POLICY, ("GET", "PUT", "DELETE")),
    # Properties: validateAdminAccessForTenant; bookie affinity: validateSuperUserAccess.
    **_policy(f"{_N}/properties", TENANT_ADMIN, ("GET", "PUT", "DELETE")),
    **_policy(f"{_N}/property/{{key}}", TENANT_ADMIN, ("GET", "DELETE")),
    ("PUT", f"{_N}/property/{{key}}/{{value}}"): TENANT_ADMIN,
    **_policy(f"{_N}/persistence/bookieAffinity", SUPER_USER),
    # PersistentTopicsBase (NonPersistentTopics: the same levels).
    ("GET", f"{_V2}/{{domain}}/{{tenant}}/{{namespace}}"): _namespace(_Ns.GET_TOPICS),
    ("GET", f"{_V2}/{{domain}}/{{tenant}}/{{namespace}}/partitioned"): _namespace(_Ns.GET_TOPICS),
    ("PUT", _T): _namespace(_Ns.CREATE_TOPIC),
    ("DELETE", _T): _namespace(_Ns.DELETE_TOPIC),
    ("PUT", f"{_T}/partitions"): TOPIC_POLICY,  # PARTITION WRITE, then CREATE_TOPIC
    ("POST", f"{_T}/partitions"): TOPIC_POLICY,  # PARTITION WRITE
    ("GET", f"{_T}/partitions"): _topic(_To.LOOKUP),  # getPartitionedTopicMetadataAsync
    ("DELETE", f"{_T}/partitions"): _namespace(_Ns.DELETE_TOPIC),
    ("GET", f"{_T}/properties"): _topic(_To.GET_METADATA),
    ("PUT", f"{_T}/properties"): _topic(_To.UPDATE_METADATA),
    ("DELETE", f"{_T}/properties"): _topic(_To.DELETE_METADATA),
    ("GET", f"{_T}/permissions"): TENANT_ADMIN,
    ("POST", f"{_T}/permissions/{{role}}"): TENANT_ADMIN,
    ("DELETE", f"{_T}/permissions/{{role}}"): TENANT_ADMIN,
    # Before the subscription and message paths of the same length, which it was registered
    # before when each module registered its own routes (a subscription named "subscription").
    **_policy(f"{_T}/{{subName}}/dispatchRate", TOPIC_POLICY),
    ("GET", f"{_T}/stats"): _topic(_To.GET_STATS),
    ("GET", f"{_T}/partitioned-stats"): _topic(_To.GET_STATS),
    ("GET", f"{_T}/internalStats"): _topic(_To.GET_STATS),
    ("GET", f"{_T}/lastMessageId"): _topic(_To.PEEK_MESSAGES),
    ("GET", f"{_T}/messageid/{{timestamp}}"): _topic(_To.PEEK_MESSAGES),
    ("PUT", f"{_T}/unload"): _topic(_To.UNLOAD),
    ("PUT", f"{_T}/compaction"): _topic(_To.COMPACT),
    ("GET", f"{_T}/compaction"): _topic(_To.COMPACT),
    ("POST", f"{_T}/terminate"): _topic(_To.TERMINATE),
    ("POST", f"{_T}/terminate/partitions"): _topic(_To.TERMINATE),
    ("GET", f"{_T}/subscriptions"): _topic(_To.GET_SUBSCRIPTIONS),
    ("PUT", _SUB): _topic(_To.SUBSCRIBE),
    ("DELETE", _SUB): _topic(_To.UNSUBSCRIBE),
    ("POST", f"{_SUB}/skip/{{numMessages}}"): _topic(_To.SKIP),
    ("POST", f"{_SUB}/skip_all"): _topic(_To.SKIP),
    ("POST", f"{_SUB}/resetcursor/{{timestamp}}"): _topic(_To.RESET_CURSOR),
    ("POST", f"{_SUB}/resetcursor"): _topic(_To.RESET_CURSOR),
    ("POST", f"{_SUB}/expireMessages/{{expireTimeInSeconds}}"): _topic(_To.EXPIRE_MESSAGES),
    ("POST", f"{_T}/all_subscription/expireMessages/{{expireTimeInSeconds}}"): _topic(
        _To.EXPIRE_MESSAGES
    ),
    ("GET", f"{_SUB}/position/{{messagePosition}}"): _topic(_To.PEEK_MESSAGES),
    ("GET", f"{_T}/examinemessage"): _topic(_To.PEEK_MESSAGES),
    ("GET", f"{_T}/ledger/{{ledgerId}}/entry/{{entryId}}"): _topic(_To.PEEK_MESSAGES),
    **_policy(f"{_T}/dispatchRate", TOPIC_POLICY),
    **_policy(f"{_T}/subscriptionDispatchRate", TOPIC_POLICY),
    **_policy(f"{_T}/maxProducers", TOPIC_POLICY),
    **_policy(f"{_T}/maxConsumers", TOPIC_POLICY),
    **_policy(f"{_T}/maxConsumersPerSubscription", TOPIC_POLICY),
    **_policy(f"{_T}/maxSubscriptionsPerTopic", TOPIC_POLICY),
    **_policy(f"{_T}/backlogQuota", TOPIC_POLICY, ("POST", "DELETE")),
    ("GET", f"{_T}/backlogQuotaMap"): TOPIC_POLICY,
    **{
        key: TOPIC_POLICY
        for segment in (
            "messageTTL",
            "retention",
            "subscribeRate",
            "publishRate",
            "replicatorDispatchRate",
            "offloadPolicies",
            "autoSubscriptionCreation",
            "persistence",
            "maxMessageSize",
            "maxUnackedMessagesOnConsumer",
            "maxUnackedMessagesOnSubscription",
            "deduplicationSnapshotInterval",
            "replication",
            "delayedDelivery",
        )
        for key in _policy(f"{_T}/{segment}", TOPIC_POLICY)
    },
    **_policy(f"{_T}/schemaValidationEnforced", TOPIC_POLICY, ("GET", "POST")),
    **_policy(f"{_T}/schemaCompatibilityStrategy", TOPIC_POLICY, ("GET", "PUT", "DELETE")),
    # SchemasResourceBase: reads (and the version of a schema) GET_METADATA, upload PRODUCE,
    # delete and the compatibility test the tenant's admins.
    ("GET", f"{_SCHEMA}/schema"): _topic(_To.GET_METADATA),
    ("GET", f"{_SCHEMA}/schema/{{version}}"): _topic(_To.GET_METADATA),
    ("GET", f"{_SCHEMA}/schemas"): _topic(_To.GET_METADATA),
    ("POST", f"{_SCHEMA}/schema"): _topic(_To.PRODUCE),
    ("DELETE", f"{_SCHEMA}/schema"): TENANT_ADMIN,
    ("POST", f"{_SCHEMA}/version"): _topic(_To.GET_METADATA),
    ("POST", f"{_SCHEMA}/compatibility"): TENANT_ADMIN,
    # TopicLookup (v2): validateTopicOperation LOOKUP; the bundle: GET_BUNDLE.
    ("GET", _LOOKUP): _topic(_To.LOOKUP),
    ("GET", f"{_LOOKUP}/bundle"): _namespace(_Ns.GET_BUNDLE),
}


def rule_for(method: str, canonical: str) -> Rule:
    """The check of a route (see the module docstring); a super-user for an unlisted route.

    Args:
        method: The HTTP method (``HEAD`` counts as ``GET``).
        canonical: The route's canonical path, e.g. ``/admin/v2/tenants/{tenant}``.
    """
    if method == "HEAD":
        method = "GET"
    return ROUTE_RULES.get((method, canonical), SUPER_USER)
