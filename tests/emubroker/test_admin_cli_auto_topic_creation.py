"""``emubroker admin namespaces {set,get,remove}-auto-topic-creation``, as pulsar-admin's."""

from __future__ import annotations

import pytest

from emubroker.admin_cli import main
from tests.emubroker.test_admin_cli import run

PATH = "/admin/v2/namespaces/acme/ns/autoTopicCreation"


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (
            ["set-auto-topic-creation", "acme/ns", "--disable"],
            ("POST", PATH, {"allowAutoTopicCreation": False, "topicType": "non-partitioned"}),
        ),
        (
            ["set-auto-topic-creation", "acme/ns", "-e"],
            ("POST", PATH, {"allowAutoTopicCreation": True, "topicType": "non-partitioned"}),
        ),
        (
            ["set-auto-topic-creation", "acme/ns", "-e", "-t", "Partitioned", "-n", "3"],
            (
                "POST",
                PATH,
                {
                    "allowAutoTopicCreation": True,
                    "topicType": "partitioned",
                    "defaultNumPartitions": 3,
                },
            ),
        ),
        (["get-auto-topic-creation", "acme/ns"], ("GET", PATH, None)),
        (["remove-auto-topic-creation", "acme/ns"], ("DELETE", PATH, None)),
    ],
)
def test_auto_topic_creation_commands_call_pulsars_path(
    argv: list[str], call: tuple[str, str, object]
) -> None:
    assert run("namespaces", *argv).calls == [call]


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        ([], "Need to specify either --enable or --disable"),
        (["-e", "-d"], "Need to specify either --enable or --disable"),
        (["-e", "-t", "sharded"], "Must specify type of topic to be created."),
        (["-e", "-t", "partitioned"], "Must specify num-partitions or num-partitions > 0"),
        (["-e", "-t", "partitioned", "-n", "0"], "Must specify num-partitions"),
    ],
)
def test_what_pulsar_admin_refuses_is_a_one_line_error_and_sends_nothing(
    flags: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--admin-url", "http://127.0.0.1:9", "namespaces", "set-auto-topic-creation"]
    assert main([*argv, "acme/ns", *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {error}")
    assert err.count("\n") == 1
