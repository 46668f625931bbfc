"""conformance.admin_cli: pulsar-admin answers normalised, compared, judged; pulsar-perf checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.admin_cli import compare, normalise, normalise_text, perf, record, scenario
from conformance.diff import Allowance


def _answer(directory: Path, n: int, command: str, rc: int, out: str, err: str = "") -> None:
    directory.mkdir(exist_ok=True)
    (directory / f"{n}.cmd").write_text(command + "\n")
    (directory / f"{n}.rc").write_text(f"{rc}\n")
    (directory / f"{n}.out").write_text(out)
    (directory / f"{n}.err").write_text(err)


def test_normalise_text_replaces_what_differs_between_any_two_brokers() -> None:
    line = "owner localhost:40171 since 2026-11-29T03:14:25.123Z at 17:3 on 4.0.7"
    assert normalise_text(line) == "owner <address> since <time> at <ledger>:3 on <version>"
    assert normalise_text("Publish time: 1795922564246") == "Publish time: <time>"


def test_normalise_keeps_counters_and_hides_rates_and_names() -> None:
    stats = {
        "msgInCounter": 3,
        "msgRateIn": 1.5,
        "publishers": [{"producerName": "standalone-0-1"}],
    }
    assert normalise(stats) == {
        "msgInCounter": 3,
        "msgRateIn": "<volatile>",
        "publishers": [{"producerName": "<volatile>"}],
    }


def test_scenario_is_the_command_words_before_the_arguments() -> None:
    assert scenario("topics stats @T") == "admin/topics stats"
    assert (
        scenario("namespaces set-retention peers/ns --size 10M") == "admin/namespaces set-retention"
    )
    assert scenario("brokers healthcheck") == "admin/brokers healthcheck"


def test_record_of_a_failure_keeps_the_error_without_the_noise(tmp_path: Path) -> None:
    err = "SLF4J: no providers\n\nReason: Topic not found\n    at org.apache.X\n"
    _answer(tmp_path, 1, "topics stats @T", 1, "", err)
    assert record(tmp_path, 1) == {"exit": 1, "stdout": [], "error": "Reason: Topic not found"}


def test_compare_counts_the_differences_not_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pulsar, emubroker = tmp_path / "pulsar", tmp_path / "standalone"
    _answer(pulsar, 1, "tenants list", 0, '"public"\n"pulsar"\n')
    _answer(emubroker, 1, "tenants list", 0, '"public"\n"pulsar"\n')
    _answer(
        pulsar, 2, "namespaces get-retention peers/ns", 0, json.dumps({"retentionSizeInMB": 10})
    )
    _answer(
        emubroker, 2, "namespaces get-retention peers/ns", 0, json.dumps({"retentionSizeInMB": 1})
    )
    _answer(pulsar, 3, "brokers healthcheck", 0, "ok\n")
    _answer(emubroker, 3, "brokers healthcheck", 1, "", "HTTP 404 Not Found\n")
    assert compare(pulsar, [emubroker], []) == 4
    out = capsys.readouterr().out
    assert "| `tenants list` | 0 | 0 | same |" in out
    assert "stdout.retentionSizeInMB: Pulsar 10, emubroker 1" in out
    allow = [Allowance("admin/brokers healthcheck", "*", "a reason"),
             Allowance("admin/namespaces get-retention", "stdout.*", "a reason")]  # fmt: skip
    assert compare(pulsar, [emubroker], allow) == 0


def test_compare_judges_a_cluster_by_exit_code_only(tmp_path: Path) -> None:
    pulsar, standalone, cluster = tmp_path / "pulsar", tmp_path / "standalone", tmp_path / "cluster"
    _answer(pulsar, 1, "brokers list @C", 0, "localhost:8080\n")
    _answer(standalone, 1, "brokers list @C", 0, "localhost:8080\n")
    _answer(cluster, 1, "brokers list @C", 0, "a:1\nb:2\nc:3\n")
    assert compare(pulsar, [standalone, cluster], []) == 0
    _answer(cluster, 1, "brokers list @C", 1, "")
    assert compare(pulsar, [standalone, cluster], []) == 1


def _perf_run(directory: Path, sent: int, received: int, msg_in: int, msg_out: int) -> None:
    line = (
        "[perf-client-shutdown] INFO X - Aggregated throughput stats --- {} records {} --- 1 msg/s"
    )
    (directory / "perf-produce.out").write_text(line.format(sent, "sent"))
    (directory / "perf-consume.out").write_text(line.format(received, "received"))
    stats = {"msgInCounter": msg_in, "subscriptions": {"perf": {"msgOutCounter": msg_out}}}
    (directory / "perf-stats.json").write_text(json.dumps(stats))


def test_perf_aggregates_match_the_topic_counters(tmp_path: Path) -> None:
    # Pulsar 4.0.7's standalone for `--num-messages 1000`: 1001 sent and in, 1000 received of
    # the 1001 dispatched.
    _perf_run(tmp_path, 1001, 1000, 1001, 1001)
    assert perf(tmp_path) == 0


@pytest.mark.parametrize(
    ("sent", "received", "msg_in", "msg_out"),
    [(1001, 1000, 1000, 1000), (1001, 1000, 1001, 990), (1001, 1000, 1001, 1002)],
)
def test_perf_aggregates_the_counters_contradict_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sent: int, received: int, msg_in: int,
    msg_out: int,
) -> None:  # fmt: skip
    _perf_run(tmp_path, sent, received, msg_in, msg_out)
    assert perf(tmp_path) == 1
    assert "DIFFERS from the broker's stats" in capsys.readouterr().out
