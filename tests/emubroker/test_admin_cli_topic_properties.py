"""``emubroker admin topics get-properties / update-properties / remove-properties``.

pulsar-admin's names and options (``-p KEY=VALUE`` repeated, ``-k KEY``) on a topic's own
properties (``GET/PUT/DELETE TOPIC/properties``); the map printed as JSON, ``null`` for a
partitioned topic created without any (Pulsar's empty answer, which pulsar-admin prints so).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

import pytest

from emubroker import admin_cli
from emubroker.admin_cli import main
from tests.emubroker.test_admin_cli import FakeClient, run

if TYPE_CHECKING:
    from emubroker.testing import RunningBroker

PROPS = "/admin/v2/persistent/public/default/t/properties"


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (["topics", "get-properties", "t"], ("GET", PROPS, None)),
        (
            ["topics", "update-properties", "t", "-p", "a=b", "--property", "x=y,z"],
            ("PUT", PROPS, {"a": "b", "x": "y,z"}),
        ),
        # The value is all after the first '='; a later same key wins, as in pulsar-admin's map.
        (
            ["topics", "update-properties", "t", "-p", "k=v=w", "-p", "k=last"],
            ("PUT", PROPS, {"k": "last"}),
        ),
        (["topics", "update-properties", "t"], ("PUT", PROPS, {})),
        (["topics", "remove-properties", "t", "-k", "a b"], ("DELETE", f"{PROPS}?key=a%20b", None)),
        (["topics", "remove-properties", "t"], ("DELETE", PROPS, None)),
    ],
)
def test_property_commands_call_pulsars_paths(argv: list[str], call: tuple[str, str, Any]) -> None:
    assert run(*argv).calls == [call]


def test_a_property_without_a_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["topics", "update-properties", "t", "-p", "novalue"])
    assert usage.value.code == 2
    assert "expected KEY=VALUE, got 'novalue'" in capsys.readouterr().err


def test_the_map_is_the_answer_and_no_map_is_null() -> None:
    parser = argparse.ArgumentParser()
    admin_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["admin", "topics", "get-properties", "t"])
    assert args.run(FakeClient({("GET", PROPS): {"a": "1"}}), args) == {"a": "1"}
    assert args.run(FakeClient({("GET", PROPS): None}), args) == "null"


@pytest.mark.integration
def test_properties_set_read_and_removed_on_a_broker(
    pulsar_broker: RunningBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    def admin(*argv: str) -> str:
        assert main(["--admin-url", pulsar_broker.admin_url, *argv]) == 0, capsys.readouterr()
        return capsys.readouterr().out

    topic = "persistent://public/default/cli-props"
    admin("topics", "create", topic)
    assert json.loads(admin("topics", "get-properties", topic)) == {}
    assert admin("topics", "update-properties", topic, "-p", "owner=ops", "-p", "team=a=b") == ""
    assert json.loads(admin("topics", "get-properties", topic)) == {"owner": "ops", "team": "a=b"}
    assert admin("topics", "remove-properties", topic, "-k", "owner") == ""
    assert json.loads(admin("topics", "get-properties", topic)) == {"team": "a=b"}
    partitioned = "persistent://public/default/cli-pprops"
    admin("topics", "create-partitioned-topic", partitioned, "-p", "2")
    assert admin("topics", "get-properties", partitioned) == "null\n"
    admin("topics", "update-properties", partitioned, "-p", "k=v")
    assert json.loads(admin("topics", "get-properties", partitioned)) == {"k": "v"}
