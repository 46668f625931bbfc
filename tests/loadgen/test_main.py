"""The command line's answers to bad input: a clear message and an exit code, no traceback."""

from __future__ import annotations

import pytest

from loadgen.__main__ import build_parser, main, scenario_from_args
from loadgen.scenario import Keys


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output
    return code, output


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["produce", "t", "--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["produce"], "the following arguments are required: TOPIC"),
        (["produce", "t", "-k", "zipf"], "expected none, round-robin"),
        (["produce", "t", "--trace-sample", "2"], "expected a number from 0 to 1"),
        (["produce", "t", "--workers", "0"], "expected at least 1"),
        (["consume", "t", "-st", "fanout"], "invalid choice: 'fanout'"),
        (["walk"], "invalid choice: 'walk'"),
    ],
)
def test_bad_flags_exit_2_with_the_reason(capsys, argv: list[str], message: str) -> None:
    code, output = run(capsys, *argv)
    assert code == 2
    assert message in output


def test_a_bad_scenario_exits_2_naming_the_line(capsys, tmp_path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "x"\n[cluster]\nservice_url = "pulsar://127.0.0.1:1"\n'
        '[[phases]]\nname = "p"\nduration = 1\n[[events]]\nat = 5\n'
        'action = "unload_topic"\ntopic = "t"\n'
    )
    code, output = run(capsys, "run", str(path))
    assert code == 2
    assert "s.toml: line 8: event at 5 s is past the end of the run (1 s)" in output


def test_a_small_message_size_is_refused(capsys) -> None:
    code, output = run(capsys, "produce", "t", "-s", "10")
    assert code == 2
    assert "size must be at least 40 bytes" in output


def test_an_unreachable_cluster_exits_3(capsys, tmp_path) -> None:
    code, output = run(
        capsys,
        "produce",
        "t",
        "-u",
        "pulsar://127.0.0.1:1",
        "--admin-url",
        "",
        "-time",
        "1",
        "--trace-dir",
        str(tmp_path / "run"),
    )
    assert code == 3
    assert "cannot reach the cluster at pulsar://127.0.0.1:1" in output


def test_a_cluster_that_cannot_start_exits_3_with_its_reason(capsys, tmp_path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "x"\n[cluster]\nstart = { brokers = 3, config = { brokerServicePort = "x" } }\n'
        '[[phases]]\nname = "p"\nduration = 1\n'
    )
    code, output = run(capsys, "run", str(path), "--trace-dir", str(tmp_path / "run"))
    assert code == 3
    assert "cannot start the cluster: cluster exited" in output
    assert "brokerServicePort" in output  # the supervisor's own words, from its log


def test_a_broker_that_cannot_start_quotes_its_last_lines_and_names_its_log(
    capsys, tmp_path
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "x"\n[cluster]\nstart = { brokers = 1, config = { maxMessageSize = "x" } }\n'
        '[[phases]]\nname = "p"\nduration = 1\n'
    )
    code, output = run(capsys, "run", str(path), "--trace-dir", str(tmp_path / "run"))
    assert code == 3
    # The same words as `emubroker cluster` says of a child that failed (one launcher).
    assert "cannot start the cluster: broker-0 exited with status 2 before it was ready" in output
    assert "  | emubroker: invalid configuration:" in output
    assert f"(its output is in {tmp_path / 'run' / 'logs' / 'broker-0.log'})" in output


def test_pulsar_perf_flags_become_a_scenario() -> None:
    args = build_parser().parse_args(
        [
            "produce",
            "a",
            "b",
            "-r",
            "1000",
            "-s",
            "100",
            "-n",
            "2",
            "-np",
            "4",
            "-m",
            "50",
            "-time",
            "30",
            "-b",
            "5",
            "-bm",
            "10",
            "-bb",
            "4096",
            "-o",
            "7",
            "-k",
            "zipf:20:1.3",
        ]
    )
    scenario = scenario_from_args(args)
    assert [g.name for g in scenario.producers] == ["produce-0", "produce-1"]
    group = scenario.producers[0]
    assert (group.rate, group.size, group.count, group.messages, group.max_outstanding) == (
        500,
        100,
        2,
        25,
        7,
    )
    assert group.keys == Keys(distribution="zipf", count=20, s=1.3)
    assert (group.batching.max_delay_ms, group.batching.max_messages, group.batching.max_bytes) == (
        5,
        10,
        4096,
    )
    assert [t.partitions for t in scenario.topics] == [4, 4]
    assert scenario.duration == 30
    consume = scenario_from_args(
        build_parser().parse_args(
            [
                "consume",
                "a",
                "-ss",
                "s",
                "-st",
                "key_shared",
                "-n",
                "3",
                "-q",
                "50",
                "-r",
                "10",
                "-time",
                "0",
            ]
        )
    )
    (cgroup,) = consume.consumers
    assert (
        cgroup.subscription,
        cgroup.type,
        cgroup.count,
        cgroup.receiver_queue,
        cgroup.ack_rate,
    ) == ("s", "Key_Shared", 3, 50, 30.0)
    assert consume.duration == float("inf")
    no_batching = scenario_from_args(build_parser().parse_args(["produce", "a", "-db"]))
    assert not no_batching.producers[0].batching.enabled
