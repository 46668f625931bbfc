"""``emubroker admin`` message TTL and expire-messages commands against an in-process broker."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from emubroker.admin_cli import main
from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.conftest import make_client

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with run_broker_in_thread() as running:
        yield running


class Cli:
    """Runs ``emubroker admin`` commands in-process against the broker; returns (code, out, err)."""

    def __init__(self, broker: RunningBroker, capsys: pytest.CaptureFixture[str]) -> None:
        self.admin_url = broker.admin_url
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = main(["--admin-url", self.admin_url, *argv])
        out, err = self.capsys.readouterr()
        return code, out, err

    def ok(self, *argv: str) -> str:
        code, out, err = self(*argv)
        assert code == 0, (argv, out, err)
        return out


@pytest.fixture
def cli(broker: RunningBroker, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(broker, capsys)


def backlog(cli: Cli, topic: str, sub: str) -> int:
    stats: dict[str, Any] = json.loads(cli.ok("topics", "stats", topic))
    return int(stats["subscriptions"][sub]["msgBacklog"])


def test_message_ttl_set_get_remove_and_negative(cli: Cli) -> None:
    namespace = f"public/cli-ttl-{uuid.uuid4().hex[:8]}"
    cli.ok("namespaces", "create", namespace)
    assert cli.ok("namespaces", "get-message-ttl", namespace) == ""  # never set: Pulsar's null
    assert cli.ok("namespaces", "set-message-ttl", namespace, "-ttl", "2m") == ""
    assert json.loads(cli.ok("namespaces", "get-message-ttl", namespace)) == 120
    assert cli("namespaces", "set-message-ttl", namespace, "--messageTTL", "-1") == (
        1,
        "",
        "error: 412 Precondition Failed: Invalid value for message TTL, message TTL must >= 0\n",
    )
    assert json.loads(cli.ok("namespaces", "get-message-ttl", namespace)) == 120  # unchanged
    assert json.loads(cli.ok("namespaces", "policies", namespace))["message_ttl_in_seconds"] == 120
    assert cli.ok("namespaces", "remove-message-ttl", namespace) == ""
    assert cli.ok("namespaces", "get-message-ttl", namespace) == ""
    code, _, err = cli("namespaces", "get-message-ttl", "public/no-such-ns")
    assert (code, err) == (1, "error: 404 Not Found: Namespace does not exist\n")


def produce(service_url: str, topic: str, subs: list[str], count: int) -> None:
    client = make_client(service_url)
    try:
        for sub in subs:
            client.subscribe(topic, sub).close()  # durable, no consumer left connected
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(count):
            producer.send(b"m%d" % i)
    finally:
        client.close()


def test_expire_messages_of_one_subscription(broker: RunningBroker, cli: Cli) -> None:
    topic = f"persistent://public/default/cli-exp-{uuid.uuid4().hex[:8]}"
    produce(broker.service_url, topic, ["sub", "other"], 3)
    assert cli.ok("topics", "expire-messages", topic, "-s", "sub", "-t", "1h") == ""
    assert backlog(cli, topic, "sub") == 3  # nothing is an hour old
    assert cli.ok("topics", "expire-messages", topic, "--subscription", "sub", "-t", "0") == ""
    assert (backlog(cli, topic, "sub"), backlog(cli, topic, "other")) == (0, 3)
    assert cli("topics", "expire-messages", topic, "-s", "nope", "-t", "0") == (
        1,
        "",
        f"error: 404 Not Found: Subscription nope not found for topic {topic}\n",
    )
    code, _, err = cli("topics", "expire-messages", topic, "-s", "sub", "-t", "0")
    assert code == 1  # empty backlog: Pulsar does not issue the expiry
    assert err.startswith("error: 409 Conflict: Expire message by timestamp not issued on topic")


def test_expire_messages_of_all_subscriptions(broker: RunningBroker, cli: Cli) -> None:
    topic = f"persistent://public/default/cli-exp-all-{uuid.uuid4().hex[:8]}"
    produce(broker.service_url, topic, ["s1", "s2"], 4)
    assert (backlog(cli, topic, "s1"), backlog(cli, topic, "s2")) == (4, 4)
    short = topic.removeprefix("persistent://")
    assert cli.ok("topics", "expire-messages-all-subscriptions", short, "--expireTime", "0") == ""
    assert (backlog(cli, topic, "s1"), backlog(cli, topic, "s2")) == (0, 0)
    code, _, err = cli("topics", "expire-messages-all-subscriptions", f"{topic}-missing", "-t", "0")
    assert (code, err) == (1, f"error: 404 Not Found: Topic {topic}-missing not found\n")
