"""How the cluster handle reads what a control is aimed at, and the paths it calls."""

from __future__ import annotations

import pytest

from emubroker.testing.controls import _dispatch_rate_path
from emubroker.testing.processes import _properties
from emubroker.testing.targets import Bundle, Namespace, Topic, parse_target, query


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("t", Topic("persistent://public/default/t")),
        ("public/default/t", Topic("persistent://public/default/t")),
        ("non-persistent://a/b/c", Topic("non-persistent://a/b/c")),
        ("public/default", Namespace("public/default")),
        ("public/default/0x00000000_0x40000000", Bundle("public/default", "0x00000000_0x40000000")),
        ("a/b/0xC0000000_0xFFFFFFFF", Bundle("a/b", "0xc0000000_0xffffffff")),
        # Not a bundle range: eight hex digits each side, else it is a topic's name.
        ("a/b/0x0_0x1", Topic("persistent://a/b/0x0_0x1")),
    ],
)
def test_topics_namespaces_and_bundles_are_told_apart(text: str, expected: object) -> None:
    assert parse_target(text) == expected


@pytest.mark.parametrize("text", ["", "a/b/c/d", "persistent://a/b", "a//b"])
def test_names_of_nothing_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not a topic, namespace or bundle name"):
        parse_target(text)


def test_rest_paths() -> None:
    topic = parse_target("public/default/my topic")
    assert isinstance(topic, Topic)
    assert topic.path == "/admin/v2/persistent/public/default/my%20topic"
    assert topic.lookup_path == "/lookup/v2/topic/persistent/public/default/my%20topic"
    bundle = Bundle("public/default", "0x00000000_0x40000000")
    assert bundle.path == "/admin/v2/namespaces/public/default/0x00000000_0x40000000"
    assert str(bundle) == "public/default/0x00000000_0x40000000"
    assert query(a="1", b=None, c="x y") == "?a=1&c=x+y"
    assert query(b=None) == ""


def test_dispatch_rate_paths_follow_pulsars_levels() -> None:
    topic, namespace = Topic("persistent://t/n/x"), Namespace("t/n")
    assert _dispatch_rate_path("topic", topic, None) == f"{topic.path}/dispatchRate"
    assert _dispatch_rate_path("namespace", namespace, None) == f"{namespace.path}/dispatchRate"
    assert (
        _dispatch_rate_path("subscription", namespace, None)
        == f"{namespace.path}/subscriptionDispatchRate"
    )
    assert (
        _dispatch_rate_path("subscription", topic, None) == f"{topic.path}/subscriptionDispatchRate"
    )
    assert _dispatch_rate_path("subscription", topic, "a/b") == f"{topic.path}/a%2Fb/dispatchRate"
    with pytest.raises(ValueError, match="set on a topic"):
        _dispatch_rate_path("subscription", namespace, "s")
    with pytest.raises(ValueError, match="no topic-level dispatch rate"):
        _dispatch_rate_path("topic", namespace, None)


def test_process_clusters_get_their_config_as_properties() -> None:
    text = _properties({"loadBalancerSheddingEnabled": False, "maxProducersPerTopic": 3})
    assert text == "loadBalancerSheddingEnabled=false\nmaxProducersPerTopic=3\n"
