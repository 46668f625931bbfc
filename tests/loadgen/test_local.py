"""The broker settings loadgen resolves against a run's directory."""

from __future__ import annotations

from pathlib import Path

from loadgen.local import LocalCluster, _in_run_dir, start_local_cluster
from loadgen.local_cluster import ClusterProcess
from loadgen.scenario import Start
from protocol.clock import AnyioClock


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


def test_a_scenario_that_kills_the_stub_runs_its_one_broker_under_emubroker_cluster(
    tmp_path: Path,
) -> None:
    start = Start(brokers=1, storage="memory")
    assert isinstance(start_local_cluster(start, tmp_path, AnyioClock()), LocalCluster)
    launcher = start_local_cluster(start, tmp_path, AnyioClock(), stub_process=True)
    assert isinstance(launcher, ClusterProcess)
