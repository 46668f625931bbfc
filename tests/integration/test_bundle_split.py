"""Bundle splits on broker processes, through ``emubroker admin``, under the official client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from tests.integration.conftest import make_client
from tests.support.broker import ROOT, StandaloneProcess, standalone_process
from tests.support.cluster import cluster_process
from tests.support.rest import rest_call

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def standalone() -> Iterator[StandaloneProcess]:
    with standalone_process() as proc:
        yield proc


def admin(admin_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emubroker", "admin", "--admin-url", admin_url, *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def ok(admin_url: str, *argv: str) -> str:
    done = admin(admin_url, *argv)
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


def send_and_receive(
    producers: list[pulsar.Producer], consumers: list[pulsar.Consumer], tag: str
) -> None:
    for producer in producers:
        for n in range(5):
            producer.send(f"{tag}-{n}".encode())
    for consumer in consumers:
        received = []
        for _ in range(5):
            message = consumer.receive(timeout_millis=10_000)
            received.append(message.data().decode())
            consumer.acknowledge(message)
        assert received == [f"{tag}-{n}" for n in range(5)]


def test_split_with_unload_keeps_producers_and_consumers_going(
    standalone: StandaloneProcess,
) -> None:
    url = standalone.admin_url
    ok(url, "tenants", "create", "acme")
    ok(url, "namespaces", "create", "acme/split", "--bundles", "1")
    topics = [f"persistent://acme/split/t{i}" for i in range(4)]
    client = make_client(standalone.service_url)
    try:
        consumers = [client.subscribe(t, "s") for t in topics]
        producers = [client.create_producer(t) for t in topics]
        send_and_receive(producers, consumers, "before")
        ok(
            url,
            "namespaces",
            "split-bundle",
            "acme/split",
            "--bundle",
            "0x00000000_0xffffffff",
            "--split-algorithm-name",
            "topic_count_equally_divide",
            "--unload",
        )
        bundles = json.loads(ok(url, "namespaces", "bundles", "acme/split"))
        assert bundles["numBundles"] == 2
        assert bundles["boundaries"][0] == "0x00000000"
        assert bundles["boundaries"][-1] == "0xffffffff"
        # The unload closed every producer and consumer; they look up again and go on.
        send_and_receive(producers, consumers, "after")
        owned = json.loads(ok(url, "brokers", "namespaces", "standalone", "--url", url))
        assert all(not name.endswith("0x00000000_0xffffffff") for name in owned)
    finally:
        client.close()


def test_unknown_bundle_is_a_readable_error(standalone: StandaloneProcess) -> None:
    ok(standalone.admin_url, "tenants", "create", "acme2")
    ok(standalone.admin_url, "namespaces", "create", "acme2/ns")
    done = admin(
        standalone.admin_url,
        "namespaces",
        "split-bundle",
        "acme2/ns",
        "-b",
        "0x00000000_0x10000000",
    )
    assert done.returncode == 1
    assert done.stderr == (
        "error: 412 Precondition Failed: Invalid upper boundary for bundle "
        "acme2/ns/0x00000000_0x10000000. Expected upper boundary of "
        "acme2/ns/0x00000000_0x40000000\n"
    )


def test_a_split_asked_of_another_broker_is_done_by_the_owner(tmp_path: Path) -> None:
    with cluster_process(tmp_path / "run") as cluster:
        first, owner, third = (cluster.broker(i) for i in range(3))
        ok(first["admin_url"], "tenants", "create", "acme")
        ok(first["admin_url"], "namespaces", "create", "acme/ns", "--bundles", "1")
        topic = "persistent://acme/ns/moving"
        # A client of the second broker alone: its lookup goes through the leader.
        client = make_client(owner["service_url"])
        try:
            consumers = [client.subscribe(topic, "s")]
            producers = [client.create_producer(topic)]
            send_and_receive(producers, consumers, "before")
            # The leader placed the bundle: find its owner; the others are asked.
            status, found = rest_call(
                first["admin_url"], "GET", "/lookup/v2/topic/persistent/acme/ns/moving"
            )
            assert status == 200, found
            brokers = [cluster.broker(i) for i in range(3)]
            owner = next(b for b in brokers if b["service_url"] == found["brokerUrl"])
            first, third = (b for b in brokers if b is not owner)
            # Asked of another broker, the split is redirected to the owner, which does it.
            ok(
                first["admin_url"],
                "namespaces",
                "split-bundle",
                "acme/ns",
                "-b",
                "0x00000000_0xffffffff",
            )
            for broker in (first, owner, third):
                bundles = json.loads(ok(broker["admin_url"], "namespaces", "bundles", "acme/ns"))
                assert bundles["boundaries"] == ["0x00000000", "0x7fffffff", "0xffffffff"]
            owned = json.loads(
                ok(
                    owner["admin_url"],
                    "brokers",
                    "namespaces",
                    "standalone",
                    "--url",
                    owner["admin_url"],
                )
            )
            assert sorted(owned) == [
                "acme/ns/0x00000000_0x7fffffff",
                "acme/ns/0x7fffffff_0xffffffff",
            ]
            # Every broker hashes the topic into a child the owner holds.
            status, lookup = rest_call(
                third["admin_url"], "GET", "/lookup/v2/topic/persistent/acme/ns/moving"
            )
            assert status == 200, lookup
            assert lookup["brokerUrl"] == owner["service_url"]
            send_and_receive(producers, consumers, "after")  # never disconnected
        finally:
            client.close()
