"""Metadata URLs naming an etcd cluster."""

from __future__ import annotations

import pytest

from emubroker.metadata.etcd_url import EtcdAddress, is_etcd_url, parse_etcd_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("etcd://h:2379", EtcdAddress([("h", 2379)], "/")),
        ("etcd://h1:1,h2:2", EtcdAddress([("h1", 1), ("h2", 2)], "/")),
        ("etcd://h", EtcdAddress([("h", 2379)], "/")),
        ("etcd://h:1/pulsar/c1", EtcdAddress([("h", 1)], "/pulsar/c1")),
        ("etcd://[::1]:2379", EtcdAddress([("::1", 2379)], "/")),
        ("etcd:http://a:1,http://b:2", EtcdAddress([("a", 1), ("b", 2)], "/")),
    ],
)
def test_parse(url: str, expected: EtcdAddress) -> None:
    assert is_etcd_url(url)
    assert parse_etcd_url(url) == expected


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("stub://h:1", "not an etcd URL"),
        ("etcd://h:x", "bad port"),
        ("etcd://h:70000", "bad port"),
        ("etcd://h:1,,h:2", "empty etcd endpoint"),
        ("etcd://h:1/a//b", "bad chroot"),
        ("etcd:https://h:1", "expected http://"),
    ],
)
def test_malformed_urls_are_refused(url: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_etcd_url(url)
