"""Runs that start a 3-broker `emubroker cluster`, and kill and restart one of its brokers."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from loadgen.__main__ import main

pytestmark = pytest.mark.integration

# Events run one after the other, and `kill` and `start` are `emubroker cluster` processes
# (a second or more each on a busy machine): the run lasts long enough for both.
SCENARIO = """
name = "cluster-kill-restart"
[cluster]
start = { brokers = 3, storage = "memory" }
[[producers]]
name = "in"
topic = "cluster-kill-restart"
rate = 200
size = 100
[[consumers]]
name = "out"
topic = "cluster-kill-restart"
subscription = "s"
[[phases]]
name = "steady"
duration = "15s"
[[events]]
at = "1.5s"
action = "kill_broker"
broker = 0
[[events]]
at = "3s"
action = "restart_broker"
broker = 0
"""


def test_a_three_broker_run_survives_a_broker_killed_and_restarted(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(SCENARIO)
    # A run path too long for the supervisor's control socket: the cluster runs in a short
    # directory, moved into the run's logs at the end.
    run_dir = tmp_path / ("long-" * 12) / "run"
    code = main(["run", str(scenario), "--trace-dir", str(run_dir), "--no-dashboard"])
    assert code == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cluster = manifest["cluster"]
    assert cluster["started_by_loadgen"]
    assert [b["name"] for b in cluster["brokers"]] == ["broker-0", "broker-1", "broker-2"]
    hosts = cluster["service_url"].removeprefix("pulsar://").split(",")
    assert hosts == [b["service_url"].removeprefix("pulsar://") for b in cluster["brokers"]]
    assert cluster["stub_url"].startswith("stub://127.0.0.1:")
    events = pq.read_table(run_dir / "events").to_pylist()
    assert [(e["action"], e["outcome"]) for e in events] == [
        ("KillBroker", "ok"),
        ("RestartBroker", "ok"),
    ]
    assert "broker-0 stopped by SIGKILL" in events[0]["detail"]
    assert "broker 0 started" in events[1]["detail"]
    (check,) = manifest["checks"]["subscriptions"]
    assert check["lost"] == 0
    assert check["acked"] > 500
    # The supervisor's own record of the kill and the restart, and every broker's log.
    supervisor = (run_dir / "logs" / "cluster.log").read_text()
    died = [json.loads(line) for line in supervisor.splitlines() if '"broker-died"' in line]
    assert [(e["broker"], "SIGKILL" in e["message"]) for e in died] == [(0, True)]
    assert '"event":"broker-started"' in supervisor
    for index in range(3):
        assert (run_dir / "logs" / "cluster" / f"broker-{index}.log").exists()
    assert (run_dir / "logs" / "cluster" / "state.json").exists()
