"""Every served REST route, called by five roles, answers with Pulsar's authorization status.

The table below is the expectation, written from Pulsar 4.x's admin resources (which validation
each route's method calls, and what ``PulsarAuthorizationProvider`` answers for it), kept apart
from ``emubroker.admin.access.ROUTE_RULES`` (what the broker enforces) so that a wrong rule
fails here. A served route missing from this table fails :func:`test_every_served_route_is_listed`:
a new route is added to both tables.

Roles: ``anonymous`` (no credentials: ``anonymousUserRole``, granted nothing), ``producer``
(``produce`` on ``acme/ns``), ``consumer`` (``consume`` on ``acme/ns``), ``acme-admin`` (in the
tenant's ``adminRoles``) and ``root`` (``superUserRoles``). A role below the route's level gets
the route's refusal status; one at or above it gets anything but 401/403 (the call itself may
still be a 404, 409 or 412: only the authorization is under test). Each case runs on a fresh
broker, so a call that deletes or changes something cannot affect another case.
"""

from __future__ import annotations

import base64
import enum
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

import pytest
from aiohttp.test_utils import TestClient, TestServer

from emubroker.admin import build_admin_app
from emubroker.app import open_broker
from emubroker.auth.token import create_token
from emubroker.config import load_config
from protocol.clock import FakeClock

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SECRET: Final = bytes(range(32))
TOKEN_PROVIDER: Final = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"


class Level(enum.IntEnum):
    ANYONE = 0  # authenticated (the anonymous role included)
    LOOKUP = 1  # produce or consume (Pulsar's canLookup)
    PRODUCE = 2
    CONSUME = 3
    TENANT_ADMIN = 4
    SUPER_USER = 5


ROLES: Final = {
    "anonymous": {Level.ANYONE},
    "producer": {Level.ANYONE, Level.LOOKUP, Level.PRODUCE},
    "consumer": {Level.ANYONE, Level.LOOKUP, Level.CONSUME},
    "acme-admin": set(Level) - {Level.SUPER_USER},
    "root": set(Level),
}


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # aiohttp's canonical form
    level: Level
    refusal: int = 401  # the status below the level (Pulsar: 401, or 403 for ns/policy checks)


V2 = "/admin/v2"
B = f"{V2}/brokers"
C = f"{V2}/clusters/{{cluster}}"
N = f"{V2}/namespaces/{{tenant}}/{{namespace}}"
T = f"{V2}/{{domain}}/{{tenant}}/{{namespace}}/{{topic}}"
SUB = f"{T}/subscription/{{subscription}}"
SCHEMA = f"{V2}/schemas/{{tenant}}/{{namespace}}/{{topic}}"
LOOKUP = "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}"
ANY, LK, PR, CO, TA, SU = (
    Level.ANYONE,
    Level.LOOKUP,
    Level.PRODUCE,
    Level.CONSUME,
    Level.TENANT_ADMIN,
    Level.SUPER_USER,
)


def _rw(path: str, level: Level, refusal: int, methods: str = "GET POST DELETE") -> list[Route]:
    return [Route(method, path, level, refusal) for method in methods.split()]


