"""The route table's defaults: unlisted routes are closed, and only public reads are open.

Each route's level against Pulsar's is ``test_route_authorization.py``.
"""

from __future__ import annotations

from emubroker.admin.access import ROUTE_RULES, SUPER_USER, Check, rule_for
from emubroker.admin.app import build_admin_app
from emubroker.auth import TopicOperation


def test_a_route_the_table_does_not_list_needs_a_super_user() -> None:
    assert ("GET", "/admin/v2/something-new") not in ROUTE_RULES
    assert rule_for("GET", "/admin/v2/something-new") is SUPER_USER
    assert rule_for("PATCH", "/admin/v2/clusters") is SUPER_USER  # method not listed


def test_head_is_checked_as_get() -> None:
    path = "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/stats"
    rule = rule_for("HEAD", path)
    assert (rule.check, rule.topic_operation) == (Check.TOPIC_OPERATION, TopicOperation.GET_STATS)


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
