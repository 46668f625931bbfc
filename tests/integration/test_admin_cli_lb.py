"""``emubroker admin`` load-manager commands against an in-process broker: the isolation
policies' broker views, failure domains and topic lookup."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import pytest

from emubroker.testing import RunningBroker, run_broker_in_thread
from tests.integration.test_admin_cli_message_ttl import Cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with run_broker_in_thread() as running:
        yield running


@pytest.fixture
def cli(broker: RunningBroker, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(broker, capsys)


def broker_name(cli: Cli) -> str:
    [name] = json.loads(cli.ok("brokers", "list", "standalone"))
    return str(name)


def test_isolation_policy_broker_views(cli: Cli) -> None:
    me = broker_name(cli)
    policy = f"views-{uuid.uuid4().hex[:6]}"
    cli.ok(
        "ns-isolation-policy",
        "set",
        "standalone",
        policy,
        "--namespaces",
        "public/views.*",
        "--primary",
        re.escape(me),
        "--auto-failover-policy-params",
        "min_limit=1,usage_threshold=100",
    )
    try:
        expected = {
            "brokerName": me,
            "policyName": policy,
            "primary": True,
            "namespaceRegex": ["public/views.*"],
        }
        assert json.loads(cli.ok("ns-isolation-policy", "brokers", "standalone")) == [expected]
        shown = cli.ok("ns-isolation-policy", "broker", "standalone", "--broker", me)
        assert json.loads(shown) == expected
        code, _, err = cli("ns-isolation-policy", "broker", "nowhere", "--broker", me)
        assert (code, err) == (
            1,
            "error: 412 Precondition Failed: Cluster nowhere does not exist.\n",
        )
    finally:
        cli.ok("ns-isolation-policy", "delete", "standalone", policy)


def test_topics_lookup_prints_the_broker_url(cli: Cli, broker: RunningBroker) -> None:
    topic = f"persistent://public/default/lookup-{uuid.uuid4().hex[:6]}"
    assert cli.ok("topics", "lookup", topic) == broker.service_url + "\n"
    code, _, err = cli("topics", "lookup", "persistent://a/b/c/d/e")
    assert code == 1
    assert err.startswith("error: invalid topic name")


def test_failure_domain_commands(cli: Cli) -> None:
    d1, d2 = f"d1-{uuid.uuid4().hex[:6]}", f"d2-{uuid.uuid4().hex[:6]}"
    assert cli.ok("clusters", "create-failure-domain", "standalone", "--domain-name", d1,
                  "--broker-list", "b1:8080,b2:8080") == ""  # fmt: skip
    shown = cli.ok("clusters", "get-failure-domain", "standalone", "--domain-name", d1)
    assert json.loads(shown) == {"brokers": ["b1:8080", "b2:8080"]}
    code, _, err = cli("clusters", "create-failure-domain", "standalone", "--domain-name", d2,
                       "--broker-list", "b2:8080")  # fmt: skip
    assert (code, err) == (1, f"error: 409 Conflict: [b2:8080] already exists in {d1}\n")
    cli.ok("clusters", "update-failure-domain", "standalone", "--domain-name", d1,
           "--broker-list", "b1:8080")  # fmt: skip
    cli.ok("clusters", "create-failure-domain", "standalone", "--domain-name", d2,
           "--broker-list", "b2:8080")  # fmt: skip
    listed = json.loads(cli.ok("clusters", "list-failure-domains", "standalone"))
    assert {d1: {"brokers": ["b1:8080"]}, d2: {"brokers": ["b2:8080"]}}.items() <= listed.items()
    for domain in (d1, d2):
        assert (
            cli.ok("clusters", "delete-failure-domain", "standalone", "--domain-name", domain) == ""
        )
    code, _, err = cli("clusters", "get-failure-domain", "standalone", "--domain-name", d1)
    assert (code, err) == (
        1,
        f"error: 404 Not Found: Domain {d1} for cluster standalone does not exist\n",
    )
    with pytest.raises(SystemExit) as usage:
        cli("clusters", "get-failure-domain", "standalone")  # no --domain-name
    assert usage.value.code == 2
