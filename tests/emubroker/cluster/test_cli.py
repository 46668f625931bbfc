"""``emubroker cluster`` and ``standalone`` refuse a data or run directory that is a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from emubroker.__main__ import main


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
