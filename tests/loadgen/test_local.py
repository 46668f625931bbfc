"""The broker settings loadgen resolves against a run's directory."""

from __future__ import annotations

from pathlib import Path

from loadgen.local import _in_run_dir


def test_relative_trace_directories_live_in_the_run_directory(tmp_path: Path) -> None:
    config = {
        "emubrokerDispatchTraceDir": "dispatch",
        "emubrokerLoadBalancerTraceDir": "loadbalance",
        "clusterName": "c",
    }
    resolved = _in_run_dir(config, tmp_path)
    assert resolved == {
        "emubrokerDispatchTraceDir": str(tmp_path / "dispatch"),
        "emubrokerLoadBalancerTraceDir": str(tmp_path / "loadbalance"),
        "clusterName": "c",
    }
    absolute = str(tmp_path / "elsewhere")
    assert _in_run_dir({"emubrokerLoadBalancerTraceDir": absolute}, tmp_path) == {
        "emubrokerLoadBalancerTraceDir": absolute
    }
