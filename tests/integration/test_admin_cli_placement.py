"""``emubroker admin`` isolation policy and anti-affinity commands against an in-process broker."""

from __future__ import annotations

import json
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


def test_isolation_policies_are_set_listed_and_deleted(cli: Cli) -> None:
    name = f"pin-{uuid.uuid4().hex[:6]}"
    cli.ok(
        "ns-isolation-policy",
        "set",
        "standalone",
        name,
        "--namespaces",
        "public/iso.*,public/other",
        "--primary",
        "127\\.0\\.0\\.2",
        "--auto-failover-policy-params",
        "min_limit=1,usage_threshold=100",
    )
    expected = {
        "namespaces": ["public/iso.*", "public/other"],
        "primary": ["127\\.0\\.0\\.2"],
        "secondary": [],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": "1", "usage_threshold": "100"},
        },
    }
    assert json.loads(cli.ok("ns-isolation-policy", "get", "standalone", name)) == expected
    assert json.loads(cli.ok("ns-isolation-policy", "list", "standalone"))[name] == expected
    cli.ok("ns-isolation-policy", "delete", "standalone", name)
    code, _, err = cli("ns-isolation-policy", "get", "standalone", name)
    assert code == 1
    assert f"Cannot find NamespaceIsolationPolicy {name}" in err
    code, _, err = cli(
        "ns-isolation-policy",
        "set",
        "standalone",
        name,
        "--namespaces",
        "public/x",
        "--primary",
        "h",
        "--auto-failover-policy-params",
        "min_limit=1",
    )
    assert code == 1
    assert "Invalid format of input policy data" in err


def test_anti_affinity_groups_are_set_read_and_deleted(cli: Cli) -> None:
    namespace = f"public/cli-aa-{uuid.uuid4().hex[:8]}"
    cli.ok("namespaces", "create", namespace)
    assert cli.ok("namespaces", "get-anti-affinity-group", namespace) == ""
    cli.ok("namespaces", "set-anti-affinity-group", namespace, "--group", "g1")
    assert cli.ok("namespaces", "get-anti-affinity-group", namespace) == "g1\n"
    cli.ok("namespaces", "delete-anti-affinity-group", namespace)
    assert cli.ok("namespaces", "get-anti-affinity-group", namespace) == ""
