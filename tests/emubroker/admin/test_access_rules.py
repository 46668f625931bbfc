"""Which check each REST route needs (Pulsar's validate* calls), and that none is left open."""

from __future__ import annotations

from typing import Any

import pytest

from emubroker.admin.access import Check, rule_for
from emubroker.admin.app import build_admin_app
from emubroker.auth import NamespaceOperation, TopicOperation

T = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}"
N = "/admin/v2/namespaces/{tenant}/{namespace}"


@pytest.mark.parametrize(
    ("method", "path", "check", "operation"),
    [
        ("GET", "/metrics", Check.ANYONE, None),
        ("GET", "/admin/v2/clusters", Check.ANYONE, None),
        ("PUT", "/admin/v2/clusters/{cluster}", Check.SUPER_USER, None),
        ("GET", "/admin/v2/brokers/configuration", Check.SUPER_USER, None),
        ("GET", "/admin/v2/tenants", Check.SUPER_USER, None),
        ("PUT", "/admin/v2/tenants/{tenant}", Check.SUPER_USER, None),
        ("POST", "/admin/v2/tenants/{tenant}", Check.TENANT_ADMIN, None),
        ("PUT", N, Check.TENANT_ADMIN, None),
        ("GET", N, Check.NAMESPACE_POLICY, None),
        ("POST", f"{N}/messageTTL", Check.NAMESPACE_POLICY, None),
        ("GET", f"{N}/topics", Check.NAMESPACE_OPERATION, NamespaceOperation.GET_TOPICS),
        ("POST", f"{N}/permissions/{{role}}", Check.NAMESPACE_OPERATION,
         NamespaceOperation.GRANT_PERMISSION),
        ("DELETE", f"{N}/permissions/{{role}}", Check.NAMESPACE_OPERATION,
         NamespaceOperation.REVOKE_PERMISSION),
        ("PUT", T, Check.NAMESPACE_OPERATION, NamespaceOperation.CREATE_TOPIC),
        ("DELETE", f"{T}/partitions", Check.NAMESPACE_OPERATION, NamespaceOperation.DELETE_TOPIC),
        ("GET", f"{T}/partitions", Check.TOPIC_OPERATION, TopicOperation.GET_METADATA),
        ("GET", f"{T}/stats", Check.TOPIC_OPERATION, TopicOperation.GET_STATS),
        ("PUT", f"{T}/compaction", Check.TOPIC_OPERATION, TopicOperation.COMPACT),
        ("PUT", f"{T}/subscription/{{subscription}}", Check.TOPIC_OPERATION,
         TopicOperation.SUBSCRIBE),
        ("POST", f"{T}/subscription/{{subscription}}/skip_all", Check.TOPIC_OPERATION,
         TopicOperation.SKIP),
        ("POST", f"{T}/maxProducers", Check.TOPIC_POLICY, None),
        ("POST", f"{T}/permissions/{{role}}", Check.TENANT_ADMIN, None),
        ("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", Check.LOOKUP,
         TopicOperation.LOOKUP),
        ("GET", "/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema", Check.TOPIC_OPERATION,
         TopicOperation.GET_METADATA),
        ("POST", "/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema", Check.TENANT_ADMIN,
         None),
        ("GET", "/admin/v2/something-new", Check.SUPER_USER, None),
    ],
)  # fmt: skip
def test_rule_of_route(method: str, path: str, check: Check, operation: Any) -> None:
    rule = rule_for(method, path)
    assert rule.check is check
    assert operation in (None, rule.topic_operation, rule.namespace_operation)


def test_only_public_reads_are_open_to_any_authenticated_role() -> None:
    app = build_admin_app(object())  # type: ignore[arg-type]  # routes only
    open_routes = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
        and rule_for(route.method, route.resource.canonical).check is Check.ANYONE
    }
    assert {path for _, path in open_routes} == {
        "/metrics",
        "/metrics/",
        "/admin/v2/clusters",
        "/admin/v2/brokers/ready",
        "/admin/v2/brokers/version",
    }
    assert {method for method, _ in open_routes} <= {"GET", "HEAD"}
