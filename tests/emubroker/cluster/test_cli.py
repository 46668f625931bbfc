"""``emubroker cluster`` and ``standalone``: what they say about bad directories and configs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from emubroker.__main__ import _parser, main
from emubroker.cluster import cli as cluster_cli


@pytest.mark.parametrize(
    "argv",
    [
        ["cluster", "-n", "1", "--port", "0"],
        ["cluster", "status"],
        ["cluster", "stop"],
        ["standalone", "--port", "0", "--admin-port", "0"],
    ],
)
def test_a_data_dir_that_is_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    file = tmp_path / "not-a-dir"
    file.write_text("x")
    assert main([*argv, "--data-dir", str(file)]) == 2
    err = capsys.readouterr().err
    assert f"--data-dir {file} is not a directory" in err
    assert "Traceback" not in err


def test_a_run_dir_that_is_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "not-a-dir"
    file.write_text("x")
    assert main(["cluster", "-n", "1", "--port", "0", "--run-dir", str(file)]) == 2
    assert f"--run-dir {file} is not a directory" in capsys.readouterr().err


def test_port_keys_of_the_config_are_said_to_be_assigned_by_the_cluster(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerServicePort=7000\nwebServicePort=9000\nmaxMessageSize=1048576\n")
    args = _parser().parse_args(["cluster", "-n", "2", "--config", str(conf)])
    caplog.set_level(logging.WARNING, logger="emubroker.cluster")
    spec = cluster_cli._spec(args, tmp_path / "run")
    assert spec.port == 6650  # the cluster's, not the file's
    assert [r.getMessage() for r in caplog.records] == [
        f"{conf}: brokerServicePort=7000, webServicePort=9000 ignored: the cluster assigns each "
        "broker its ports (--port, --admin-port)"
    ]


def test_a_config_without_port_keys_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "broker.toml"
    conf.write_text("maxMessageSize = 1048576\nbrokerServicePortTls = 0\n")
    args = _parser().parse_args(["cluster", "-n", "2", "--config", str(conf)])
    caplog.set_level(logging.WARNING, logger="emubroker.cluster")
    cluster_cli._spec(args, tmp_path / "run")
    assert caplog.records == []


def test_a_tls_port_every_broker_would_share_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerServicePortTls=7651\n")
    argv = ["cluster", "-n", "2", "--port", "0", "--config", str(conf)]
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{conf}: brokerServicePortTls=7651 would be the port of all 2 brokers" in err


def test_a_binary_config_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"\x00\xb8\xff" * 50)
    assert main(["standalone", "--config", str(conf)]) == 2
    assert f"{conf}: not a configuration file: not UTF-8 text" in capsys.readouterr().err
