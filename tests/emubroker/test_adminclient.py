"""The admin client's path table: every route is one the admin API serves, each part quoted."""

from __future__ import annotations

import re

import pytest

from emubroker.admin.access import ROUTE_RULES
from emubroker.adminclient.paths import DISPATCH_RATE_ROUTES, ROUTES, dispatch_rate_path, path


def _shape(template: str) -> str:
    """A route with each path parameter as ``{}``."""
    return re.sub(r"\{[^}]*\}", "{}", template)


def _client_shape(template: str) -> str:
    """A client template's shape: its ``{topic}`` spans four segments, ``{namespace}`` two."""
    return _shape(template.replace("{topic}", "{}/{}/{}/{}").replace("{namespace}", "{}/{}"))


def test_every_route_of_the_table_is_served() -> None:
    served = {_shape(route) for _method, route in ROUTE_RULES}
    for name, template in ROUTES.items():
        assert _client_shape(template) in served, name


def test_parts_are_quoted_segment_by_segment() -> None:
    assert path("topic", topic="persistent://t/ns/a b") == "/admin/v2/persistent/t/ns/a%20b"
    assert (
        path("bundle.unload", namespace="t/ns", bundle="0x00000000_0x40000000")
        == "/admin/v2/namespaces/t/ns/0x00000000_0x40000000/unload"
    )
    assert path("brokers.dynamic_config", key="k", value="a/b") == (
        "/admin/v2/brokers/configuration/k/a%2Fb"
    )
    with pytest.raises(ValueError, match="not a complete topic name"):
        path("topic", topic="t")


def test_each_dispatch_rate_scope_has_its_path() -> None:
    topic = "persistent://t/ns/x"
    assert {
        scope: dispatch_rate_path(scope, "t/ns" if scope.startswith("namespace") else topic, "s")
        for scope in DISPATCH_RATE_ROUTES
    } == {
        "namespace": "/admin/v2/namespaces/t/ns/dispatchRate",
        "namespace_subscription": "/admin/v2/namespaces/t/ns/subscriptionDispatchRate",
        "topic": "/admin/v2/persistent/t/ns/x/dispatchRate",
        "topic_subscription": "/admin/v2/persistent/t/ns/x/subscriptionDispatchRate",
        "subscription": "/admin/v2/persistent/t/ns/x/s/dispatchRate",
    }
    with pytest.raises(ValueError, match="needs a subscription"):
        dispatch_rate_path("subscription", topic)
