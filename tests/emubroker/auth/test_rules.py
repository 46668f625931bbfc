"""Which provider serves a CONNECT or a REST call, and PulsarAuthorizationProvider's rules."""

from __future__ import annotations

import base64

import pytest

from emubroker.auth import (
    AuthenticationFailed,
    AuthenticationService,
    AuthorizationDenied,
    AuthorizationService,
    Credentials,
    NamespaceOperation,
    Security,
    SecurityConfigError,
    TenantNotFound,
    TopicOperation,
)
from emubroker.auth.token import create_token
from emubroker.config.security import SecurityConfig
from emubroker.naming import NamespaceName, TopicName
from emubroker.policies import AuthAction, AuthPolicies, Policies, TenantInfo

pytestmark = pytest.mark.anyio

SECRET = bytes(range(32))
TOKEN = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
TLS = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"


def _authn(**keys: object) -> AuthenticationService:
    values: dict[str, object] = {
        "authenticationEnabled": True,
        "authenticationProviders": f"{TLS},{TOKEN}",
        "tokenSecretKey": base64.b64encode(SECRET).decode(),
    }
    values.update(keys)
    service = AuthenticationService.from_config(SecurityConfig(**values))  # type: ignore[arg-type]
    assert service is not None
    return service


def test_disabled_authentication_builds_nothing() -> None:
    assert AuthenticationService.from_config(SecurityConfig()) is None


def test_unknown_provider_class_stops_start_up() -> None:
    with pytest.raises(SecurityConfigError, match="not an emulated provider"):
        _authn(authenticationProviders="com.example.MyProvider")


def test_authorization_without_authentication_is_refused_as_pulsar_does() -> None:
    with pytest.raises(SecurityConfigError, match="Authentication must be enabled"):
        Security.from_config(
            SecurityConfig(authorizationEnabled=True),
            namespace_policies=lambda _ns: None,
            tenant_info=_tenants({}),
        )


def test_connect_picks_the_provider_by_method_name() -> None:
    service = _authn()
    token = create_token(SECRET, "alice").encode()
    result = service.authenticate_connect(
        "token", None, Credentials(command_data=token), wall_time=0
    )
    assert result.role == "alice"
    with pytest.raises(AuthenticationFailed):
        service.authenticate_connect("token", None, Credentials(command_data=b"x"), wall_time=0)


def test_connect_with_an_unserved_method_is_anonymous_or_refused() -> None:
    anonymous = _authn(anonymousUserRole="anon")
    assert anonymous.authenticate_connect("basic", None, Credentials(), wall_time=0).role == "anon"
    assert anonymous.authenticate_connect(None, None, Credentials(), wall_time=0).role == "anon"
    with pytest.raises(AuthenticationFailed, match="No anonymous role"):
        _authn().authenticate_connect("none", None, Credentials(), wall_time=0)


def test_http_tries_each_provider_then_the_anonymous_role() -> None:
    token = create_token(SECRET, "alice")
    service = _authn()
    bearer = Credentials(http_authorization=f"Bearer {token}")
    assert service.authenticate_http(None, bearer, wall_time=0).role == "alice"
    with pytest.raises(AuthenticationFailed):
        service.authenticate_http(None, Credentials(), wall_time=0)
    # Pulsar: wrong REST credentials fall back to the anonymous role when there is one.
    wrong = Credentials(http_authorization="Bearer nope")
    assert _authn(anonymousUserRole="anon").authenticate_http(None, wrong, wall_time=0).role == (
        "anon"
    )
    with pytest.raises(AuthenticationFailed, match="Unsupported authentication method"):
        service.authenticate_http("basic", bearer, wall_time=0)


# ---- authorization -----------------------------------------------------------------------------

NS = NamespaceName("acme", "orders")
TOPIC = TopicName.parse("persistent://acme/orders/t")


def _tenants(tenants: dict[str, TenantInfo]):  # type: ignore[no-untyped-def]
    async def tenant_info(name: str) -> TenantInfo | None:
        return tenants.get(name)

    return tenant_info