TABLE: Final = [
    Route("GET", "/metrics", ANY),
    Route("GET", "/metrics/", ANY),
    # The dashboard: the data of BrokersBase and BrokerStatsBase, a super-user's.
    Route("GET", "/dashboard", SU),
    Route("GET", "/dashboard/", SU),
    Route("GET", "/dashboard/static/{name}", SU),
    Route("GET", "/dashboard/api/state", SU),
    Route("GET", "/dashboard/api/local", SU),
    # BrokersBase: validateBothSuperuserAndBrokerOperation, but ready and version.
    Route("GET", B, SU),
    Route("GET", f"{B}/{{cluster}}", SU),
    Route("GET", f"{B}/{{cluster}}/{{broker}}/ownedNamespaces", SU),
    Route("GET", f"{B}/health", SU),
    Route("GET", f"{B}/leaderBroker", SU),
    Route("GET", f"{B}/ready", ANY),
    Route("GET", f"{B}/version", ANY),
    Route("GET", f"{B}/configuration", SU),
    Route("GET", f"{B}/configuration/values", SU),
    Route("GET", f"{B}/configuration/runtime", SU),
    Route("POST", f"{B}/configuration/{{key}}/{{value}}", SU),
    Route("DELETE", f"{B}/configuration/{{key}}", SU),
    Route("GET", f"{V2}/broker-stats/load-report", SU),  # BrokerStatsBase
    Route("GET", f"{V2}/broker-stats/topics", SU),
    # ClustersBase: the list is open; the rest validateBothSuperuserAndCluster*.
    Route("GET", f"{V2}/clusters", ANY),
    *_rw(C, SU, 401, "GET PUT POST DELETE"),
    Route("GET", f"{C}/namespaceIsolationPolicies", SU),
    *_rw(f"{C}/namespaceIsolationPolicies/{{policy}}", SU, 401),
    Route("GET", f"{C}/namespaceIsolationPolicies/brokers", SU),
    Route("GET", f"{C}/namespaceIsolationPolicies/brokers/{{broker}}", SU),
    Route("GET", f"{C}/failureDomains", SU),
    *_rw(f"{C}/failureDomains/{{domain}}", SU, 401),
    # TenantsBase (4.0.2+): super-user or the tenant's admin; the list has no tenant.
    Route("GET", f"{V2}/tenants", SU),
    *_rw(f"{V2}/tenants/{{tenant}}", TA, 401, "GET PUT POST DELETE"),
    # NamespacesBase.
    Route("GET", f"{V2}/namespaces/{{tenant}}", TA),
    Route("GET", N, TA, 403),
    Route("PUT", N, TA),
    Route("DELETE", N, TA),
    Route("GET", f"{N}/topics", LK, 403),
    Route("GET", f"{N}/bundles", LK, 403),
    Route("PUT", f"{N}/unload", SU),
    Route("PUT", f"{N}/{{bundle}}/unload", SU),
    Route("PUT", f"{N}/{{bundle}}/split", SU),
    Route("GET", f"{N}/permissions", TA, 403),
    Route("GET", f"{N}/permissions/subscription", TA, 403),
    Route("POST", f"{N}/permissions/subscription/{{subscription}}", TA, 403),
    Route("POST", f"{N}/permissions/{{role}}", TA, 403),
    Route("DELETE", f"{N}/permissions/{{role}}", TA, 403),
    Route("DELETE", f"{N}/permissions/{{subscription}}/{{role}}", TA, 403),
    *_rw(f"{N}/schemaCompatibilityStrategy", TA, 403, "GET PUT"),
    *[
        route
        for policy in (
            "deduplication",
            "messageTTL",
            "retention",
            "maxProducersPerTopic",
            "maxConsumersPerTopic",
            "maxConsumersPerSubscription",
            "maxSubscriptionsPerTopic",
            "antiAffinity",
            "dispatchRate",
            "subscriptionDispatchRate",
            "autoTopicCreation",
            "autoSubscriptionCreation",
            "subscriptionExpirationTime",
            "maxTopicsPerNamespace",
            "persistence",
            "publishRate",
        )
        for route in _rw(f"{N}/{policy}", TA, 403)
    ],
    *_rw(f"{N}/compactionThreshold", TA, 403, "GET PUT DELETE"),
    *_rw(f"{N}/offloadThreshold", TA, 403, "GET PUT"),
    *_rw(f"{N}/offloadThresholdInSeconds", TA, 403, "GET PUT"),
    *_rw(f"{N}/offloadDeletionLagMs", TA, 403, "GET PUT DELETE"),
    # validateAdminAccessForTenant (401), validateSuperUserAccess.
    *_rw(f"{N}/properties", TA, 401, "GET PUT DELETE"),
    *_rw(f"{N}/property/{{key}}", TA, 401, "GET DELETE"),
    Route("PUT", f"{N}/property/{{key}}/{{value}}", TA),
    *_rw(f"{N}/persistence/bookieAffinity", SU, 401),
    Route("GET", f"{N}/backlogQuotaMap", TA, 403),  # validateNamespacePolicyOperation
    *_rw(f"{N}/backlogQuota", TA, 403, "POST DELETE"),
    # PersistentTopicsBase.
    Route("GET", f"{V2}/{{domain}}/{{tenant}}/{{namespace}}", LK, 403),
    Route("GET", f"{V2}/{{domain}}/{{tenant}}/{{namespace}}/partitioned", LK, 403),
    Route("PUT", T, TA, 403),
    Route("DELETE", T, TA, 403),
    Route("PUT", f"{T}/partitions", TA, 403),
    Route("POST", f"{T}/partitions", TA, 403),
    Route("GET", f"{T}/partitions", LK),
    Route("DELETE", f"{T}/partitions", TA, 403),
    # GET_METADATA, UPDATE_METADATA, DELETE_METADATA. Pulsar answers a PUT of an empty map 204
    # before its check (it changes nothing); the broker checks every PUT first.
    Route("GET", f"{T}/properties", LK),
    Route("PUT", f"{T}/properties", TA),
    Route("DELETE", f"{T}/properties", TA),
    Route("GET", f"{T}/permissions", TA),
    Route("POST", f"{T}/permissions/{{role}}", TA),
    Route("DELETE", f"{T}/permissions/{{role}}", TA),
    Route("GET", f"{T}/stats", LK),
    Route("GET", f"{T}/partitioned-stats", LK),
    Route("GET", f"{T}/internalStats", LK),
    Route("GET", f"{T}/lastMessageId", CO),  # PEEK_MESSAGES
    Route("GET", f"{T}/messageid/{{timestamp}}", CO),  # PEEK_MESSAGES
    Route("PUT", f"{T}/unload", TA),
    Route("PUT", f"{T}/compaction", TA),
    Route("GET", f"{T}/compaction", TA),
    Route("POST", f"{T}/terminate", TA),
    Route("POST", f"{T}/terminate/partitions", TA),
    Route("GET", f"{T}/subscriptions", CO),
    Route("PUT", SUB, CO),
    Route("DELETE", SUB, CO),
    Route("POST", f"{SUB}/skip/{{numMessages}}", CO),
    Route("POST", f"{SUB}/skip_all", CO),
    Route("POST", f"{SUB}/resetcursor/{{timestamp}}", CO),
    Route("POST", f"{SUB}/resetcursor", CO),
    Route("POST", f"{SUB}/expireMessages/{{expireTimeInSeconds}}", CO),
    Route("POST", f"{T}/all_subscription/expireMessages/{{expireTimeInSeconds}}", CO),
    Route("GET", f"{SUB}/position/{{messagePosition}}", CO),
    Route("GET", f"{T}/examinemessage", CO),
    Route("GET", f"{T}/ledger/{{ledgerId}}/entry/{{entryId}}", CO),
    *[
        route
        for policy in (
            "dispatchRate",
            "subscriptionDispatchRate",
            "{subName}/dispatchRate",
            "maxProducers",
            "maxConsumers",
            "maxConsumersPerSubscription",
            "maxSubscriptionsPerTopic",
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
        for route in _rw(f"{T}/{policy}", TA, 403)
    ],
    *_rw(f"{T}/backlogQuota", TA, 403, "POST DELETE"),
    Route("GET", f"{T}/backlogQuotaMap", TA, 403),
    *_rw(f"{T}/schemaValidationEnforced", TA, 403, "GET POST"),
    *_rw(f"{T}/schemaCompatibilityStrategy", TA, 403, "GET PUT DELETE"),
    # SchemasResourceBase.
    Route("GET", f"{SCHEMA}/schema", LK),
    Route("GET", f"{SCHEMA}/schema/{{version}}", LK),
    Route("GET", f"{SCHEMA}/schemas", LK),
    Route("POST", f"{SCHEMA}/schema", PR),
    Route("DELETE", f"{SCHEMA}/schema", TA),
    Route("POST", f"{SCHEMA}/version", LK),
    Route("POST", f"{SCHEMA}/compatibility", TA),
    # TopicLookup.
    Route("GET", LOOKUP, LK),
    Route("GET", f"{LOOKUP}/bundle", LK, 403),
]

# What each path parameter is in the calls (a topic, subscription and tenant that exist).
VALUES: Final = {
    "domain": "persistent",
    "tenant": "acme",
    "namespace": "ns",
    "topic": "t",
    "subscription": "s",
    "subName": "s",
    "cluster": "standalone",
    "broker": "localhost:8080",
    "policy": "p",
    "role": "someone",
    "key": "maxProducersPerTopic",
    "value": "5",
    "bundle": "0x00000000_0xffffffff",
    "numMessages": "1",
    "timestamp": "0",
    "expireTimeInSeconds": "1",
    "messagePosition": "1",
    "ledgerId": "1",
    "entryId": "0",
    "version": "0",
    "name": "dashboard.js",
}


def _url(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: VALUES[match.group(1)], path)


def _bearer(role: str) -> dict[str, str]:
    return {} if role == "anonymous" else {"Authorization": f"Bearer {create_token(SECRET, role)}"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp


@pytest.fixture
async def client(fake_clock: FakeClock) -> AsyncIterator[TestClient[Any, Any]]:
    secret = base64.b64encode(SECRET).decode()
    config = load_config(
        overrides={
            "brokerServicePort": 6650,
            "webServicePort": 8080,
            "authenticationEnabled": True,
            "authenticationProviders": TOKEN_PROVIDER,
            "authorizationEnabled": True,
            "superUserRoles": "root",
            "anonymousUserRole": "anonymous",
            "tokenSecretKey": f"data:;base64,{secret}",
            # The health check's own client authenticates as the broker (a super-user).
            "brokerClientAuthenticationPlugin": (
                "org.apache.pulsar.client.impl.auth.AuthenticationToken"
            ),
            "brokerClientAuthenticationParameters": f"token:{create_token(SECRET, 'root')}",
        },
        environ={},
    )
    async with (
        open_broker(config, clock=fake_clock, listen=False, admin=False) as broker,
        TestClient(TestServer(build_admin_app(broker.admin))) as http,  # type: ignore[arg-type]
    ):
        root = _bearer("root")
        for method, path, body in (
            ("PUT", f"{V2}/clusters/standalone", {}),
            (
                "PUT",
                f"{V2}/tenants/acme",
                {"adminRoles": ["acme-admin"], "allowedClusters": ["standalone"]},
            ),
            (
                "PUT",
                f"{V2}/namespaces/acme/ns",
                {
                    "auth_policies": {
                        "namespace_auth": {"producer": ["produce"], "consumer": ["consume"]}
                    }
                },
            ),
            ("PUT", f"{V2}/persistent/acme/ns/t", None),
            ("PUT", f"{V2}/persistent/acme/ns/t/subscription/s", None),
        ):
            response = await http.request(method, path, json=body, headers=root)
            assert response.status in (200, 204, 409), (path, await response.text())
        yield http


def test_every_served_route_is_listed() -> None:
    app = build_admin_app(object())  # type: ignore[arg-type]  # routes only
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    listed = [(route.method, route.path) for route in TABLE]
    assert len(listed) == len(set(listed)), "a route is listed twice"
    assert served - set(listed) == set(), "served routes missing from TABLE"
    assert set(listed) - served == set(), "TABLE lists routes that are not served"


@pytest.mark.parametrize("route", TABLE, ids=lambda route: f"{route.method} {route.path}")
async def test_route_answers_each_role_as_pulsar(
    client: TestClient[Any, Any], route: Route
) -> None:
    got = {}
    for role in ROLES:
        response = await client.request(route.method, _url(route.path), headers=_bearer(role))
        got[role] = response.status
    expected_refused = {role for role, levels in ROLES.items() if route.level not in levels}
    refused = {role for role, status in got.items() if status in (401, 403)}
    assert refused == expected_refused, got
    assert {got[role] for role in refused} <= {route.refusal}, got
