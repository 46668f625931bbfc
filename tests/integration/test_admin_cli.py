"""``emubroker admin`` as a subprocess against ``emubroker standalone --port 0 --admin-port 0``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from tests.integration.conftest import make_client
from tests.support.broker import ROOT, StandaloneProcess, standalone_process

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def standalone() -> Iterator[StandaloneProcess]:
    with standalone_process() as proc:
        yield proc


def admin(proc: StandaloneProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "emubroker", "admin", "--admin-url", proc.admin_url, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def ok(proc: StandaloneProcess, *argv: str) -> str:
    done = admin(proc, *argv)
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


def test_round_trip_tenant_namespace_partitioned_topic_stats_unload(
    standalone: StandaloneProcess,
) -> None:
    assert ok(standalone, "tenants", "create", "acme") == ""
    assert json.loads(ok(standalone, "tenants", "get", "acme")) == {
        "adminRoles": [],
        "allowedClusters": ["standalone"],
    }
    ok(standalone, "namespaces", "create", "acme/orders", "--bundles", "8")
    assert json.loads(ok(standalone, "namespaces", "list", "acme")) == ["acme/orders"]
    assert json.loads(ok(standalone, "namespaces", "bundles", "acme/orders"))["numBundles"] == 8
    topic = "persistent://acme/orders/events"
    ok(standalone, "topics", "create-partitioned-topic", topic, "-p", "3")
    metadata = json.loads(ok(standalone, "topics", "get-partitioned-topic-metadata", topic))
    assert metadata["partitions"] == 3

    client = make_client(standalone.service_url)
    try:
        consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic)
        for i in range(9):
            producer.send(b"m%d" % i)
        received = []
        for _ in range(9):
            message = consumer.receive(5000)
            consumer.acknowledge(message)
            received.append(message.data())
        assert sorted(received) == sorted(b"m%d" % i for i in range(9))

        stats = json.loads(ok(standalone, "topics", "partitioned-stats", topic, "--per-partition"))
        assert stats["msgInCounter"] == 9
        assert stats["metadata"]["partitions"] == 3
        assert len(stats["partitions"]) == 3
        assert len(stats["subscriptions"]["sub"]["consumers"]) == 3
        one = json.loads(ok(standalone, "topics", "stats", f"{topic}-partition-0"))
        assert "msgRateIn" in one
        assert "sub" in one["subscriptions"]

        assert ok(standalone, "topics", "unload", topic) == ""
        # The clients reconnect after the unload and keep working (spec §9).
        producer.send(b"after")
        assert consumer.receive(10_000).data() == b"after"
    finally:
        client.close()

    assert ok(standalone, "topics", "subscriptions", topic).strip().startswith("[")
    assert ok(standalone, "brokers", "healthcheck").strip() == "ok"


def test_errors_are_readable_and_exit_1(standalone: StandaloneProcess) -> None:
    done = admin(standalone, "namespaces", "policies", "nobody/nothing")
    assert done.returncode == 1
    assert done.stderr.strip() == "error: 404 Not Found: Namespace does not exist"
    done = admin(standalone, "topics", "create-partitioned-topic", "t", "-p", "0")
    assert done.returncode == 1
    assert "406 Not Acceptable: Number of partitions should be more than 0" in done.stderr
    done = admin(standalone, "tenants", "create", "public")
    assert (done.returncode, done.stderr.strip()) == (
        1,
        "error: 409 Conflict: Tenant already exist",
    )


def test_dynamic_config_round_trip(standalone: StandaloneProcess) -> None:
    names = json.loads(ok(standalone, "brokers", "list-dynamic-config"))
    assert "allowAutoTopicCreation" in names
    ok(standalone, "brokers", "update-dynamic-config", "--config", "defaultNumPartitions",
       "--value", "2")  # fmt: skip
    values = json.loads(ok(standalone, "brokers", "get-all-dynamic-config"))
    assert values == {"defaultNumPartitions": "2"}
    leader = json.loads(ok(standalone, "brokers", "leader-broker"))
    assert leader["serviceUrl"] == standalone.admin_url


def test_stats_show_producer_and_consumer_metadata_and_counters(
    standalone: StandaloneProcess,
) -> None:
    topic = "persistent://public/default/cli-stats-per-client"
    client = make_client(standalone.service_url)
    try:
        consumer = client.subscribe(
            topic, "s", consumer_name="cc", properties={"team": "x"}, receiver_queue_size=10
        )
        producer = client.create_producer(
            topic, producer_name="pp", properties={"app": "y"}, batching_enabled=False
        )
        for i in range(5):
            producer.send(b"x" * 100 + b"%d" % i)
        for _ in range(5):
            consumer.acknowledge(consumer.receive(5000))

        def sub_stats() -> tuple[dict[str, Any], dict[str, Any]]:
            stats = json.loads(ok(standalone, "topics", "stats", topic))
            return stats, stats["subscriptions"]["s"]

        # The client groups acks for up to 100 ms before it sends them.
        deadline = time.monotonic() + 10
        stats, sub = sub_stats()
        while sub["lastAckedTimestamp"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
            stats, sub = sub_stats()
        (publisher,) = stats["publishers"]
        assert (publisher["producerName"], publisher["metadata"]) == ("pp", {"app": "y"})
        (con,) = sub["consumers"]
        assert (con["consumerName"], con["metadata"]) == ("cc", {"team": "x"})
        assert con["msgOutCounter"] == sub["msgOutCounter"] == stats["msgOutCounter"] == 5
        assert con["bytesOutCounter"] == stats["bytesOutCounter"] > 500
        now_ms = time.time() * 1000
        for stamp in (con["lastConsumedTimestamp"], con["lastAckedTimestamp"]):
            assert now_ms - 60_000 < stamp <= now_ms
        assert sub["lastAckedTimestamp"] == con["lastAckedTimestamp"]
        assert con["unackedMessages"] == 0
    finally:
        client.close()


def test_rest_peek_examine_and_last_message_id_of_client_messages(
    standalone: StandaloneProcess,
) -> None:
    topic = "persistent://public/default/rest-peek"
    base = f"{standalone.admin_url}/admin/v2/persistent/public/default/rest-peek"
    client = make_client(standalone.service_url)
    try:
        client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            producer.send(b"m%d" % i, properties={"i": str(i)}, partition_key=f"k{i}")

        def get(path: str) -> tuple[bytes, Any]:
            with urllib.request.urlopen(f"{base}/{path}", timeout=10) as response:
                return response.read(), response.headers

        body, headers = get("subscription/s/position/2")
        assert body == b"m1"
        assert json.loads(headers["X-Pulsar-PROPERTY"]) == {"i": "1"}
        assert headers["X-Pulsar-partition-key"] == "k1"
        assert headers["Content-Type"] == "application/octet-stream"
        assert get("examinemessage?initialPosition=earliest&messagePosition=1")[0] == b"m0"
        assert get("examinemessage")[0] == b"m2"
        last = json.loads(get("lastMessageId")[0])
        assert (last["entryId"], last["partitionIndex"]) == (2, -1)
        by_id = get(f"ledger/{last['ledgerId']}/entry/0")
        assert by_id[1]["X-Pulsar-Message-ID"] == f"{last['ledgerId']}:0"

        # The same through the CLI, as pulsar-admin users run it.
        ledger = last["ledgerId"]
        peeked = ok(standalone, "topics", "peek-messages", "rest-peek", "-s", "s", "-n", "5")
        assert peeked.count("Message ID: ") == 3  # only three are there
        assert peeked.startswith(f"Message ID: {ledger}:0\n")
        assert "X-Pulsar-partition-key: k0\n" in peeked
        assert peeked.rstrip().endswith("\n\nm2")
        examined = ok(standalone, "topics", "examine-message", "rest-peek", "-i", "earliest")
        assert examined.startswith(f"Message ID: {ledger}:0\n")
        assert examined.endswith("\nm0\n")
        by_id_text = ok(
            standalone, "topics", "get-message-by-id", "rest-peek", "-l", str(ledger), "-e", "1"
        )
        assert by_id_text.endswith("\nm1\n")
        assert json.loads(ok(standalone, "topics", "last-message-id", "rest-peek")) == last
        ok(standalone, "topics", "create-subscription", "rest-peek", "-s", "late", "-m", "latest")
        missing = admin(standalone, "topics", "peek-messages", "rest-peek", "-s", "late")
        assert missing.returncode == 1
        assert "404 Not Found: Message not found" in missing.stderr
    finally:
        client.close()