def _authz(policies: Policies, **keys: object) -> AuthorizationService:
    config = SecurityConfig(superUserRoles="root", **keys)  # type: ignore[arg-type]
    return AuthorizationService(
        config,
        namespace_policies=lambda ns: policies if ns == NS else None,
        tenant_info=_tenants({"acme": TenantInfo(admin_roles=["acme-admin"])}),
    )


def _policies(
    namespace: dict[str, list[AuthAction]] | None = None,
    topics: dict[str, dict[str, list[AuthAction]]] | None = None,
    subscriptions: dict[str, list[str]] | None = None,
    mode: str = "None",
) -> Policies:
    return Policies(
        auth_policies=AuthPolicies(
            namespace_auth=namespace or {},
            destination_auth=topics or {},
            subscription_auth_roles=subscriptions or {},
        ),
        subscription_auth_mode=mode,
    )


P, C = AuthAction.produce, AuthAction.consume


async def test_super_users_and_tenant_admins_may_do_everything() -> None:
    authz = _authz(_policies())
    for role in ("root", "acme-admin"):
        for op in TopicOperation:
            assert await authz.allow_topic_operation(TOPIC, role, op)
        assert await authz.allow_namespace_operation(NS, role, NamespaceOperation.CREATE_TOPIC)
    assert not await authz.allow_topic_operation(TOPIC, "nobody", TopicOperation.LOOKUP)
    assert await authz.is_tenant_admin("missing", "root")
    with pytest.raises(TenantNotFound):
        await authz.is_tenant_admin("missing", "acme-admin")


async def test_namespace_grants() -> None:
    authz = _authz(_policies({"app": [P]}))
    assert await authz.allow_topic_operation(TOPIC, "app", TopicOperation.PRODUCE)
    assert await authz.allow_topic_operation(TOPIC, "app", TopicOperation.LOOKUP)
    assert not await authz.allow_topic_operation(TOPIC, "app", TopicOperation.CONSUME)
    assert not await authz.allow_topic_operation(TOPIC, "app", TopicOperation.COMPACT)
    assert await authz.allow_namespace_operation(NS, "app", NamespaceOperation.GET_TOPICS)
    assert not await authz.allow_namespace_operation(NS, "app", NamespaceOperation.CREATE_TOPIC)


async def test_topic_grants_and_partitions_inherit_the_partitioned_topics() -> None:
    authz = _authz(_policies(topics={str(TOPIC): {"reader": [C]}}))
    assert await authz.allow_topic_operation(TOPIC, "reader", TopicOperation.CONSUME)
    assert await authz.allow_topic_operation(TOPIC.partition(3), "reader", TopicOperation.CONSUME)
    other = TopicName.parse("persistent://acme/orders/other")
    assert not await authz.allow_topic_operation(other, "reader", TopicOperation.CONSUME)


async def test_wildcards_only_when_enabled() -> None:
    policies = _policies({"team-*": [P], "*-bot": [C]})
    assert not await _authz(policies).allow_topic_operation(TOPIC, "team-a", TopicOperation.PRODUCE)
    authz = _authz(policies, authorizationAllowWildcardsMatching=True)
    assert await authz.allow_topic_operation(TOPIC, "team-a", TopicOperation.PRODUCE)
    assert await authz.allow_topic_operation(TOPIC, "ci-bot", TopicOperation.CONSUME)
    assert not await authz.allow_topic_operation(TOPIC, "ci-bot", TopicOperation.PRODUCE)


async def test_subscription_roles_and_prefix_mode() -> None:
    authz = _authz(_policies({"a": [C], "b": [C]}, subscriptions={"s": ["a"]}))
    assert await authz.allow_topic_operation(TOPIC, "a", TopicOperation.CONSUME, subscription="s")
    assert not await authz.allow_topic_operation(
        TOPIC, "b", TopicOperation.CONSUME, subscription="s"
    )
    assert await authz.allow_topic_operation(TOPIC, "b", TopicOperation.CONSUME, subscription="x")
    prefix = _authz(_policies({"a": [C]}, mode="Prefix"))
    assert await prefix.allow_topic_operation(
        TOPIC, "a", TopicOperation.CONSUME, subscription="a-sub"
    )
    with pytest.raises(AuthorizationDenied, match="prefixed by the authentication role"):
        await prefix.allow_topic_operation(TOPIC, "a", TopicOperation.CONSUME, subscription="zz")
