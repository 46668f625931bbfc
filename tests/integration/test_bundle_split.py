"""A bundle split on a broker process, through ``emubroker admin``, under the official client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.integration.conftest import make_client
from tests.support.broker import ROOT, StandaloneProcess, standalone_process

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def standalone() -> Iterator[StandaloneProcess]:
    with standalone_process() as proc:
        yield proc


def admin(proc: StandaloneProcess, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "emubroker", "admin", "--admin-url", proc.admin_url, *argv],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


def test_split_with_unload_keeps_producers_and_consumers_going(
    standalone: StandaloneProcess,
) -> None:
    admin(standalone, "tenants", "create", "acme")
    admin(standalone, "namespaces", "create", "acme/split", "--bundles", "1")
    topics = [f"persistent://acme/split/t{i}" for i in range(4)]
    client = make_client(standalone.service_url)
    try:
        consumers = [client.subscribe(t, "s") for t in topics]
        producers = [client.create_producer(t) for t in topics]
        for producer in producers:
            for n in range(5):
                producer.send(f"before-{n}".encode())
        admin(
            standalone,
            "namespaces",
            "split-bundle",
            "acme/split",
            "--bundle",
            "0x00000000_0xffffffff",
            "--split-algorithm-name",
            "topic_count_equally_divide",
            "--unload",
        )
        bundles = json.loads(admin(standalone, "namespaces", "bundles", "acme/split"))
        assert bundles["numBundles"] == 2
        assert bundles["boundaries"][0] == "0x00000000"
        assert bundles["boundaries"][-1] == "0xffffffff"
        # The unload closed every producer and consumer; they look up again and go on.
        for producer in producers:
            for n in range(5):
                producer.send(f"after-{n}".encode())
        expected = [f"before-{n}" for n in range(5)] + [f"after-{n}" for n in range(5)]
        for consumer in consumers:
            received = []
            for _ in expected:
                message = consumer.receive(timeout_millis=10_000)
                received.append(message.data().decode())
                consumer.acknowledge(message)
            assert received == expected
        owned = json.loads(
            admin(standalone, "brokers", "namespaces", "standalone", "--url", standalone.admin_url)
        )
        assert all(not name.endswith("0x00000000_0xffffffff") for name in owned)
    finally:
        client.close()


def test_unknown_bundle_is_a_readable_error(standalone: StandaloneProcess) -> None:
    admin(standalone, "tenants", "create", "acme2")
    admin(standalone, "namespaces", "create", "acme2/ns")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "emubroker",
            "admin",
            "--admin-url",
            standalone.admin_url,
            "namespaces",
            "split-bundle",
            "acme2/ns",
            "-b",
            "0x00000000_0x10000000",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "error: 412 Precondition Failed: Invalid upper boundary for bundle "
        "acme2/ns/0x00000000_0x10000000. Expected upper boundary of "
        "acme2/ns/0x00000000_0x40000000\n"
    )
